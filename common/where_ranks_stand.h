// The ranks of a job grouped by where they stood when they were stopped
// (agent/core/stack_summary.h says where one stands): shared by the agent,
// which says it for its machine, and the coordinator, for the job. Pure.
#ifndef TRL_COMMON_WHERE_RANKS_STAND_H_
#define TRL_COMMON_WHERE_RANKS_STAND_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace trl {

// The ranks grouped by where they stand, the largest group first: "ranks
// 0, 2-5 in all_reduce (...), from train.py:88; rank 1 in <module>
// (train.py:41), the odd one out" (runs of three or more ranks as ranges).
// A rank alone where two or more others stand together is the odd one
// out. At most 8 places and about 4 KiB: the rest is counted ("and 12
// ranks in 5 other places"). `runs_on`, when given, says where a rank
// alone in its place runs ("on machine 1 (host node02)"), for a job of
// several machines: "rank 5 on machine 1 (host node02) in time.sleep ...".
std::string WhereRanksStand(
    const std::vector<std::pair<int, std::string>>& rank_and_where,
    const std::function<std::string(int rank)>& runs_on = {});

}  // namespace trl

#endif  // TRL_COMMON_WHERE_RANKS_STAND_H_

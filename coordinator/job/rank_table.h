// The current generation's ranks, in rank order (a machine's ranks are
// contiguous from its rank offset), with how many still live (pending or
// running) and how many started kept as events happen: at 4096 machines x
// 8 ranks, a walk per worker exit made a restart take minutes.
//
// Pure. Not thread-safe: the job state machine's owner serialises calls.
#ifndef TRL_COORDINATOR_JOB_RANK_TABLE_H_
#define TRL_COORDINATOR_JOB_RANK_TABLE_H_

#include <vector>

#include "coordinator/job/records.h"

namespace trl {

class RankTable {
 public:
  const std::vector<RankRecord>& all() const { return ranks_; }
  int size() const { return static_cast<int>(ranks_.size()); }
  // Ranks pending or running.
  int live() const { return live_; }

  // A new generation's ranks, every one pending.
  void Assign(const std::vector<NodeAssignment>& machines);
  // Local rank `local_rank` of machine `machine_rank`, whose ranks start at
  // `rank_offset`; nullptr if it has no such rank in this generation (a
  // report may never touch another machine's).
  RankRecord* Find(int machine_rank, int rank_offset, int local_world_size,
                   int local_rank);
  // A pending rank runs; returns whether every rank has started now.
  bool Started(RankRecord& rank, int pid);
  // A live rank ended (succeeded, failed, stopped) with `exit`.
  void Ended(RankRecord& rank, RankState state, const WorkerExit& exit);
  // Machine `machine_rank`'s live ranks are lost with it; returns how many.
  int LoseMachine(int machine_rank, int rank_offset, int local_world_size);

 private:
  std::vector<RankRecord> ranks_;
  int live_ = 0;
  int started_ = 0;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_RANK_TABLE_H_

// Global rank layout: ranks are contiguous per machine and ordered by
// machine_rank, never by the order in which agents arrived.
#ifndef TRL_COMMON_RANK_LAYOUT_H_
#define TRL_COMMON_RANK_LAYOUT_H_

#include <vector>

namespace trl {

struct RankLayout {
  // rank_offsets[m] is the global rank of machine m's local rank 0.
  std::vector<int> rank_offsets;
  int world_size = 0;
};

// `local_world_sizes[m]` is the number of workers on machine m.
RankLayout ComputeRankLayout(const std::vector<int>& local_world_sizes);

}  // namespace trl

#endif  // TRL_COMMON_RANK_LAYOUT_H_

#include "common/rank_layout.h"

namespace trl {

RankLayout ComputeRankLayout(const std::vector<int>& local_world_sizes) {
  RankLayout layout;
  layout.rank_offsets.reserve(local_world_sizes.size());
  for (int size : local_world_sizes) {
    layout.rank_offsets.push_back(layout.world_size);
    layout.world_size += size;
  }
  return layout;
}

}  // namespace trl

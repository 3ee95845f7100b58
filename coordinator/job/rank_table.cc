#include "coordinator/job/rank_table.h"

#include <algorithm>

namespace trl {

void RankTable::Assign(const std::vector<NodeAssignment>& machines) {
  ranks_.clear();
  for (const NodeAssignment& machine : machines) {
    for (int local = 0; local < machine.local_world_size; ++local) {
      RankRecord rank;
      rank.rank = machine.rank_offset + local;
      rank.local_rank = local;
      rank.machine_rank = machine.machine_rank;
      ranks_.push_back(rank);
    }
  }
  live_ = static_cast<int>(ranks_.size());
  started_ = 0;
}

RankRecord* RankTable::Find(int machine_rank, int rank_offset,
                            int local_world_size, int local_rank) {
  if (local_rank < 0 || local_rank >= local_world_size) return nullptr;
  const size_t index = rank_offset + local_rank;
  if (index >= ranks_.size()) return nullptr;
  // Only this machine's own ranks: a report may never touch another's.
  if (ranks_[index].machine_rank != machine_rank) return nullptr;
  return &ranks_[index];
}

bool RankTable::Started(RankRecord& rank, int pid) {
  rank.pid = pid;
  rank.state = RankState::kRunning;
  return ++started_ == static_cast<int>(ranks_.size());
}

void RankTable::Ended(RankRecord& rank, RankState state,
                      const WorkerExit& exit) {
  rank.exit = exit;
  rank.state = state;
  --live_;
}

int RankTable::LoseMachine(int machine_rank, int rank_offset,
                           int local_world_size) {
  const size_t first = rank_offset;
  const size_t end =
      std::min(ranks_.size(), first + static_cast<size_t>(local_world_size));
  int lost = 0;
  for (size_t i = first; i < end; ++i) {
    RankRecord& rank = ranks_[i];
    if (rank.machine_rank == machine_rank &&
        (rank.state == RankState::kPending ||
         rank.state == RankState::kRunning)) {
      rank.state = RankState::kLost;
      --live_;
      ++lost;
    }
  }
  return lost;
}

}  // namespace trl

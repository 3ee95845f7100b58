#include "coordinator/job/awaited_reports.h"

#include "absl/strings/str_cat.h"

namespace trl {

void AwaitedReports::Await(const std::vector<int>& machines,
                           TimePoint deadline) {
  if (machines_.empty()) deadline_ = deadline;
  machines_.insert(machines.begin(), machines.end());
}

AwaitedReports::Verdict AwaitedReports::Settle(
    const MachineTable& machines, RankTable& ranks, int64_t generation,
    std::chrono::milliseconds rejoin_timeout, TimePoint now) {
  Verdict verdict;
  for (auto it = machines_.begin(); it != machines_.end();) {
    const int m = *it;
    const NodeRecord& node = machines.at(m);
    if (!node.connected) {
      ++it;
      continue;
    }
    it = machines_.erase(it);
    const AgentInfo& report = node.info;
    const bool complete = report.report_generation == generation &&
                          static_cast<int>(report.reported_exits.size()) ==
                              report.local_world_size;
    if (!complete) {
      verdict.kind = Verdict::Kind::kMachineFailed;
      verdict.machine_rank = m;
      verdict.why =
          "lost its connection and came back without the outcome of every "
          "worker";
      return verdict;
    }
    for (const auto& [local, exit] : report.reported_exits) {
      RankRecord* rank =
          ranks.Find(m, node.rank_offset, report.local_world_size, local);
      if (rank == nullptr) continue;
      rank->exit = exit;
      if (exit.Succeeded()) {
        rank->state = RankState::kSucceeded;
        continue;
      }
      rank->state = RankState::kFailed;
      verdict.kind = Verdict::Kind::kRankFailed;
      verdict.machine_rank = m;
      verdict.rank = rank;
      return verdict;
    }
  }
  if (machines_.empty()) {
    verdict.kind = Verdict::Kind::kAllSucceeded;
  } else if (now > deadline_) {
    const int m = *machines_.begin();
    verdict.kind = Verdict::Kind::kMachineFailed;
    verdict.machine_rank = m;
    verdict.why = absl::StrCat(
        machines.at(m).lost_reason, " and did not come back within ",
        rejoin_timeout.count() / 1000.0, " s to report its workers");
  }
  return verdict;
}

}  // namespace trl

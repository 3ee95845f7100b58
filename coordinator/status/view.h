// The views of the job's status that a JobStatusRequest may ask for
// besides the whole: a summary of a large job (counts by state, what needs
// attention, the last failures) and one page of its machines or ranks,
// filtered by text. One implementation serves the coordinator, which
// builds them from its state machine (job_status.cc), and a client given
// the whole status by a coordinator older than these views
// (ApplyStatusRequest).
#ifndef TRL_COORDINATOR_STATUS_VIEW_H_
#define TRL_COORDINATOR_STATUS_VIEW_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "proto/trl_launch.pb.h"

namespace trl {

// Rows of the machines and ranks that need attention shown in a summary,
// failures kept in it, and the most rows one slice may ask for.
inline constexpr int kAttentionShown = 20;
inline constexpr int kRecentFailures = 20;
inline constexpr int kMaxSliceLimit = 1000;

// An empty request: the whole status (what clients before the views send).
bool AsksForWholeStatus(const trl::launch::v1::JobStatusRequest& request);

// A summary and nothing else.
trl::launch::v1::JobStatusRequest SummaryRequest();

// What /metrics shows: the summary (counts by state, failures) and every
// machine (heartbeat ages), no rank rows: its cost and size grow with the
// machines, not with the ranks.
trl::launch::v1::JobStatusRequest MetricsRequest();

// Lost, failed or stopped.
bool NeedsAttention(absl::string_view state);

// Fills a JobSummary's counts and attention rows, one row at a time. The
// states passed must outlive the builder (static names, or the strings of
// a message that outlives it).
class SummaryBuilder {
 public:
  explicit SummaryBuilder(trl::launch::v1::JobSummary* summary)
      : summary_(summary) {}
  // Counts a machine (rank) in `state`; returns where to write it if it is
  // one to show, nullptr if not.
  trl::launch::v1::NodeStatus* AddNode(absl::string_view state);
  trl::launch::v1::RankStatus* AddRank(absl::string_view state);
  // Writes the counts.
  void Finish();

 private:
  struct Count {
    absl::string_view state;
    int count;
  };
  static void CountIn(std::vector<Count>* counts, absl::string_view state);

  trl::launch::v1::JobSummary* summary_;
  std::vector<Count> machine_counts_;
  std::vector<Count> rank_counts_;
};

// A slice's filter, matched case-insensitively against a row's text.
class RowFilter {
 public:
  explicit RowFilter(const std::string& filter);
  bool MatchesNode(int machine_rank, absl::string_view hostname,
                   absl::string_view address, absl::string_view state);
  bool MatchesRank(int rank, int machine_rank, absl::string_view state);

 private:
  bool Contains();
  std::string filter_;  // lower case
  std::string text_;    // the row's, reused
};

// Walks `rows` in order; calls emit(row) for the matching ones that fall
// in the slice (a negative offset is 0; a limit over kMaxSliceLimit is
// kMaxSliceLimit); returns how many match.
template <typename Rows, typename Match, typename Emit>
int TakeSlice(const Rows& rows, const trl::launch::v1::ListSlice& slice,
              Match&& match, Emit&& emit) {
  const int64_t first = std::max(0, slice.offset());
  const int64_t end = first + std::clamp(slice.limit(), 0, kMaxSliceLimit);
  int matching = 0;
  for (const auto& row : rows) {
    if (!match(row)) continue;
    if (matching >= first && matching < end) emit(row);
    ++matching;
  }
  return matching;
}

// What `request` asks of the whole status `full` (an empty request: all of
// it, unchanged).
trl::launch::v1::JobStatus ApplyStatusRequest(
    const trl::launch::v1::JobStatus& full,
    const trl::launch::v1::JobStatusRequest& request);

}  // namespace trl

#endif  // TRL_COORDINATOR_STATUS_VIEW_H_

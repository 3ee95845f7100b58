#include "coordinator/status/view.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace trl {

namespace pb = trl::launch::v1;

bool AsksForWholeStatus(const pb::JobStatusRequest& request) {
  return !request.summary() && !request.has_nodes() && !request.has_ranks() &&
         !request.every_node();
}

pb::JobStatusRequest SummaryRequest() {
  pb::JobStatusRequest request;
  request.set_summary(true);
  return request;
}

pb::JobStatusRequest MetricsRequest() {
  pb::JobStatusRequest request = SummaryRequest();
  request.set_every_node(true);
  return request;
}

bool NeedsAttention(absl::string_view state) {
  return state == "lost" || state == "failed" || state == "stopped";
}

void SummaryBuilder::CountIn(std::vector<Count>* counts,
                             absl::string_view state) {
  // A handful of states: a linear search, the last one found first.
  if (!counts->empty() && counts->back().state == state) {
    ++counts->back().count;
    return;
  }
  for (Count& count : *counts) {
    if (count.state == state) {
      ++count.count;
      return;
    }
  }
  counts->push_back(Count{state, 1});
}

pb::NodeStatus* SummaryBuilder::AddNode(absl::string_view state) {
  summary_->set_machines(summary_->machines() + 1);
  CountIn(&machine_counts_, state);
  if (!NeedsAttention(state)) return nullptr;
  if (summary_->attention_nodes_size() < kAttentionShown) {
    return summary_->add_attention_nodes();
  }
  summary_->set_more_attention_nodes(summary_->more_attention_nodes() + 1);
  return nullptr;
}

pb::RankStatus* SummaryBuilder::AddRank(absl::string_view state) {
  summary_->set_ranks(summary_->ranks() + 1);
  CountIn(&rank_counts_, state);
  if (!NeedsAttention(state)) return nullptr;
  if (summary_->attention_ranks_size() < kAttentionShown) {
    return summary_->add_attention_ranks();
  }
  summary_->set_more_attention_ranks(summary_->more_attention_ranks() + 1);
  return nullptr;
}

void SummaryBuilder::Finish() {
  for (const Count& count : machine_counts_) {
    pb::StateCount* out = summary_->add_machine_states();
    out->set_state(std::string(count.state));
    out->set_count(count.count);
  }
  for (const Count& count : rank_counts_) {
    pb::StateCount* out = summary_->add_rank_states();
    out->set_state(std::string(count.state));
    out->set_count(count.count);
  }
}

RowFilter::RowFilter(const std::string& filter)
    : filter_(absl::AsciiStrToLower(filter)) {}

bool RowFilter::Contains() {
  absl::AsciiStrToLower(&text_);
  return absl::StrContains(text_, filter_);
}

bool RowFilter::MatchesNode(int machine_rank, absl::string_view hostname,
                            absl::string_view address,
                            absl::string_view state) {
  if (filter_.empty()) return true;
  text_.clear();
  absl::StrAppend(&text_, machine_rank, " ", hostname, " ", address, " ",
                  state);
  return Contains();
}

bool RowFilter::MatchesRank(int rank, int machine_rank,
                            absl::string_view state) {
  if (filter_.empty()) return true;
  text_.clear();
  absl::StrAppend(&text_, "rank ", rank, " machine ", machine_rank, " ", state);
  return Contains();
}

pb::JobStatus ApplyStatusRequest(const pb::JobStatus& full,
                                 const pb::JobStatusRequest& request) {
  if (AsksForWholeStatus(request)) return full;
  pb::JobStatus out = full;
  out.clear_nodes();
  out.clear_ranks();
  out.clear_failures();
  if (request.summary()) {
    pb::JobSummary* summary = out.mutable_summary();
    SummaryBuilder builder(summary);
    for (const auto& node : full.nodes()) {
      if (pb::NodeStatus* row = builder.AddNode(node.state())) *row = node;
    }
    for (const auto& rank : full.ranks()) {
      if (pb::RankStatus* row = builder.AddRank(rank.state())) *row = rank;
    }
    builder.Finish();
    summary->set_failures(full.failures_size());
    const int first = std::max(0, full.failures_size() - kRecentFailures);
    for (int i = first; i < full.failures_size(); ++i) {
      *summary->add_recent_failures() = full.failures(i);
    }
  }
  if (request.every_node()) {
    *out.mutable_nodes() = full.nodes();
  } else if (request.has_nodes()) {
    RowFilter filter(request.nodes().filter());
    out.set_nodes_matching(TakeSlice(
        full.nodes(), request.nodes(),
        [&](const pb::NodeStatus& n) {
          return filter.MatchesNode(n.machine_rank(), n.hostname(), n.address(),
                                    n.state());
        },
        [&](const pb::NodeStatus& n) { *out.add_nodes() = n; }));
  }
  if (request.has_ranks()) {
    RowFilter filter(request.ranks().filter());
    out.set_ranks_matching(TakeSlice(
        full.ranks(), request.ranks(),
        [&](const pb::RankStatus& r) {
          return filter.MatchesRank(r.rank(), r.machine_rank(), r.state());
        },
        [&](const pb::RankStatus& r) { *out.add_ranks() = r; }));
  }
  return out;
}

}  // namespace trl

#include "coordinator/status/table.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "coordinator/status/json.h"
#include "coordinator/status/view.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

std::string ExitText(int exit_code, int signal, const std::string& state) {
  if (state == "pending" || state == "running") return "-";
  if (state == "lost" || exit_code < 0) return "unknown";
  if (signal != 0) return absl::StrCat("signal ", signal);
  return std::to_string(exit_code);
}

// Every generation after the first is a restart of the job's workers,
// whatever ended the one before: a failure (from the budget), a handover
// to a spare, an elastic change or a coordinator's restart (none of the
// budget).
int RestartsInAll(const pb::JobStatus& s) {
  return std::max<int64_t>(0, s.generation());
}

std::string JobHeader(const pb::JobStatus& s) {
  // An elastic job: the generation's machines of MIN:MAX, and which.
  const bool elastic =
      s.min_machines() > 0 && s.min_machines() < s.num_machines();
  const std::string machines =
      elastic
          ? absl::StrCat(s.members_size(), " of ", s.min_machines(), ":",
                         s.num_machines(), " (members ",
                         s.members().empty() ? std::string("none yet")
                                             : absl::StrJoin(s.members(), ","),
                         ")")
          : std::to_string(s.num_machines());
  std::string out = absl::StrFormat(
      "JOB %s  state %s  generation %d  world size %d  machines %s  uptime "
      "%.1fs\n  restarts: %d (%d of the budget of %d used, %d left)\n  "
      "command: %s\n",
      s.job_id(), s.state(), s.generation(), s.world_size(), machines,
      s.uptime_s(), RestartsInAll(s), s.restarts_used(), s.max_restarts(),
      std::max(0, s.max_restarts() - s.restarts_used()),
      absl::StrJoin(s.command(), " "));
  if (s.awaited_count() > 0) {
    // The machines it waits for, and what to run on them.
    std::vector<std::string> ranks;
    for (int m : s.awaited_machines()) ranks.push_back(std::to_string(m));
    if (s.awaited_count() > s.awaited_machines_size()) ranks.push_back("...");
    absl::StrAppend(&out, "  waiting for: ", s.awaited_count(), " machine",
                    s.awaited_count() == 1 ? "" : "s", " not registered (",
                    absl::StrJoin(ranks, ", "), ")");
    if (!s.awaited_command().empty()) {
      absl::StrAppend(&out, "; on each, run: ", s.awaited_command(), " N");
    }
    absl::StrAppend(&out, "\n");
  }
  if (s.spares_size() > 0) {
    std::vector<std::string> spares;
    for (const auto& spare : s.spares()) {
      spares.push_back(absl::StrCat(
          spare.hostname(), " ", spare.address(),
          spare.unusable().empty() ? ""
                                   : " (unusable: " + spare.unusable() + ")"));
    }
    absl::StrAppend(&out, "  spares: ", s.spares_size(), " (",
                    absl::StrJoin(spares, ", "), ")\n");
  }
  for (const auto& cordon : s.cordoned()) {
    absl::StrAppend(&out, "  cordoned: ", cordon.hostname(), " (",
                    cordon.reason(), "; trl-coord uncordon ", cordon.hostname(),
                    " clears it)\n");
  }
  return out;
}

void AppendMachineHeader(std::string* out) {
  absl::StrAppendFormat(out, "\n%-8s %-20s %-16s %-14s %-8s %s\n", "MACHINE",
                        "HOST", "ADDRESS", "STATE", "WORKERS", "HEARTBEAT");
}

void AppendMachine(std::string* out, const pb::NodeStatus& node) {
  absl::StrAppendFormat(
      out, "%-8d %-20s %-16s %-14s %-8d %.1fs ago%s\n", node.machine_rank(),
      node.hostname(), node.address(), node.state(), node.workers(),
      node.last_heartbeat_age_s(),
      node.heartbeat_via().empty() ? "" : " (" + node.heartbeat_via() + ")");
}

void AppendRankHeader(std::string* out) {
  absl::StrAppendFormat(out, "\n%-6s %-6s %-8s %-8s %-20s %-10s %-8s %s\n",
                        "RANK", "LOCAL", "MACHINE", "PID", "HOST", "STATE",
                        "EXIT", "LAST LINE");
}

// A rank's newest line as a table cell: at most kShownBytes of it, cut
// where a character starts, and how long ago it was printed.
std::string LastLineCell(const pb::RankStatus& rank) {
  constexpr size_t kShownBytes = 72;
  if (rank.last_line().empty()) return "-";
  std::string text = rank.last_line();
  if (text.size() > kShownBytes) {
    size_t end = kShownBytes;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
      --end;
    }
    text = text.substr(0, end) + "...";
  }
  return absl::StrFormat("%s (%.0fs ago)", text, rank.last_line_age_s());
}

void AppendRank(std::string* out, const pb::RankStatus& rank) {
  absl::StrAppendFormat(
      out, "%-6d %-6d %-8d %-8d %-20s %-10s %-8s %s\n", rank.rank(),
      rank.local_rank(), rank.machine_rank(), rank.pid(),
      rank.hostname().empty() ? "-" : rank.hostname(), rank.state(),
      ExitText(rank.exit_code(), rank.signal(), rank.state()),
      LastLineCell(rank));
}

void AppendFailure(std::string* out, const pb::FailureRecord& failure) {
  absl::StrAppendFormat(out, "  generation %d: %s\n", failure.generation(),
                        failure.reason());
  for (const auto& line : failure.last_lines()) {
    absl::StrAppend(out, "    | ", line, "\n");
  }
}

// "running 32760, failed 1, stopped 7", in the order states first appear.
std::string Counts(
    const google::protobuf::RepeatedPtrField<pb::StateCount>& counts) {
  std::vector<std::string> parts;
  for (const auto& count : counts) {
    parts.push_back(absl::StrCat(count.state(), " ", count.count()));
  }
  return absl::StrJoin(parts, ", ");
}

// A large job at a glance: what is not as it should be, and the counts.
std::string FormatJobSummary(const pb::JobStatus& s) {
  constexpr int kFailuresShown = 5;
  const pb::JobSummary& summary = s.summary();
  std::string out = JobHeader(s);
  absl::StrAppend(&out, "\nmachines: ", Counts(summary.machine_states()), "\n");
  absl::StrAppend(&out, "ranks: ", Counts(summary.rank_states()), "\n");
  if (summary.attention_nodes_size() > 0) AppendMachineHeader(&out);
  for (const auto& node : summary.attention_nodes()) AppendMachine(&out, node);
  if (summary.more_attention_nodes() > 0) {
    absl::StrAppend(&out, "... and ", summary.more_attention_nodes(),
                    " more machines\n");
  }
  if (summary.attention_ranks_size() > 0) AppendRankHeader(&out);
  for (const auto& rank : summary.attention_ranks()) AppendRank(&out, rank);
  if (summary.more_attention_ranks() > 0) {
    absl::StrAppend(&out, "... and ", summary.more_attention_ranks(),
                    " more ranks\n");
  }
  if (summary.failures() > 0) {
    absl::StrAppend(&out, "\nFAILURES (root cause first)\n");
    const auto& recent = summary.recent_failures();
    const int shown = std::min(kFailuresShown, recent.size());
    const int earlier = summary.failures() - shown;
    if (earlier > 0) {
      absl::StrAppend(&out, "  (", earlier,
                      " earlier ones: trl-coord ps --json lists every one)\n");
    }
    for (int i = recent.size() - shown; i < recent.size(); ++i) {
      AppendFailure(&out, recent[i]);
    }
  }
  absl::StrAppendFormat(&out,
                        "\n(a summary of %d machines and %d ranks: "
                        "trl-coord ps --ranks lists every one)\n",
                        summary.machines(), summary.ranks());
  return out;
}

}  // namespace

std::string FormatJobTable(const pb::JobStatus& s, bool every_row) {
  if (s.has_summary()) return FormatJobSummary(s);
  if (!every_row && !PrintedWhole(s.nodes_size(), s.ranks_size())) {
    // A whole status of a large job (from a coordinator that predates
    // summaries): summarised as the coordinator would have.
    return FormatJobSummary(ApplyStatusRequest(s, SummaryRequest()));
  }
  std::string out = JobHeader(s);
  AppendMachineHeader(&out);
  for (const auto& node : s.nodes()) AppendMachine(&out, node);
  if (s.ranks_size() > 0) {
    AppendRankHeader(&out);
    for (const auto& rank : s.ranks()) AppendRank(&out, rank);
  }
  if (s.failures_size() > 0) {
    absl::StrAppend(&out, "\nFAILURES (root cause first)\n");
    for (const auto& failure : s.failures()) AppendFailure(&out, failure);
  }
  return out;
}

std::string FormatJobJson(const pb::JobStatus& status) {
  return MessageToJson(status);
}

}  // namespace trl

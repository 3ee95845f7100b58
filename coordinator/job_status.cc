#include "coordinator/job_status.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/secret_redaction.h"
#include "coordinator/status_json.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

double Seconds(TimePoint from, TimePoint to) {
  return std::chrono::duration<double>(to - from).count();
}

std::string NodeState(const JobStateMachine& machine, const NodeRecord& node) {
  if (!node.connected) return "lost";
  if (machine.phase() == JobPhase::kWaitingForAgents) return "registered";
  return JobPhaseName(machine.phase());
}

std::string ExitText(int exit_code, int signal, const std::string& state) {
  if (state == "pending" || state == "running") return "-";
  if (signal != 0) return absl::StrCat("signal ", signal);
  return std::to_string(exit_code);
}

}  // namespace

pb::JobStatus DescribeJob(const JobStateMachine& machine, TimePoint now) {
  pb::JobStatus status;
  status.set_job_id(machine.settings().job_id);
  status.set_state(JobPhaseName(machine.phase()));
  status.set_generation(machine.generation());
  status.set_world_size(machine.world_size());
  status.set_num_machines(machine.settings().num_machines);
  status.set_uptime_s(Seconds(machine.created_at(), now));
  status.set_restarts_used(machine.restarts_used());
  status.set_max_restarts(machine.settings().restart.max_restarts);
  // Anyone with the token may ask; secrets in the command stay hidden.
  for (const auto& arg : RedactSecrets(machine.settings().command)) {
    status.add_command(arg);
  }
  for (const auto& [m, node] : machine.nodes()) {
    pb::NodeStatus* out = status.add_nodes();
    out->set_machine_rank(m);
    out->set_hostname(node.info.hostname);
    out->set_address(node.info.advertise_addr);
    out->set_state(NodeState(machine, node));
    out->set_workers(node.info.local_world_size);
    out->set_last_heartbeat_age_s(Seconds(node.last_heartbeat, now));
  }
  for (const auto& rank : machine.ranks()) {
    pb::RankStatus* out = status.add_ranks();
    out->set_rank(rank.rank);
    out->set_local_rank(rank.local_rank);
    out->set_machine_rank(rank.machine_rank);
    out->set_pid(rank.pid);
    out->set_state(RankStateName(rank.state));
    out->set_exit_code(rank.exit.exit_code);
    out->set_signal(rank.exit.signal);
  }
  // Moments as seconds on uptime_s's clock; -1: not (yet).
  auto since_start = [&machine](const std::optional<TimePoint>& at) {
    return at ? Seconds(machine.created_at(), *at) : -1.0;
  };
  status.set_first_registration_at_s(
      since_start(machine.first_registration_at()));
  for (const auto& times : machine.timeline()) {
    pb::GenerationTimes* out = status.add_generations();
    out->set_generation(times.generation);
    out->set_assigned_at_s(since_start(times.assigned_at));
    out->set_running_at_s(since_start(times.running_at));
    out->set_stopping_at_s(since_start(times.stopping_at));
    out->set_ended_at_s(since_start(times.ended_at));
  }
  for (const auto& failure : machine.failures()) {
    pb::FailureRecord* out = status.add_failures();
    out->set_generation(failure.generation);
    out->set_rank(failure.rank);
    out->set_machine_rank(failure.machine_rank);
    out->set_hostname(failure.hostname);
    out->set_exit_code(failure.exit.exit_code);
    out->set_signal(failure.exit.signal);
    out->set_reason(failure.reason);
    for (const auto& line : failure.exit.last_lines) out->add_last_lines(line);
  }
  return status;
}

namespace {

std::string JobHeader(const pb::JobStatus& s) {
  return absl::StrFormat(
      "JOB %s  state %s  generation %d  world size %d  machines %d  uptime "
      "%.1fs\n  restarts: %d used, %d left\n  command: %s\n",
      s.job_id(), s.state(), s.generation(), s.world_size(), s.num_machines(),
      s.uptime_s(), s.restarts_used(),
      std::max(0, s.max_restarts() - s.restarts_used()),
      absl::StrJoin(s.command(), " "));
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
  absl::StrAppendFormat(out, "\n%-6s %-6s %-8s %-8s %-10s %s\n", "RANK",
                        "LOCAL", "MACHINE", "PID", "STATE", "EXIT");
}

void AppendRank(std::string* out, const pb::RankStatus& rank) {
  absl::StrAppendFormat(
      out, "%-6d %-6d %-8d %-8d %-10s %s\n", rank.rank(), rank.local_rank(),
      rank.machine_rank(), rank.pid(), rank.state(),
      ExitText(rank.exit_code(), rank.signal(), rank.state()));
}

void AppendFailure(std::string* out, const pb::FailureRecord& failure) {
  absl::StrAppendFormat(out, "  generation %d: %s\n", failure.generation(),
                        failure.reason());
  for (const auto& line : failure.last_lines()) {
    absl::StrAppend(out, "    | ", line, "\n");
  }
}

// "running 32760, failed 1, stopped 7", in the order states first appear.
template <typename Rows>
std::string CountsByState(const Rows& rows) {
  std::vector<std::pair<std::string, int>> counts;
  for (const auto& row : rows) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) {
      return c.first == row.state();
    });
    if (it == counts.end()) {
      counts.emplace_back(row.state(), 1);
    } else {
      ++it->second;
    }
  }
  std::vector<std::string> parts;
  for (const auto& [state, count] : counts) {
    parts.push_back(absl::StrCat(state, " ", count));
  }
  return absl::StrJoin(parts, ", ");
}

bool NeedsAttention(const std::string& state) {
  return state == "lost" || state == "failed" || state == "stopped";
}

// A large job at a glance: what is not as it should be, and the counts.
std::string FormatJobSummary(const pb::JobStatus& s) {
  constexpr int kShown = 20;
  constexpr int kFailuresShown = 5;
  std::string out = JobHeader(s);
  absl::StrAppend(&out, "\nmachines: ", CountsByState(s.nodes()), "\n");
  absl::StrAppend(&out, "ranks: ", CountsByState(s.ranks()), "\n");
  int shown = 0, more = 0;
  for (const auto& node : s.nodes()) {
    if (!NeedsAttention(node.state())) continue;
    if (shown == 0) AppendMachineHeader(&out);
    if (shown < kShown) {
      AppendMachine(&out, node);
      ++shown;
    } else {
      ++more;
    }
  }
  if (more > 0) absl::StrAppend(&out, "... and ", more, " more machines\n");
  shown = more = 0;
  for (const auto& rank : s.ranks()) {
    if (!NeedsAttention(rank.state())) continue;
    if (shown == 0) AppendRankHeader(&out);
    if (shown < kShown) {
      AppendRank(&out, rank);
      ++shown;
    } else {
      ++more;
    }
  }
  if (more > 0) absl::StrAppend(&out, "... and ", more, " more ranks\n");
  if (s.failures_size() > 0) {
    absl::StrAppend(&out, "\nFAILURES (root cause first)\n");
    const int first = std::max(0, s.failures_size() - kFailuresShown);
    if (first > 0) {
      absl::StrAppend(&out, "  (", first,
                      " earlier ones: trl-coord ps --json lists every one)\n");
    }
    for (int i = first; i < s.failures_size(); ++i) {
      AppendFailure(&out, s.failures(i));
    }
  }
  absl::StrAppendFormat(&out,
                        "\n(a summary of %d machines and %d ranks: "
                        "trl-coord ps --ranks lists every one)\n",
                        s.nodes_size(), s.ranks_size());
  return out;
}

}  // namespace

std::string FormatJobTable(const pb::JobStatus& s, bool every_row) {
  if (!every_row && (s.nodes_size() > kWholeTableMachines ||
                     s.ranks_size() > kWholeTableRanks)) {
    return FormatJobSummary(s);
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

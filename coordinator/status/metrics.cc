#include "coordinator/status/metrics.h"

#include <array>
#include <cmath>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

// Every rank state (job/state_machine.cc's RankStateName), shown even at
// zero so that a series does not vanish when its last rank leaves it.
constexpr std::array<const char*, 6> kRankStates = {
    "pending", "running", "succeeded", "failed", "stopped", "lost"};

// Rendezvous and restarts take from milliseconds (a few agents) to minutes
// (a machine that must come back).
constexpr std::array<double, 13> kDurationBuckets = {
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};

void Header(const char* name, const char* type, const char* help,
            std::string* out) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type,
                  "\n");
}

// Integers as integers (a counter of 1234567 must not become 1.23457e+06),
// the rest with enough digits for milliseconds over days.
std::string Number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value > -1e15 && value < 1e15 &&
      value == static_cast<double>(static_cast<int64_t>(value))) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  return absl::StrFormat("%.10g", value);
}

void Sample(const char* name, double value, std::string* out) {
  absl::StrAppend(out, name, " ", Number(value), "\n");
}

void LabelledSample(const char* name, const char* label,
                    const std::string& label_value, double value,
                    std::string* out) {
  absl::StrAppend(out, name, "{", label, "=\"", EscapeLabelValue(label_value),
                  "\"} ", Number(value), "\n");
}

// Rows by state, or a summary's counts.
template <typename Items, typename StateOf>
std::map<std::string, int64_t> CountRows(const Items& items, StateOf state_of) {
  std::map<std::string, int64_t> counts;
  for (const auto& item : items) ++counts[state_of(item)];
  return counts;
}
std::map<std::string, int64_t> Counted(
    const google::protobuf::RepeatedPtrField<pb::StateCount>& states) {
  std::map<std::string, int64_t> counts;
  for (const auto& state : states) counts[state.state()] += state.count();
  return counts;
}

// A gauge per state: the states in `always` (at zero if none), then any
// other state seen, in name order.
void CountsByState(const char* name, const char* help,
                   const std::vector<const char*>& always,
                   std::map<std::string, int64_t> counts, std::string* out) {
  for (const char* state : always) counts.emplace(state, 0);
  Header(name, "gauge", help, out);
  for (const auto& [state, count] : counts) {
    LabelledSample(name, "state", state, static_cast<double>(count), out);
  }
}

void Histogram(const char* name, const char* help,
               const std::vector<double>& observations, std::string* out) {
  Header(name, "histogram", help, out);
  double sum = 0;
  for (double value : observations) sum += value;
  for (double bound : kDurationBuckets) {
    int64_t count = 0;
    for (double value : observations) count += value <= bound ? 1 : 0;
    absl::StrAppend(out, name, "_bucket{le=\"", Number(bound), "\"} ", count,
                    "\n");
  }
  absl::StrAppend(out, name, "_bucket{le=\"+Inf\"} ", observations.size(), "\n",
                  name, "_sum ", Number(sum), "\n", name, "_count ",
                  observations.size(), "\n");
}

// Rendezvous of a generation: from when the job could start it (the first
// registration, or the end of the generation before) to its ranks handed
// out. Restart: from the failure that ended a generation to every rank of
// the next one started (the figure the design's targets name).
void Durations(const pb::JobStatus& s, std::vector<double>* rendezvous,
               std::vector<double>* restarts) {
  for (int i = 0; i < s.generations_size(); ++i) {
    const auto& times = s.generations(i);
    const double ready = i == 0 ? s.first_registration_at_s()
                                : s.generations(i - 1).ended_at_s();
    if (ready >= 0 && times.assigned_at_s() >= ready) {
      rendezvous->push_back(times.assigned_at_s() - ready);
    }
    if (i > 0 && times.running_at_s() >= 0) {
      const auto& before = s.generations(i - 1);
      const double failed_at = before.stopping_at_s() >= 0
                                   ? before.stopping_at_s()
                                   : before.ended_at_s();
      if (failed_at >= 0) restarts->push_back(times.running_at_s() - failed_at);
    }
  }
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '"') {
      out.append("\\\"");
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string FormatMetrics(const pb::JobStatus& s) {
  std::string out;
  Header("trl_launch_job_info", "gauge",
         "Always 1; the job's id and state as labels.", &out);
  absl::StrAppend(&out, "trl_launch_job_info{job_id=\"",
                  EscapeLabelValue(s.job_id()), "\",state=\"",
                  EscapeLabelValue(s.state()), "\"} 1\n");
  Header("trl_launch_generation", "gauge",
         "The current generation (-1 before the first starts).", &out);
  Sample("trl_launch_generation", static_cast<double>(s.generation()), &out);
  Header("trl_launch_world_size", "gauge", "Ranks of the current generation.",
         &out);
  Sample("trl_launch_world_size", s.world_size(), &out);
  Header("trl_launch_uptime_seconds", "gauge",
         "Seconds since the coordinator started.", &out);
  Sample("trl_launch_uptime_seconds", s.uptime_s(), &out);
  Header("trl_launch_restarts_total", "counter",
         "Restarts of the job taken from its budget so far (carried over by "
         "a resumed job); every restart, whatever ended the generation "
         "before, is trl_launch_generation.",
         &out);
  Sample("trl_launch_restarts_total", s.restarts_used(), &out);
  Header("trl_launch_restarts_allowed", "gauge",
         "Restarts the job may use in all (--max_restarts).", &out);
  Sample("trl_launch_restarts_allowed", s.max_restarts(), &out);
  Header("trl_launch_failures_total", "counter",
         "Failures in the job's history (a failing rank, a lost machine, a "
         "stop).",
         &out);
  Sample("trl_launch_failures_total",
         s.has_summary() ? s.summary().failures() : s.failures_size(), &out);
  Header("trl_launch_machines_expected", "gauge",
         "Machines the job runs on (num_machines).", &out);
  Sample("trl_launch_machines_expected", s.num_machines(), &out);

  CountsByState(
      "trl_launch_agents", "Registered machines' agents by state.", {"lost"},
      s.has_summary()
          ? Counted(s.summary().machine_states())
          : CountRows(s.nodes(),
                      [](const pb::NodeStatus& n) { return n.state(); }),
      &out);
  CountsByState(
      "trl_launch_ranks", "Ranks of the current generation by state.",
      std::vector<const char*>(kRankStates.begin(), kRankStates.end()),
      s.has_summary()
          ? Counted(s.summary().rank_states())
          : CountRows(s.ranks(),
                      [](const pb::RankStatus& r) { return r.state(); }),
      &out);

  Header("trl_launch_agent_heartbeat_age_seconds", "gauge",
         "Seconds since each machine's last heartbeat.", &out);
  for (const auto& node : s.nodes()) {
    LabelledSample("trl_launch_agent_heartbeat_age_seconds", "machine",
                   std::to_string(node.machine_rank()),
                   node.last_heartbeat_age_s(), &out);
  }

  // A machine none of whose ranks printed for long may be hung (a script
  // that prints on rank 0 only leaves the others at -1).
  Header("trl_launch_machine_output_age_seconds", "gauge",
         "Seconds since one of each machine's ranks last printed a line "
         "(-1: none yet).",
         &out);
  for (const auto& node : s.nodes()) {
    LabelledSample("trl_launch_machine_output_age_seconds", "machine",
                   std::to_string(node.machine_rank()),
                   node.last_output_age_s(), &out);
  }

  // Hosts given no ranks, and why: "health" (a failed health check, which
  // ends by itself) or "failures" (--cordon_after, until uncordoned).
  Header("trl_launch_cordoned_host", "gauge",
         "1 for each cordoned host; cause health (its agents' health checks "
         "fail) or failures (--cordon_after).",
         &out);
  for (const auto& cordon : s.cordoned()) {
    absl::StrAppend(&out, "trl_launch_cordoned_host{host=\"",
                    EscapeLabelValue(cordon.hostname()), "\",cause=\"",
                    cordon.health().empty() ? "failures" : "health", "\"} 1\n");
  }

  std::vector<double> rendezvous, restarts;
  Durations(s, &rendezvous, &restarts);
  Histogram("trl_launch_rendezvous_seconds",
            "Per generation: from when it could start (first registration, "
            "or the previous generation's end) to its ranks handed out.",
            rendezvous, &out);
  Histogram("trl_launch_restart_seconds",
            "Per restart: from the failure that ended a generation to every "
            "rank of the next one started.",
            restarts, &out);

  Header("trl_launch_refused_calls_total", "counter",
         "Calls refused for want of authentication.", &out);
  Sample("trl_launch_refused_calls_total",
         static_cast<double>(s.refused_calls()), &out);
  Header("trl_launch_connections_cut_total", "counter",
         "Connections closed over the per-address or total caps.", &out);
  Sample("trl_launch_connections_cut_total",
         static_cast<double>(s.connections_cut()), &out);
  return out;
}

}  // namespace trl

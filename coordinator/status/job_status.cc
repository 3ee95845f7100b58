#include "coordinator/status/job_status.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/secret_redaction.h"
#include "coordinator/status/view.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

double Seconds(TimePoint from, TimePoint to) {
  return std::chrono::duration<double>(to - from).count();
}

const char* NodeState(const JobStateMachine& machine, const NodeRecord& node) {
  if (!node.connected) return "lost";
  if (machine.phase() == JobPhase::kWaitingForAgents) return "registered";
  return JobPhaseName(machine.phase());
}

// The job's facts, without its machines, ranks and failures.
pb::JobStatus DescribeJobFacts(const JobStateMachine& machine, TimePoint now) {
  pb::JobStatus status;
  status.set_job_id(machine.settings().job_id);
  status.set_state(JobPhaseName(machine.phase()));
  status.set_generation(machine.generation());
  status.set_world_size(machine.world_size());
  status.set_num_machines(machine.settings().num_machines);
  status.set_min_machines(machine.settings().MinMachines());
  for (int m : machine.members()) status.add_members(m);
  for (const auto& [key, spare] : machine.spares()) {
    pb::SpareStatus* out = status.add_spares();
    out->set_hostname(spare.info.hostname);
    out->set_address(spare.info.advertise_addr);
    out->set_workers(spare.info.local_world_size);
    out->set_last_heartbeat_age_s(Seconds(spare.last_heartbeat, now));
    if (!spare.unusable.empty()) {
      out->set_unusable(spare.unusable);
    } else if (machine.cordoned().count(spare.info.hostname)) {
      out->set_unusable("its host is cordoned");
    }
  }
  for (const auto& [host, cordon] : machine.cordoned()) {
    pb::CordonStatus* out = status.add_cordoned();
    out->set_hostname(host);
    out->set_failures(cordon.failures);
    out->set_reason(cordon.Why());
    out->set_health(cordon.health);
  }
  // While the job waits for its machines: which have not registered.
  if (machine.phase() == JobPhase::kWaitingForAgents) {
    constexpr int kAwaitedShown = 64;
    int awaited = 0;
    for (int m = 0; m < machine.settings().num_machines; ++m) {
      const auto node = machine.nodes().find(m);
      if (node != machine.nodes().end() && node->second.connected) continue;
      if (++awaited <= kAwaitedShown) status.add_awaited_machines(m);
    }
    status.set_awaited_count(awaited);
  }
  status.set_uptime_s(Seconds(machine.created_at(), now));
  status.set_restarts_used(machine.restarts_used());
  status.set_max_restarts(machine.settings().restart.max_restarts);
  // Anyone with the token may ask; secrets in the command stay hidden.
  for (const auto& arg : RedactSecrets(machine.settings().command)) {
    status.add_command(arg);
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
  return status;
}

// How long ago one of a machine's ranks printed; -1 before any did.
double LastOutputAge(const NodeRecord& node, TimePoint now) {
  return node.last_output_at ? Seconds(*node.last_output_at, now) : -1.0;
}

void FillNode(const JobStateMachine& machine, int m, const NodeRecord& node,
              TimePoint now, pb::NodeStatus* out) {
  out->set_machine_rank(m);
  out->set_hostname(node.info.hostname);
  out->set_address(node.info.advertise_addr);
  out->set_state(NodeState(machine, node));
  out->set_workers(node.info.local_world_size);
  out->set_last_heartbeat_age_s(Seconds(node.last_heartbeat, now));
  out->set_last_output_age_s(LastOutputAge(node, now));
}

// A lost machine's rank exited we do not know how: -1, never the 0 of a
// success.
int ExitCodeShown(const RankRecord& rank) {
  return rank.state == RankState::kLost ? -1 : rank.exit.exit_code;
}

// How long ago a rank's newest line was heard; -1 before any.
double LastLineAge(const RankRecord& rank, TimePoint now) {
  return rank.last_line ? Seconds(rank.last_line_at, now) : -1.0;
}

void FillRank(const RankRecord& rank, TimePoint now, pb::RankStatus* out) {
  out->set_rank(rank.rank);
  out->set_local_rank(rank.local_rank);
  out->set_machine_rank(rank.machine_rank);
  out->set_pid(rank.pid);
  out->set_state(RankStateName(rank.state));
  out->set_exit_code(ExitCodeShown(rank));
  out->set_signal(rank.exit.signal);
  out->set_hostname(rank.hostname);
  if (rank.last_line) out->set_last_line(*rank.last_line);
  out->set_last_line_age_s(LastLineAge(rank, now));
}

void FillFailure(const FailureRecord& failure, pb::FailureRecord* out) {
  out->set_generation(failure.generation);
  out->set_rank(failure.rank);
  out->set_machine_rank(failure.machine_rank);
  out->set_hostname(failure.hostname);
  out->set_exit_code(failure.exit.exit_code);
  out->set_signal(failure.exit.signal);
  out->set_reason(failure.reason);
  for (const auto& line : failure.exit.last_lines) out->add_last_lines(line);
}

void SetVia(const HeartbeatVia& via, int machine_rank, pb::NodeStatus* out) {
  if (!via) return;
  if (const char* how = via(machine_rank)) out->set_heartbeat_via(how);
}

void Summarize(const JobStateMachine& machine, TimePoint now,
               const HeartbeatVia& via, pb::JobSummary* summary) {
  SummaryBuilder builder(summary);
  for (const auto& [m, node] : machine.nodes()) {
    if (pb::NodeStatus* row = builder.AddNode(NodeState(machine, node))) {
      FillNode(machine, m, node, now, row);
      SetVia(via, m, row);
    }
  }
  for (const auto& rank : machine.ranks()) {
    if (pb::RankStatus* row = builder.AddRank(RankStateName(rank.state))) {
      FillRank(rank, now, row);
    }
  }
  builder.Finish();
  const auto& failures = machine.failures();
  const int total = static_cast<int>(failures.size());
  summary->set_failures(total);
  for (int i = std::max(0, total - kRecentFailures); i < total; ++i) {
    FillFailure(failures[i], summary->add_recent_failures());
  }
}

void CopyNodeRows(const JobStateMachine& machine, TimePoint now,
                  const HeartbeatVia& via,
                  std::vector<JobStatusCopy::NodeRow>* rows) {
  rows->reserve(machine.nodes().size());
  for (const auto& [m, node] : machine.nodes()) {
    rows->push_back(JobStatusCopy::NodeRow{
        m, node.info.hostname, node.info.advertise_addr,
        NodeState(machine, node), node.info.local_world_size,
        Seconds(node.last_heartbeat, now), via ? via(m) : nullptr,
        LastOutputAge(node, now)});
  }
}

void CopyRankRows(const JobStateMachine& machine, TimePoint now,
                  std::vector<JobStatusCopy::RankRow>* rows) {
  rows->reserve(machine.ranks().size());
  for (const auto& rank : machine.ranks()) {
    rows->push_back(JobStatusCopy::RankRow{
        rank.rank, rank.local_rank, rank.machine_rank, rank.pid,
        RankStateName(rank.state), ExitCodeShown(rank), rank.exit.signal,
        rank.hostname, rank.last_line, LastLineAge(rank, now)});
  }
}

void AddNode(const JobStatusCopy::NodeRow& n, pb::JobStatus* status) {
  pb::NodeStatus* out = status->add_nodes();
  out->set_machine_rank(n.machine_rank);
  out->set_hostname(n.hostname);
  out->set_address(n.address);
  out->set_state(n.state);
  out->set_workers(n.workers);
  out->set_last_heartbeat_age_s(n.last_heartbeat_age_s);
  if (n.heartbeat_via) out->set_heartbeat_via(n.heartbeat_via);
  out->set_last_output_age_s(n.last_output_age_s);
}

void AddRank(const JobStatusCopy::RankRow& r, pb::JobStatus* status) {
  pb::RankStatus* out = status->add_ranks();
  out->set_rank(r.rank);
  out->set_local_rank(r.local_rank);
  out->set_machine_rank(r.machine_rank);
  out->set_pid(r.pid);
  out->set_state(r.state);
  out->set_exit_code(r.exit_code);
  out->set_signal(r.signal);
  out->set_hostname(r.hostname);
  if (r.last_line) out->set_last_line(*r.last_line);
  out->set_last_line_age_s(r.last_line_age_s);
}

}  // namespace

pb::JobStatus DescribeJob(const JobStateMachine& machine, TimePoint now) {
  pb::JobStatus status = DescribeJobFacts(machine, now);
  for (const auto& [m, node] : machine.nodes()) {
    FillNode(machine, m, node, now, status.add_nodes());
  }
  for (const auto& rank : machine.ranks()) {
    FillRank(rank, now, status.add_ranks());
  }
  for (const auto& failure : machine.failures()) {
    FillFailure(failure, status.add_failures());
  }
  return status;
}

JobStatusCopy CopyJobStatus(const JobStateMachine& machine, TimePoint now,
                            const pb::JobStatusRequest& request,
                            const HeartbeatVia& via) {
  JobStatusCopy copy;
  copy.request = request;
  copy.status = DescribeJobFacts(machine, now);
  if (AsksForWholeStatus(request)) {
    // Every row, copied as it is; the message is built off the owner.
    CopyNodeRows(machine, now, via, &copy.nodes);
    CopyRankRows(machine, now, &copy.ranks);
    for (const auto& failure : machine.failures()) {
      FillFailure(failure, copy.status.add_failures());
    }
    return copy;
  }
  if (request.summary()) {
    Summarize(machine, now, via, copy.status.mutable_summary());
  }
  if (request.every_node()) {
    CopyNodeRows(machine, now, via, &copy.nodes);  // built off the lock
  } else if (request.has_nodes()) {
    if (request.nodes().filter().empty()) {
      copy.status.set_nodes_matching(TakeSlice(
          machine.nodes(), request.nodes(), [](const auto&) { return true; },
          [&](const auto& entry) {
            pb::NodeStatus* row = copy.status.add_nodes();
            FillNode(machine, entry.first, entry.second, now, row);
            SetVia(via, entry.first, row);
          }));
    } else {
      CopyNodeRows(machine, now, via, &copy.nodes);
    }
  }
  if (request.has_ranks()) {
    const auto& ranks = machine.ranks();
    if (request.ranks().filter().empty()) {
      copy.status.set_ranks_matching(TakeSlice(
          ranks, request.ranks(), [](const auto&) { return true; },
          [&](const RankRecord& rank) {
            FillRank(rank, now, copy.status.add_ranks());
          }));
    } else {
      CopyRankRows(machine, now, &copy.ranks);
    }
  }
  return copy;
}

pb::JobStatus FinishJobStatus(JobStatusCopy copy) {
  const pb::JobStatusRequest& request = copy.request;
  pb::JobStatus& status = copy.status;
  if (AsksForWholeStatus(request)) {
    status.mutable_nodes()->Reserve(static_cast<int>(copy.nodes.size()));
    for (const auto& node : copy.nodes) AddNode(node, &status);
    status.mutable_ranks()->Reserve(static_cast<int>(copy.ranks.size()));
    for (const auto& rank : copy.ranks) AddRank(rank, &status);
    return std::move(status);
  }
  if (request.every_node()) {
    status.mutable_nodes()->Reserve(static_cast<int>(copy.nodes.size()));
    for (const auto& node : copy.nodes) AddNode(node, &status);
  } else if (request.has_nodes() && !request.nodes().filter().empty()) {
    RowFilter filter(request.nodes().filter());
    status.set_nodes_matching(TakeSlice(
        copy.nodes, request.nodes(),
        [&](const JobStatusCopy::NodeRow& n) {
          return filter.MatchesNode(n.machine_rank, n.hostname, n.address,
                                    n.state);
        },
        [&](const JobStatusCopy::NodeRow& n) { AddNode(n, &status); }));
  }
  if (request.has_ranks() && !request.ranks().filter().empty()) {
    RowFilter filter(request.ranks().filter());
    status.set_ranks_matching(TakeSlice(
        copy.ranks, request.ranks(),
        [&](const JobStatusCopy::RankRow& r) {
          return filter.MatchesRank(r.rank, r.machine_rank, r.state);
        },
        [&](const JobStatusCopy::RankRow& r) { AddRank(r, &status); }));
  }
  return std::move(status);
}

}  // namespace trl

#include "agent/core/agent_core.h"

#include <signal.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/private_files.h"

namespace trl {

namespace pb = trl::launch::v1;

AgentCore::AgentCore(AgentCoreSettings settings)
    : settings_(std::move(settings)) {}

std::chrono::milliseconds AgentCore::WaitLimit() const {
  // An agent whose coordinator never comes back leaves instead of waiting
  // for a job that is over.
  return had_session_ ? settings_.reconnect_timeout : settings_.connect_timeout;
}

int AgentCore::StopExitCode() const {
  return stop_signal_ != 0 ? 128 + stop_signal_ : 0;
}

AgentEffects AgentCore::StopRequested(const StopSignal& signal) {
  AgentEffects effects;
  const bool escalate = stop_signal_ != 0;
  if (!escalate) stop_signal_ = signal.number;
  // Workers may still be stopping after their session ended: a second
  // signal cuts their grace short then too.
  if (running_generation_ >= 0) {
    effects.signal_workers = escalate ? StopSignal{SIGKILL} : signal;
  }
  if (had_session_ && !ended_ && !escalate) {
    pb::AgentMessage message;
    auto* stopping = message.mutable_stopping();
    stopping->set_reason(
        std::string("received ") + SignalName(signal.number) +
        (signal.workers_have_it ? " (Slurm sent it to the workers)" : ""));
    stopping->set_signal(signal.number);
    stopping->set_workers_have_signal(signal.workers_have_it);
    effects.send.push_back(std::move(message));
  }
  return effects;
}

pb::AgentMessage AgentCore::StartSession(
    const pb::AgentRegistration& registration, Time now) {
  registration_ = registration;
  if (!had_session_) {
    spare_ = settings_.spare;
    may_be_spare_ = settings_.spare;
    machine_rank_ = spare_ ? -1 : registration.machine_rank();
  }
  // An agent that is or was a spare registers as one, with the machine it
  // stands for (it takes that back if it is still vacant, and waits as a
  // spare if not); a machine's own agent with its rank.
  registration_.set_spare(may_be_spare_);
  registration_.set_machine_rank(machine_rank_);
  last_heard_ = now;
  stream_sent_.clear();
  stream_sent_first_ = 1;
  expired_looking_since_.reset();
  lease_expired_ = false;
  sweeping_ = false;
  udp_open_ = false;
  next_heartbeat_ = now;
  running_generation_ = -1;
  assigned_generation_ = -1;
  connection_lost_ = false;
  ended_ = false;
  had_session_ = true;
  pb::AgentMessage hello;
  *hello.mutable_registration() = registration_;
  // The coordinator may never have heard of what the last generation's
  // workers did on their own before the last connection was lost.
  hello.mutable_registration()->clear_last_generation_exits();
  hello.mutable_registration()->clear_report_run_id();
  for (const auto& [local, exited] : own_exits_) {
    *hello.mutable_registration()->add_last_generation_exits() = exited;
  }
  if (!own_exits_.empty()) {
    hello.mutable_registration()->set_report_run_id(report_run_id_);
  }
  return hello;
}

namespace {
// Stream messages whose send time is kept until the coordinator says it
// read them. A word counting one forgotten renews nothing (it is old).
constexpr size_t kStreamSendsKept = 4096;
}  // namespace

void AgentCore::StreamMessageSent(Time now) {
  stream_sent_.push_back(now);
  if (stream_sent_.size() > kStreamSendsKept) {
    stream_sent_.pop_front();
    ++stream_sent_first_;
  }
}

std::optional<AgentCore::Time> AgentCore::StreamMessageSentAt(uint64_t count) {
  if (count < stream_sent_first_ ||
      count - stream_sent_first_ >= stream_sent_.size()) {
    return std::nullopt;
  }
  // Counts only grow: the messages before this one are needed no more.
  while (stream_sent_first_ < count) {
    stream_sent_.pop_front();
    ++stream_sent_first_;
  }
  return stream_sent_.front();
}

void AgentCore::Vouched(Time sent) {
  if (sent <= last_heard_) return;
  last_heard_ = sent;
  expired_looking_since_.reset();
}

AgentEffects AgentCore::Received(const pb::CoordinatorMessage& message,
                                 Time now) {
  // The coordinator's word that this machine is lost does not keep the
  // lease it fences (its ranks go elsewhere at the lease's end); any other
  // keeps it from when this agent sent what the coordinator had read.
  if (!(message.has_stop() && message.stop().fenced())) {
    if (const std::optional<Time> sent =
            StreamMessageSentAt(message.agent_messages_read())) {
      Vouched(*sent);
    }
  }
  AgentEffects effects;
  if (ended_) return effects;
  switch (message.body_case()) {
    case pb::CoordinatorMessage::kRegistrationReply:
      return Registered(message.registration_reply());
    case pb::CoordinatorMessage::kAssignment:
      return Assigned(message.assignment(), now);
    case pb::CoordinatorMessage::kRoleChange:
      return RoleChanged(message.role_change());
    case pb::CoordinatorMessage::kStop: {
      const auto& stop = message.stop();
      const bool ours =
          running_generation_ >= 0 && stop.generation() == running_generation_;
      if (stop.capture_only()) {
        // The coordinator holds the stop until every machine answers: one
        // with nothing of that generation to read (or fenced: its ranks go
        // elsewhere soon) answers at once. No signal yet either way.
        if (ours && !stop.fenced()) {
          effects.capture_only = stop.generation();
        } else {
          pb::AgentMessage captured;
          captured.mutable_stacks_captured()->set_generation(stop.generation());
          effects.send.push_back(std::move(captured));
        }
        break;
      }
      // Fencing: only the generation these workers run.
      if (!ours) break;
      effects.signal_workers =
          StopSignal{stop.signal() > 0 ? stop.signal() : SIGTERM,
                     stop.workers_have_signal()};
      effects.fence_grace = stop.fenced();
      // A fenced machine's ranks go elsewhere soon: no time for stacks.
      effects.capture_stacks = stop.capture_stacks() && !stop.fenced();
      break;
    }
    case pb::CoordinatorMessage::kFinished: {
      ended_ = true;
      effects.end =
          SessionEnd{SessionEnd::kJobFinished, message.finished().exit_code()};
      // The coordinator stays until every machine it told has heard.
      pb::AgentMessage heard;
      heard.mutable_job_end_heard();
      effects.send.push_back(std::move(heard));
      break;
    }
    default:
      break;
  }
  return effects;
}

AgentEffects AgentCore::Registered(const pb::RegistrationReply& reply) {
  AgentEffects effects;
  if (!reply.accepted()) {
    ended_ = true;
    effects.end = SessionEnd{SessionEnd::kRefused, 2};
    return effects;
  }
  // Accepted: the coordinator holds this machine lost (or new), so
  // whatever an earlier agent of it left on this host is ended now, before
  // any assignment is read: the coordinator gives the machine's ranks to an
  // agent on the same host at once, trusting this. (Before acceptance it
  // would kill a healthy agent's workers when a second agent is started by
  // mistake.)
  if (reply.spare()) {
    if (!spare_) {
      effects.role_changed = absl::StrCat(
          "registered as a spare: machine ", machine_rank_,
          "'s place was taken by a spare while this agent was away");
    }
    spare_ = true;
    may_be_spare_ = true;
    machine_rank_ = -1;
  } else if (spare_) {
    spare_ = false;
    machine_rank_ = reply.machine_rank();
    effects.role_changed = absl::StrCat("registered as machine ", machine_rank_,
                                        ", whose place this spare had taken");
  }
  effects.machine_rank = machine_rank_;
  // A spare sweeps nothing: the machine it asked for may be held by a
  // stand-in on this very host, whose workers a sweep would kill.
  effects.sweep_stale = !spare_;
  if (reply.heartbeat_udp_port() > 0 && settings_.udp_heartbeats) {
    effects.open_datagrams = AgentEffects::Datagrams{reply.heartbeat_udp_port(),
                                                     reply.heartbeat_session(),
                                                     reply.heartbeat_key()};
  }
  effects.check_command = registration_.checks_command();
  return effects;
}

AgentEffects AgentCore::RoleChanged(const pb::RoleChange& change) {
  AgentEffects effects;
  spare_ = change.spare();
  may_be_spare_ = may_be_spare_ || spare_;
  // Exits of what it ran as another machine are not this one's to report.
  report_generation_ = -1;
  own_exits_.clear();
  machine_rank_ = spare_ ? -1 : change.machine_rank();
  effects.machine_rank = machine_rank_;
  // The session's datagrams named the old machine (or none, a spare's):
  // heartbeats go on the stream until the new session's are acknowledged.
  udp_open_ = false;
  effects.close_datagrams = true;
  if (!spare_ && change.heartbeat_udp_port() > 0 && settings_.udp_heartbeats) {
    effects.open_datagrams = AgentEffects::Datagrams{
        change.heartbeat_udp_port(), change.heartbeat_session(),
        change.heartbeat_key()};
  }
  effects.role_changed =
      spare_ ? absl::StrCat("this agent is a spare now: ", change.reason())
             : absl::StrCat("this spare stands for machine ", machine_rank_,
                            " now: ", change.reason());
  return effects;
}

AgentEffects AgentCore::Assigned(const pb::Assignment& assignment, Time now) {
  AgentEffects effects;
  const int64_t generation = assignment.generation();
  // Fencing: generations only increase; an older or repeated one would run
  // ranks that have run (or run now) again.
  if (generation <= assigned_generation_) return effects;
  // Fencing: an assignment read after the lease ran out (it waited in the
  // socket of an agent that was frozen) may have been given to another
  // machine since: nothing starts, and the session ends as at the lease's
  // end (the agent registers again and is told what it is now).
  if (assignment.argv_size() > 0 && LeaseRanOut(now, generation, &effects)) {
    return effects;
  }
  assigned_generation_ = generation;
  report_generation_ = generation;
  report_run_id_ = assignment.run_id();
  own_exits_.clear();
  // Nothing of an older generation may survive.
  effects.end_workers = true;
  running_generation_ = -1;
  if (assignment.argv_size() == 0) return effects;
  // A job id becomes a directory name: a coordinator of another build (or
  // a hostile one) must not steer files out of log_dir. An agent asked to
  // stop starts nothing more (an assignment already on its way when it
  // said so, or one for a spare it was promoted to meanwhile).
  const char* refused = !IsValidJobId(assignment.job_id())
                            ? "the job id is not valid"
                        : stop_signal_ != 0 ? "the agent is stopping"
                                            : nullptr;
  if (refused != nullptr) {
    for (int local = 0; local < assignment.local_world_size(); ++local) {
      pb::WorkerExited exited;
      exited.set_generation(generation);
      exited.set_local_rank(local);
      exited.set_start_error(refused);
      AgentEffects report = WorkerExited(std::move(exited));
      for (auto& message : report.send) effects.send.push_back(message);
    }
    return effects;
  }
  running_generation_ = generation;
  effects.start_workers = assignment;
  return effects;
}

void AgentCore::UdpAcked(Time sent) { Vouched(sent); }

bool AgentCore::LeaseRanOut(Time now, int64_t generation,
                            AgentEffects* effects) {
  if (!lease_expired_ && now <= last_heard_ + settings_.lease) return false;
  // Its workers, if any, stop as at any lease's end, within the fence.
  lease_expired_ = true;
  effects->cancel_stream = true;
  effects->not_started = absl::StrCat(
      "not starting generation ", generation,
      ": this agent's lease ran out before its workers could start (the "
      "coordinator may have given these ranks to another machine since)");
  return true;
}

AgentEffects AgentCore::StartingWorkers(int64_t generation, Time now) {
  AgentEffects effects;
  if (generation == running_generation_ &&
      LeaseRanOut(now, generation, &effects)) {
    running_generation_ = -1;
  }
  return effects;
}

AgentEffects AgentCore::WorkersStarted(
    int64_t generation, const std::vector<std::pair<int, int>>& pids) {
  AgentEffects effects;
  if (generation != running_generation_) return effects;
  pb::AgentMessage message;
  auto* started = message.mutable_workers_started();
  started->set_generation(generation);
  for (const auto& [local_rank, pid] : pids) {
    auto* entry = started->add_workers();
    entry->set_local_rank(local_rank);
    entry->set_pid(pid);
  }
  effects.send.push_back(std::move(message));
  return effects;
}

AgentEffects AgentCore::WorkerExited(pb::WorkerExited exited, bool own_end) {
  AgentEffects effects;
  // Once the connection is lost, exits are the agent's doing (it stops
  // its workers), not the workers' own: they are not carried, unless the
  // worker had ended before the stop (read late: the agent was frozen).
  // A SIGKILL read after the loss is not the worker's own either: that is
  // what the guardian's fence sends a frozen agent's workers.
  const bool own = own_end && exited.signal() != SIGKILL;
  if ((!connection_lost_ || own) && exited.generation() == report_generation_) {
    pb::WorkerExited kept = exited;
    kept.clear_last_lines();  // the registration stays small
    own_exits_[kept.local_rank()] = std::move(kept);
  }
  pb::AgentMessage message;
  *message.mutable_worker_exited() = std::move(exited);
  effects.send.push_back(std::move(message));
  return effects;
}

AgentCore::Heartbeat AgentCore::HeartbeatAt(Time now,
                                            bool last_datagram_acked) {
  Heartbeat beat;
  beat.next = next_heartbeat_;
  if (ended_ || lease_expired_) {
    beat.next = now + settings_.heartbeat_interval;
    return beat;
  }
  if (now < next_heartbeat_) return beat;
  // Datagrams alone while each is acknowledged before the next is due;
  // the stream as well while one is not (a firewall, a lost datagram): the
  // coordinator then hears from this agent at least every 2 intervals,
  // within its 3-interval timeout.
  beat.datagram = udp_open_;
  beat.stream = !(udp_open_ && last_datagram_acked);
  next_heartbeat_ = now + settings_.heartbeat_interval;
  beat.next = next_heartbeat_;
  return beat;
}

std::optional<AgentCore::Time> AgentCore::FenceDeadline() const {
  // Kept after the session ended: workers still stopping after a lost
  // connection are held to it too.
  if (!had_session_ || sweeping_) return std::nullopt;
  return last_heard_ + settings_.lease + settings_.lease_grace +
         settings_.fence_kill_grace;
}

std::chrono::milliseconds AgentCore::FenceBound() const {
  // The guardian wakes on a timer and kills within a few milliseconds; a
  // loaded machine is given 200.
  return settings_.lease_grace + settings_.fence_kill_grace +
         std::chrono::milliseconds(200);
}

AgentCore::Lease AgentCore::LeaseAt(Time now) {
  Lease lease;
  if (lease_expired_) {
    lease.expired = true;
    return lease;
  }
  if (sweeping_) {
    lease.check_again = now + std::chrono::milliseconds(20);
    return lease;
  }
  const Time expires = last_heard_ + settings_.lease;
  if (now <= expires) {
    lease.check_again = expires + std::chrono::milliseconds(1);
    return lease;
  }
  if (!expired_looking_since_) {
    expired_looking_since_ = now;
  } else if (now - *expired_looking_since_ >= settings_.lease_grace) {
    lease_expired_ = true;
    lease.expired = true;
    return lease;
  }
  lease.check_again = *expired_looking_since_ + settings_.lease_grace;
  return lease;
}

SessionEnd AgentCore::StreamEnded() {
  connection_lost_ = true;
  ended_ = true;
  return SessionEnd{SessionEnd::kLost, 1};
}

SessionEnd AgentCore::Finished(SessionEnd end, bool not_authenticated) {
  // A wrong token will not get better by retrying.
  if (end.kind == SessionEnd::kLost && not_authenticated) {
    return SessionEnd{SessionEnd::kRefused, 2};
  }
  return end;
}

AgentCore::Next AgentCore::AfterSession(const SessionEnd& end) {
  ended_ = true;
  if (end.kind != SessionEnd::kLost) return Next{false, end.exit_code};
  if (stop_signal_ != 0) return Next{false, StopExitCode()};
  handshake_proven_ = true;
  return Next{true, end.exit_code};
}

std::optional<pb::WorkerExited> AgentCore::OwnExit(int64_t generation,
                                                   int local_rank) const {
  if (generation != report_generation_) return std::nullopt;
  const auto kept = own_exits_.find(local_rank);
  if (kept == own_exits_.end()) return std::nullopt;
  return kept->second;
}

void AgentCore::CarryEarlierExits(const std::string& run_id, int64_t generation,
                                  std::vector<pb::WorkerExited> exits) {
  if (had_session_ || exits.empty()) return;
  report_run_id_ = run_id;
  report_generation_ = generation;
  own_exits_.clear();
  for (auto& exited : exits) {
    exited.set_generation(generation);
    own_exits_[exited.local_rank()] = std::move(exited);
  }
}

std::vector<pb::WorkerExited> AgentCore::OwnExitsOfLastGeneration() const {
  std::vector<pb::WorkerExited> exits;
  for (const auto& [local, exited] : own_exits_) exits.push_back(exited);
  return exits;
}

}  // namespace trl

#include "coordinator/owner/core.h"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/worker_environment.h"
#include "coordinator/owner/agent_input.h"
#include "coordinator/owner/agent_messages.h"
#include "coordinator/status/job_status.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

std::shared_ptr<spdlog::logger> Log() { return ComponentLogger("coord"); }

}  // namespace

CoordinatorCore::CoordinatorCore(CoordinatorOptions options,
                                 RendezvousSource rendezvous, Clock clock,
                                 WallClock wall_clock)
    : options_(std::move(options)),
      clock_(std::move(clock)),
      wall_clock_(std::move(wall_clock)),
      machine_(JobSettingsOf(options_), clock_()),
      journal_(machine_, options_.state_file, options_.resume.has_value(),
               wall_clock_),
      waiting_report_(options_.waiting_report_interval, options_.agent_command,
                      options_.policy.registration_timeout),
      record_(options_.state_file, options_.job_id, options_.identity, clock_,
              wall_clock_, work_.AsOffload(), options_.run_id),
      preparer_(options_, std::move(rendezvous), clock_, machine_, agents_,
                record_, journal_, work_.AsOffload(),
                [this](const Decision& decision) { Execute(decision); }) {
  if (options_.resume) {
    record_.Resume(*options_.resume, options_.policy.restart.max_backoff,
                   machine_);
    journal_.Note(
        "resumed", -1,
        absl::StrCat("a restarted coordinator resumes the job after "
                     "generation ",
                     options_.resume->generation, ", ",
                     options_.resume->restarts_used, " restarts used"));
  }
}

pb::JobEvents CoordinatorCore::Events() const { return journal_.Events(); }

void CoordinatorCore::OnMessage(AgentLink* link,
                                const pb::AgentMessage& message) {
  agents_.Heard(link);
  if (message.has_registration()) {
    HandleRegistration(link, message.registration());
    if (const auto key = agents_.KeyOf(link);
        key && *key >= 0 && on_registered_) {
      on_registered_(*key, link);
    }
    return;
  }
  if (message.has_job_end_heard()) {
    if (farewells_.Heard(link)) link->Close();
    return;
  }
  const std::optional<int> key = agents_.KeyOf(link);
  if (!key) return;  // not registered: ignored
  const int m = *key;
  const TimePoint now = clock_();
  machine_.Heartbeat(m, now);  // any message proves the agent alive
  switch (message.body_case()) {
    case pb::AgentMessage::kWorkersStarted: {
      // Entries for ranks this machine does not have, or not pending, are
      // ignored by the state machine; the message size bounds their number.
      const auto& started = message.workers_started();
      for (const auto& worker : started.workers()) {
        machine_.WorkerStarted(m, started.generation(), worker.local_rank(),
                               worker.pid(), now);
      }
      break;
    }
    case pb::AgentMessage::kWorkerExited: {
      const auto& exited = message.worker_exited();
      Execute(machine_.WorkerExited(m, exited.generation(), exited.local_rank(),
                                    FromProto(exited), now));
      // The generation may be over: a restart without backoff starts now.
      // (Only then: a walk over every agent per worker exit is quadratic.)
      if (machine_.phase() == JobPhase::kRestarting) {
        Execute(machine_.Tick(now));
      }
      break;
    }
    case pb::AgentMessage::kCommandCheck: {
      const std::string problem =
          Bounded(message.command_check().problem(), kReasonBytes);
      if (!problem.empty()) {
        Log()->error("machine {} cannot run the command: {}", m, problem);
      }
      Execute(machine_.CommandChecked(m, problem, now));
      Execute(machine_.Tick(now));  // the last check may start the job
      break;
    }
    case pb::AgentMessage::kHealth: {
      const std::string problem = OneLine(message.health().problem());
      // Only a change is told and acted on: a report said again costs one
      // comparison.
      if (!machine_.HealthReported(m, problem)) break;
      const auto spare = machine_.spares().find(m);
      const auto node = machine_.nodes().find(m);
      journal_.TellHealth(
          m,
          spare != machine_.spares().end() ? spare->second.info.hostname
          : node != machine_.nodes().end() ? node->second.info.hostname
                                           : std::string("?"),
          problem);
      Execute(machine_.Tick(now));  // a spare may take its place now
      break;
    }
    case pb::AgentMessage::kStopping: {
      const auto& stopping = message.stopping();
      if (m < 0) {  // a spare leaves; the job goes on
        Log()->info("the spare on host {} is stopping: {}",
                    machine_.spares().count(m)
                        ? machine_.spares().at(m).info.hostname
                        : std::string("?"),
                    Bounded(stopping.reason(), kReasonBytes));
        // It leaves at once: its stream ends, and the agent with it.
        spare_leases_.erase(m);
        Unregister(link);
        link->Close();
        Execute(machine_.AgentDisconnected(m, now));
        return;
      }
      const int code = stopping.signal() > 0 ? 128 + stopping.signal() : 1;
      SendReleased(capture_barrier_.Release());  // as RequestStop
      if (stopping.signal() > 0) {
        RememberStopSignal(
            StopSignal{stopping.signal(), stopping.workers_have_signal()});
      }
      Execute(machine_.StopRequested(
          absl::StrCat("the agent of machine ", m,
                       " is stopping: ", stopping.reason()),
          code, now));
      break;
    }
    case pb::AgentMessage::kWorkerHung: {
      const auto& hung = message.worker_hung();
      Execute(machine_.WorkerHung(m, hung.generation(), hung.local_rank(),
                                  OneLine(hung.reason()), now));
      break;
    }
    case pb::AgentMessage::kRankOutput: {
      // Ranks this machine does not have in this generation are ignored
      // by the state machine; each line is bounded and made safe to show.
      for (const auto& line : message.rank_output().lines()) {
        // Its age as the agent measured it (a reconnect sends a line of an
        // hour ago again: it stays an hour old), within [0, a day].
        const auto age = std::chrono::milliseconds(
            std::clamp<int64_t>(line.age_ms(), 0, int64_t{86400000}));
        machine_.RankPrinted(m, line.generation(), line.rank(),
                             ProgressLine(line.text()), now - age);
      }
      break;
    }
    case pb::AgentMessage::kStacksCaptured:
      SendReleased(
          capture_barrier_.Captured(m, message.stacks_captured().generation()));
      break;
    case pb::AgentMessage::kHeartbeat: {
      if (heartbeats_.HeartbeatOnStream(link, now)) link->Send(HeartbeatAck());
      break;
    }
    default:
      break;
  }
  // No Tick here: a heartbeat must cost the same whatever the number of
  // agents, and timeouts are the ticker's job.
}

void CoordinatorCore::Execute(const Decision& decision) {
  journal_.TellStalls();
  for (int lost : decision.drop_agents) {
    journal_.TellLost(lost);
    for (AgentLink* link : agents_.StreamsOf(lost)) {
      Log()->warn("machine {} is lost: {}", lost,
                  machine_.nodes().at(lost).lost_reason);
      // Fencing: if it still hears us, it stops whatever it runs. Its
      // stream stays open until the generation has stopped: if the loss
      // ends the job, it hears that (and does not wait to rejoin a job
      // that is over); if not, it is closed then and the agent rejoins.
      // Its ranks go elsewhere at its lease's end + fence: this word keeps
      // no lease, and asks for the fence's grace, not the stop grace.
      pb::CoordinatorMessage stop =
          StopOrder(machine_.generation(), "this machine was declared lost");
      stop.mutable_stop()->set_fenced(true);
      link->Fenced();
      link->Send(stop);
      agents_.Fence(link);
      Unregister(link);
    }
  }
  journal_.TellNewCordons();
  ApplyHandovers(decision.handovers);
  for (int key : decision.drop_spares) {
    const std::vector<AgentLink*> streams = agents_.StreamsOf(key);
    if (streams.empty()) continue;
    Log()->warn("dropped a spare that went silent (stream from {})",
                streams.front()->Peer());
    SpareCut(key);
    streams.front()->Close();
    Unregister(streams.front());
  }
  if (decision.stop_generation) {
    journal_.TellStopping(*decision.stop_generation);
    SendStop(StopOrder(machine_.generation(), *decision.stop_generation,
                       stop_signal_, decision.capture_stacks),
             decision.capture_stacks && !decision.finished);
  }
  // A generation that has ended, however (its last exit, a lost machine, a
  // rejoining agent's report): where its ranks stood, before the job's end
  // is told and before the next generation's ranks take their place.
  const JobPhase phase = machine_.phase();
  if (machine_.generation() > stood_told_ && phase != JobPhase::kRunning &&
      phase != JobPhase::kStopping) {
    stood_told_ = machine_.generation();
    journal_.TellWhereRanksStood();
  }
  if (decision.finished) {
    SendReleased(capture_barrier_.Release());  // before the job's end
    journal_.TellFinished(*decision.finished);
    // A registered agent's stream stays open until it says it heard: one
    // cut just now is awaited (WaitForFarewells) and told again when its
    // agent registers again, so that it leaves with the job's code.
    for (AgentLink* link : agents_.open()) {
      link->Send(JobEnded(*decision.finished));
      if (const auto key = agents_.KeyOf(link)) {
        // A spare held nothing: its stream ends when it says it heard, and
        // nobody waits for a spare cut off now.
        farewells_.ToldAtTheEnd(link, *key);
        Unregister(link);  // nothing more is sent on it (no heartbeat acks)
      } else {
        link->Close();
      }
    }
    const TimePoint now = clock_();
    for (const auto& [m, node] : machine_.nodes()) {
      farewells_.AwaitUntil(m, now + node.info.lease + std::chrono::seconds(2));
      // A spare holds it: its old agent, lost, may be frozen and come back
      // while its workers may still run (its lease and fence) and 2 s
      // more; then it leaves with the job's code, not after its reconnect
      // timeout with 1 (nemesis, seed 8, --shapes spare).
      if (node.from_spare && node.old_agent_may_run_until > now) {
        farewells_.AwaitOldAgentUntil(
            m, node.old_agent_may_run_until + std::chrono::seconds(2));
      }
    }
    if (spares_cut_ > 0) {
      // A spare registers again as machine -1 (kSpareCutOff).
      farewells_.AwaitUntil(kSpareCutOff, now + longest_cut_spare_lease_ +
                                              std::chrono::seconds(2));
    }
    agents_.ForgetFenced();
    record_.Remove();
  }
  if (agents_.AnyFenced() && machine_.phase() != JobPhase::kStopping) {
    agents_.CloseFenced();
  }
  if (!decision.finished) record_.KeepIfChanged(machine_);
  if (decision.start_generation && !decision.finished) preparer_.Prepare();
  if (!in_disconnect_) ApplyLastWords();
}

void CoordinatorCore::SpareCut(int key) {
  if (IsFinished(machine_.phase())) return;
  const auto lease = spare_leases_.find(key);
  if (lease == spare_leases_.end()) return;
  ++spares_cut_;
  longest_cut_spare_lease_ = std::max(longest_cut_spare_lease_, lease->second);
  spare_leases_.erase(lease);
}

void CoordinatorCore::SendStop(pb::CoordinatorMessage stop, bool two_phases) {
  std::set<int> machines;
  bool every_one_answers = true;
  if (two_phases) {
    // Only machines with ranks of the generation still alive have anything
    // to read (a machine whose ranks all exited, frozen or not, is not
    // waited for); a spare runs nothing of it.
    std::set<int> running;
    for (const RankRecord& rank : machine_.ranks()) {
      if (rank.state == RankState::kPending ||
          rank.state == RankState::kRunning) {
        running.insert(rank.machine_rank);
      }
    }
    for (const auto& [link, key] : agents_.registered()) {
      if (key < 0 || running.count(key) == 0) continue;
      machines.insert(key);
      const auto node = machine_.nodes().find(key);
      every_one_answers = every_one_answers && node != machine_.nodes().end() &&
                          node->second.info.captures_before_stop;
    }
  }
  if (machines.size() < 2 || !every_one_answers) {
    // One machine reads its own workers before it signals them: nothing
    // to wait for. An older agent would take the first phase for the stop
    // itself, and never answer: one phase, as before.
    SendReleased(capture_barrier_.Release());
    agents_.SendTo({}, stop);
    return;
  }
  pb::CoordinatorMessage capture = stop;
  capture.mutable_stop()->set_capture_only(true);
  agents_.SendTo({}, capture);
  SendReleased(capture_barrier_.Hold(machine_.generation(), std::move(machines),
                                     std::move(stop), clock_() + kCaptureWait));
}

void CoordinatorCore::SendReleased(std::optional<pb::CoordinatorMessage> stop) {
  if (stop) agents_.SendTo({}, *stop);
}

void CoordinatorCore::RememberStopSignal(const StopSignal& signal) {
  // The first stop decides what workers receive first.
  if (!IsFinished(machine_.phase()) &&
      machine_.phase() != JobPhase::kStopping) {
    stop_signal_ = signal;
  }
}

std::optional<TimePoint> CoordinatorCore::NextDeadline() const {
  std::optional<TimePoint> next = machine_.NextDeadline(clock_());
  if (const auto held = capture_barrier_.deadline()) {
    next = next ? std::min(*next, *held) : *held;
  }
  return next;
}

void CoordinatorCore::Tick() {
  SendReleased(capture_barrier_.Due(clock_()));
  Execute(machine_.Tick(clock_()));
  SayWhoIsAwaited();
  journal_.Flush();
}

void CoordinatorCore::SayWhoIsAwaited() {
  const JobSettings& settings = machine_.settings();
  std::vector<int> missing;
  for (int m = 0; m < settings.num_machines; ++m) {
    auto node = machine_.nodes().find(m);
    if (node == machine_.nodes().end() || !node->second.connected) {
      missing.push_back(m);
    }
  }
  const int needed =
      settings.min_machines > 0 ? settings.min_machines : settings.num_machines;
  if (const auto line = waiting_report_.Due(
          machine_.phase() == JobPhase::kWaitingForAgents, missing, needed,
          settings.num_machines, clock_())) {
    Log()->warn("{}", *line);
  }
}

int CoordinatorCore::MachineOf(const AgentLink* link) const {
  return agents_.KeyOf(link).value_or(-1);
}

int CoordinatorCore::SendToMachines(const std::set<int>& machines,
                                    const pb::CoordinatorMessage& message) {
  return agents_.SendTo(machines, message);
}

void CoordinatorCore::Unregister(AgentLink* link) {
  const std::optional<int> key = agents_.KeyOf(link);
  if (key) SendReleased(capture_barrier_.Gone(*key));  // awaited no more
  agents_.Unregister(link);
  // (Unregistered, it is under no key: -1, a spare's, holds no session.)
  if (heartbeats_.Close(link, key.value_or(-1)) && key && *key >= 0) {
    last_words_heard_.push_back(*key);
  }
}

void CoordinatorCore::OnDisconnected(AgentLink* link) {
  agents_.Ended(link);
  farewells_.StreamEnded(link);  // its machine is still awaited
  if (const auto key = agents_.KeyOf(link)) {
    const int m = *key;
    in_disconnect_ = true;  // its last word is acted on after its loss
    Unregister(link);
    if (!IsFinished(machine_.phase())) {
      if (m < 0) {
        SpareCut(m);
        Log()->info("a spare disconnected ({})", link->Peer());
      } else {
        Log()->warn("the agent of machine {} disconnected", m);
      }
    }
    Execute(machine_.AgentDisconnected(m, clock_()));
    // A machine lost by a dropped connection is a "lost" event too, as
    // one lost by silence is (Execute notes those it drops).
    if (m >= 0 && !IsFinished(machine_.phase())) {
      auto node = machine_.nodes().find(m);
      if (node != machine_.nodes().end() && !node->second.connected) {
        journal_.TellLost(m);
      }
    }
    in_disconnect_ = false;
    ApplyLastWords();
    Execute(machine_.Tick(clock_()));
  }
}

void CoordinatorCore::RequestStop(const std::string& reason, int exit_code,
                                  const StopSignal& signal) {
  if (!IsFinished(machine_.phase()))
    journal_.Note("stop_requested", -1, reason);
  RememberStopSignal(signal);
  // A failure's stop held for the captures goes now: the operator wants
  // the job stopped, not read.
  SendReleased(capture_barrier_.Release());
  Execute(machine_.StopRequested(reason, exit_code, clock_()));
  Execute(machine_.Tick(clock_()));
}

std::set<std::string> CoordinatorCore::AgentPeers() const {
  return agents_.Peers();
}

pb::JobStatus CoordinatorCore::Status() const {
  return Status(pb::JobStatusRequest());
}

pb::JobStatus CoordinatorCore::Status(
    const pb::JobStatusRequest& request) const {
  return FinishJobStatus(CopyStatus(request));
}

JobStatusCopy CoordinatorCore::CopyStatus(
    const pb::JobStatusRequest& request) const {
  // Built only if a row is shown (a summary shows at most a few).
  std::optional<std::unordered_map<int, const char*>> via;
  auto heartbeat_via = [&](int machine_rank) -> const char* {
    if (!via) {
      via.emplace();
      for (const auto& [link, key] : agents_.registered()) {
        (*via)[key] = heartbeats_.Via(link);
      }
    }
    const auto found = via->find(machine_rank);
    return found == via->end() ? nullptr : found->second;
  };
  JobStatusCopy copy =
      CopyJobStatus(machine_, clock_(), request, heartbeat_via);
  if (copy.status.awaited_count() > 0) {
    copy.status.set_awaited_command(options_.agent_command);
  }
  if (defence_counts_) {
    const DefenceCounts counts = defence_counts_();
    copy.status.set_refused_calls(counts.refused_calls);
    copy.status.set_connections_cut(counts.connections_cut);
  }
  return copy;
}

void CoordinatorCore::ReportDefences(std::function<DefenceCounts()> counts) {
  defence_counts_ = std::move(counts);
}

bool CoordinatorCore::FarewellsHeard() {
  const bool heard = farewells_.AllHeard(clock_());
  return agents_.open().empty() && heard;
}

}  // namespace trl

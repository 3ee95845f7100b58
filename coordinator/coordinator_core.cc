#include "coordinator/coordinator_core.h"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/heartbeat_datagram.h"
#include "common/logging.h"
#include "common/worker_environment.h"
#include "coordinator/connection_limits.h"
#include "coordinator/job_status.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

std::shared_ptr<spdlog::logger> Log() { return ComponentLogger("coord"); }

// What every agent's registration must say: the config's fingerprint and
// the launcher settings they share.
std::map<std::string, std::string> FingerprintOf(
    const CoordinatorOptions& options) {
  auto fingerprint = AgreementFingerprint(options.config);
  fingerprint.insert(options.launcher_fingerprint.begin(),
                     options.launcher_fingerprint.end());
  return fingerprint;
}

int64_t UnixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What an agent says goes into the log, the failure history, `ps` and the
// status page: an agent of another build (or a hostile token holder) is
// held to what ours sends, not to gRPC's 4 MiB message limit.
constexpr size_t kNameBytes = 256;     // a hostname, an address, an id
constexpr size_t kReasonBytes = 1024;  // why a worker ended or cannot start
constexpr size_t kLineBytes = 2048;    // one of a failing rank's last lines
constexpr int kLines = 20;

// Cut on a character's boundary: a proto3 string that is not UTF-8 does
// not parse, and `ps` would fail on the whole status.
std::string Bounded(const std::string& text, size_t bytes) {
  if (text.size() <= bytes) return text;
  size_t end = bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;  // a UTF-8 continuation byte
  }
  return absl::StrCat(text.substr(0, end), "... [cut]");
}

WorkerExit FromProto(const pb::WorkerExited& exited) {
  WorkerExit exit;
  exit.exit_code = exited.exit_code();
  exit.signal = exited.signal();
  exit.start_error = Bounded(exited.start_error(), kReasonBytes);
  exit.out_of_resources =
      exited.out_of_resources() && !exited.start_error().empty();
  exit.reason = Bounded(exited.reason(), kReasonBytes);
  // Agents send at most 20 lines of about 1 KiB.
  const int first = std::max(0, exited.last_lines_size() - kLines);
  for (int i = first; i < exited.last_lines_size(); ++i) {
    exit.last_lines.push_back(Bounded(exited.last_lines(i), kLineBytes));
  }
  return exit;
}

}  // namespace

CoordinatorCore::CoordinatorCore(CoordinatorOptions options,
                                 RendezvousSource rendezvous, Clock clock)
    : options_(std::move(options)),
      rendezvous_(std::move(rendezvous)),
      clock_(std::move(clock)),
      machine_(
          JobSettings{options_.job_id, options_.config.num_machines,
                      options_.config.ProcessesPerMachine(),
                      FingerprintOf(options_), options_.worker_argv,
                      options_.restart, options_.agent_heartbeat_timeout,
                      options_.rejoin_timeout, options_.registration_timeout,
                      std::chrono::milliseconds(
                          static_cast<int64_t>(options_.stop_grace_s * 1000)),
                      options_.tick_interval, options_.config.min_machines,
                      options_.elastic_wait, options_.rescale_on_join,
                      options_.cordon_after, options_.cordon_window},
          clock_()),
      events_(JobEventLog::PathFor(options_.state_file),
              options_.resume.has_value()) {
  if (options_.resume) {
    // The rest of the backoff, from wall-clock time to the steady clock;
    // never more than the backoff's cap (a clock that jumped back).
    const auto rest =
        std::clamp(std::chrono::milliseconds(
                       options_.resume->not_before_unix_ms - UnixMillisNow()),
                   std::chrono::milliseconds(0), options_.restart.max_backoff);
    machine_.ResumeAfter(
        options_.resume->generation, options_.resume->restarts_used,
        options_.resume->failures, clock_() + rest, options_.resume->hosts);
    machine_.RestoreCordons(options_.resume->cordoned);
    persisted_restarts_ = options_.resume->restarts_used;
    persisted_failures_ = options_.resume->failures.size();
    Note("resumed", -1,
         absl::StrCat("a restarted coordinator resumes the job after "
                      "generation ",
                      options_.resume->generation, ", ",
                      options_.resume->restarts_used, " restarts used"));
  }
}

void CoordinatorCore::Note(const char* kind, int machine_rank,
                           std::string text) {
  pb::JobEvent event;
  event.set_generation(machine_.generation());
  event.set_kind(kind);
  event.set_machine_rank(machine_rank);
  event.set_text(std::move(text));
  // Registrations come in storms: written with the next tick.
  const bool deferred =
      event.kind() == "registered" || event.kind() == "rejoined";
  events_.Append(std::move(event), deferred);
}

pb::JobEvents CoordinatorCore::Events() const { return events_.All(); }

void CoordinatorCore::OffloadWork(std::function<void()> work,
                                  std::function<void()> done) {
  ++outstanding_work_;
  auto finish = [this, done = std::move(done)] {
    --outstanding_work_;
    done();
  };
  if (!offload_) {
    work();
    finish();
    return;
  }
  offload_(std::move(work), std::move(finish));
}

JobRecord CoordinatorCore::RecordOf(int64_t generation) const {
  JobRecord record;
  record.job_id = options_.job_id;
  record.generation = generation;
  record.restarts_used = machine_.restarts_used();
  record.identity = options_.identity;
  const TimePoint now = clock_();
  if (machine_.next_start_not_before() > now) {
    record.not_before_unix_ms =
        UnixMillisNow() + std::chrono::duration_cast<std::chrono::milliseconds>(
                              machine_.next_start_not_before() - now)
                              .count();
  }
  record.failures = machine_.failures();
  for (const auto& [m, node] : machine_.nodes()) {
    record.hosts[m] = node.info.host();
  }
  for (auto& failure : record.failures) failure.exit.last_lines.clear();
  record.cordoned = machine_.cordoned();
  return record;
}

void CoordinatorCore::PersistInBackground(JobRecord record) {
  // Noted as asked for at once: Execute asks again only for a new change
  // (or after a failure, below).
  persisted_restarts_ = record.restarts_used;
  persisted_failures_ = record.failures.size();
  auto saved = std::make_shared<absl::Status>();
  OffloadWork(
      [saved, record = std::move(record), path = options_.state_file] {
        *saved = SaveJobRecord(path, record);
      },
      [this, saved] {
        if (saved->ok()) return;
        // A counted restart, its backoff and the failure history outlive
        // this process; the next change, or the next generation's start,
        // tries again (and that does not start without).
        Log()->warn("the job's state is not kept: {}",
                    std::string(saved->message()));
        persisted_restarts_ = -1;
      });
}

void CoordinatorCore::OnMessage(AgentLink* link,
                                const pb::AgentMessage& message) {
  links_.insert(link);
  if (message.has_registration()) {
    HandleRegistration(link, message.registration());
    if (auto it = registered_.find(link);
        it != registered_.end() && on_registered_) {
      on_registered_(it->second.machine_rank, link);
    }
    return;
  }
  if (message.has_job_end_heard()) {
    if (auto told = told_of_end_.find(link); told != told_of_end_.end()) {
      awaiting_farewell_.erase(told->second);
      told_of_end_.erase(told);
      link->Close();
    }
    return;
  }
  auto found = registered_.find(link);
  if (found == registered_.end()) return;  // not registered: ignored
  Registered& agent = found->second;
  const int m = agent.machine_rank;
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
    case pb::AgentMessage::kStopping: {
      const auto& stopping = message.stopping();
      if (m < 0) {  // a spare leaves; the job goes on
        Log()->info("the spare on host {} is stopping: {}",
                    machine_.spares().count(m)
                        ? machine_.spares().at(m).info.hostname
                        : std::string("?"),
                    Bounded(stopping.reason(), kReasonBytes));
        break;
      }
      const int code = stopping.signal() > 0 ? 128 + stopping.signal() : 1;
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
    case pb::AgentMessage::kHeartbeat: {
      agent.heartbeat_via = "stream";
      if (agent.last_ack == TimePoint{} ||
          now - agent.last_ack >= agent.ack_every) {
        pb::CoordinatorMessage ack;
        ack.mutable_heartbeat_ack();
        link->Send(ack);
        agent.last_ack = now;
      }
      break;
    }
    default:
      break;
  }
  // No Tick here: a heartbeat must cost the same whatever the number of
  // agents, and timeouts are the ticker's job.
}

void CoordinatorCore::HandleRegistration(AgentLink* link,
                                         const pb::AgentRegistration& request) {
  if (registered_.count(link)) return;  // registers once per stream
  AgentInfo info;
  info.machine_rank = request.machine_rank();
  info.hostname = Bounded(request.hostname(), kNameBytes);
  info.host_id = Bounded(request.host_id(), kNameBytes);
  info.advertise_addr = Bounded(request.advertise_addr(), kNameBytes);
  info.interface_name = Bounded(request.interface_name(), kNameBytes);
  info.local_world_size = request.local_world_size();
  info.local_device_count = request.local_device_count();
  info.agent_pid = request.agent_pid();
  info.checks_command = request.checks_command();
  info.spare = request.spare();
  for (const auto& exited : request.last_generation_exits()) {
    // One generation's report; anything else in it is ignored.
    if (info.report_generation < 0)
      info.report_generation = exited.generation();
    if (exited.generation() == info.report_generation &&
        exited.local_rank() >= 0 &&
        exited.local_rank() < request.local_world_size()) {
      info.reported_exits[exited.local_rank()] = FromProto(exited);
    }
  }
  info.lease = std::chrono::milliseconds(std::max(0, request.lease_ms()));
  info.config_fingerprint.insert(request.config_fingerprint().begin(),
                                 request.config_fingerprint().end());
  if (const auto& outcome = machine_.outcome(); outcome) {
    // The job ended while this agent was away (frozen, cut off, or its
    // coordinator frozen): it learns how, and leaves with the job's code,
    // instead of being refused as a stranger (nemesis, seed 1).
    TellOfEnd(link, *outcome);
    if (awaiting_farewell_.count(info.machine_rank)) {
      told_of_end_[link] = info.machine_rank;
    } else {
      link->Close();
    }
    return;
  }
  const bool rejoin = machine_.nodes().count(info.machine_rank) > 0;
  const absl::StatusOr<int> key = machine_.Admit(info, clock_());
  const absl::Status status = key.status();
  pb::CoordinatorMessage reply;
  reply.mutable_registration_reply()->set_accepted(status.ok());
  reply.mutable_registration_reply()->set_job_id(options_.job_id);
  if (!status.ok()) {
    Log()->warn("refused the agent at {} ({}, host {}): {}", link->Peer(),
                info.spare ? std::string("a spare")
                           : absl::StrCat("machine_rank ", info.machine_rank),
                info.hostname, std::string(status.message()));
    reply.mutable_registration_reply()->set_reason(
        std::string(status.message()));
    link->Send(reply);
    link->Close();
    return;
  }
  const bool spare = *key < 0;
  reply.mutable_registration_reply()->set_spare(spare);
  reply.mutable_registration_reply()->set_machine_rank(spare ? -1 : *key);
  // Acknowledge heartbeats every lease / 3: the agent's lease is kept with
  // two acks to spare, at half the messages of one ack per heartbeat.
  Registered& agent = registered_[link];
  agent.machine_rank = *key;
  agent.ack_every =
      std::chrono::milliseconds(std::max(0, request.lease_ms()) / 3);
  // A spare's heartbeats come on its stream (a datagram names a machine).
  if (udp_port_ > 0 && !spare) {
    OfferUdpSession(link, agent, reply.mutable_registration_reply());
  }
  for (const auto& arg : options_.worker_argv) {
    reply.mutable_registration_reply()->add_argv(arg);
  }
  reply.mutable_registration_reply()->set_argv_runs_python(
      options_.worker_argv_runs_python);
  link->Send(reply);
  const TimePoint now = clock_();
  if (spare) {
    const std::string was = info.spare
                                ? ""
                                : absl::StrCat(" (machine ", info.machine_rank,
                                               "'s place is taken by a spare)");
    Log()->info(
        "a spare registered: host {}, address {}, {} workers{}; {} "
        "spare(s)",
        info.hostname, info.advertise_addr, info.local_world_size, was,
        machine_.spares().size());
    Note("spare", -1,
         absl::StrCat("a spare registered: host ", info.hostname, ", address ",
                      info.advertise_addr, was));
    Execute(machine_.Tick(now));
    return;
  }
  Log()->info(
      "machine {} registered: host {}, address {} ({}), {} workers; "
      "{}/{} machines",
      info.machine_rank, info.hostname, info.advertise_addr,
      info.interface_name, info.local_world_size, machine_.nodes().size(),
      options_.config.num_machines);
  Note(rejoin ? "rejoined" : "registered", info.machine_rank,
       absl::StrCat("host ", info.hostname, ", address ", info.advertise_addr,
                    ", ", info.local_world_size, " workers"));
  const TimePoint old_may_run =
      machine_.nodes().at(info.machine_rank).old_agent_may_run_until;
  if (old_may_run > now) {
    Log()->warn(
        "machine {} is taken over by another agent (host {}, pid {}): its "
        "ranks are handed over in {:.1f} s, once the old agent's lease and "
        "stop grace have surely run out",
        info.machine_rank, info.hostname, info.agent_pid,
        std::chrono::duration<double>(old_may_run - now).count());
  }
  Execute(machine_.Tick(now));
}

void CoordinatorCore::StartGeneration() {
  if (preparing_generation_) return;  // one preparation at a time
  preparing_generation_ = true;
  // Slow, so off the owner's thread: the rendezvous (the NCCL id helper,
  // a free port) and keeping the generation number before anything of it
  // exists: a coordinator restarted later must never hand out a number
  // that workers have seen, so a generation that cannot be kept does not
  // start.
  auto prepared = std::make_shared<PreparedGeneration>();
  prepared->generation = machine_.generation() + 1;
  prepared->master_addr = machine_.NextMasterAddr();
  std::optional<JobRecord> record;
  if (!options_.state_file.empty()) record = RecordOf(prepared->generation);
  OffloadWork(
      [prepared, record = std::move(record), rendezvous = rendezvous_,
       path = options_.state_file] {
        prepared->rendezvous = rendezvous(prepared->master_addr);
        if (prepared->rendezvous.ok() && record) {
          prepared->kept = SaveJobRecord(path, *record);
        }
      },
      [this, prepared] {
        preparing_generation_ = false;
        StartPreparedGeneration(*prepared);
      });
}

void CoordinatorCore::StartPreparedGeneration(
    const PreparedGeneration& prepared) {
  const TimePoint now = clock_();
  // Meanwhile the job may have stopped, lost a machine, or machine 0 come
  // back from another address (or, in an elastic job, another machine
  // become the first member): prepared for a state that is gone, the
  // generation does not start, and the next tick prepares again.
  if (!machine_.ReadyToStart(now) ||
      machine_.generation() + 1 != prepared.generation ||
      machine_.NextMasterAddr() != prepared.master_addr) {
    Execute(machine_.Tick(now));
    return;
  }
  const auto& rendezvous = prepared.rendezvous;
  if (!rendezvous.ok()) {
    Execute(
        machine_.StopRequested(absl::StrCat("cannot prepare the rendezvous: ",
                                            rendezvous.status().message()),
                               1, now));
    return;
  }
  if (!prepared.kept.ok()) {
    const int64_t next = prepared.generation;
    Execute(machine_.StopRequested(
        absl::StrCat("cannot keep the job's state, so generation ", next,
                     " does not start (a restarted coordinator would not "
                     "know of it): ",
                     prepared.kept.message()),
        1, now));
    return;
  }
  persisted_restarts_ = machine_.restarts_used();
  persisted_failures_ = machine_.failures().size();
  const GenerationStart start = machine_.StartGeneration(clock_());
  JobEnvironmentInputs inputs;
  inputs.job_id = options_.job_id;
  inputs.generation = start.generation;
  inputs.world_size = start.world_size;
  inputs.num_machines = start.num_machines;
  inputs.max_restarts = options_.restart.max_restarts;
  inputs.master_addr = start.master_addr;
  inputs.master_port = rendezvous->master_port;
  inputs.nccl_unique_id_hex = rendezvous->nccl_unique_id_hex;
  inputs.coordinator_address = options_.coordinator_address;
  if (options_.open_store_generation) {
    inputs.store_token =
        options_.open_store_generation(options_.job_id, start.generation);
  }
  const Environment job_env = BuildJobEnvironment(options_.config, inputs);
  Log()->info(
      "generation {}: world size {}, MASTER_ADDR={} MASTER_PORT={}, restarts "
      "used {} of {}",
      start.generation, start.world_size, start.master_addr,
      rendezvous->master_port, machine_.restarts_used(),
      options_.restart.max_restarts);
  for (int m : start.cordoned_members) {
    const std::string& host = machine_.nodes().at(m).info.hostname;
    Log()->warn(
        "generation {}: machine {} runs on cordoned host {}: no spare took its "
        "place and the job cannot start without it",
        start.generation, m, host);
  }
  const bool elastic = machine_.settings().Elastic();
  const std::string shape =
      elastic ? ElasticShape(start, machine_.settings()) : "";
  if (elastic) Log()->info("generation {}: {}", start.generation, shape);
  Note("generation", -1,
       absl::StrCat(
           elastic ? shape : absl::StrCat("world size ", start.world_size),
           ", restarts used ", machine_.restarts_used(), " of ",
           options_.restart.max_restarts));

  pb::CoordinatorMessage message;
  pb::Assignment* assignment = message.mutable_assignment();
  assignment->set_job_id(options_.job_id);
  assignment->set_generation(start.generation);
  assignment->set_stop_grace_s(options_.stop_grace_s);
  for (const auto& arg : options_.worker_argv) assignment->add_argv(arg);
  assignment->set_argv_runs_python(options_.worker_argv_runs_python);
  assignment->mutable_job_environment()->insert(job_env.begin(), job_env.end());
  std::map<int, std::vector<AgentLink*>> links_of_machine;
  for (const auto& [link, agent] : registered_) {
    links_of_machine[agent.machine_rank].push_back(link);
  }
  for (const auto& node : start.nodes) {
    assignment->set_machine_rank(node.machine_rank);
    assignment->set_rank_offset(node.rank_offset);
    assignment->set_local_world_size(node.local_world_size);
    if (elastic && job_env.count("WORLD_SIZE")) {
      // Its place among this generation's machines, which the agent puts
      // in GROUP_RANK (BuildWorkerEnvironment).
      (*assignment->mutable_job_environment())["GROUP_RANK"] =
          std::to_string(node.group_rank);
    }
    for (AgentLink* link : links_of_machine[node.machine_rank]) {
      link->Send(message);
    }
  }
}

void CoordinatorCore::Execute(const Decision& decision) {
  if (const auto stalled = machine_.own_stalls() - stalls_logged_;
      stalled > std::chrono::steady_clock::duration::zero()) {
    stalls_logged_ = machine_.own_stalls();
    Log()->warn(
        "the coordinator did not run for {:.1f} s (frozen or starved); the "
        "agents' silence meanwhile is not held against them",
        std::chrono::duration<double>(stalled).count());
    Note("stalled", -1,
         absl::StrFormat("the coordinator did not run for %.1f s",
                         std::chrono::duration<double>(stalled).count()));
  }
  for (int lost : decision.drop_agents) {
    if (auto node = machine_.nodes().find(lost);
        node != machine_.nodes().end()) {
      Note("lost", lost, node->second.lost_reason);
    }
    for (auto it = registered_.begin(); it != registered_.end();) {
      if (it->second.machine_rank != lost) {
        ++it;
        continue;
      }
      Log()->warn("machine {} is lost: {}", lost,
                  machine_.nodes().at(lost).lost_reason);
      // Fencing: if it still hears us, it stops whatever it runs. Its
      // stream stays open until the generation has stopped: if the loss
      // ends the job, it hears that (and does not wait to rejoin a job
      // that is over); if not, it is closed then and the agent rejoins.
      pb::CoordinatorMessage stop;
      stop.mutable_stop()->set_generation(machine_.generation());
      stop.mutable_stop()->set_reason("this machine was declared lost");
      it->first->Send(stop);
      fenced_.insert(it->first);
      it = Unregister(it);
    }
  }
  for (const auto& [host, cordon] : machine_.cordoned()) {
    if (!cordons_logged_.insert(host).second) continue;
    Log()->warn(
        "host {} is cordoned ({}): it gets no ranks until `trl-coord "
        "uncordon {}`",
        host, cordon.reason, host);
    Note("cordoned", -1, absl::StrCat("host ", host, ": ", cordon.reason));
  }
  ApplyHandovers(decision.handovers);
  for (int key : decision.drop_spares) {
    for (auto it = registered_.begin(); it != registered_.end(); ++it) {
      if (it->second.machine_rank != key) continue;
      Log()->warn("dropped a spare that went silent (stream from {})",
                  it->first->Peer());
      it->first->Close();
      Unregister(it);
      break;
    }
  }
  if (decision.stop_generation) {
    Log()->warn("stopping generation {}: {}", machine_.generation(),
                *decision.stop_generation);
    Note("stopping", -1, *decision.stop_generation);
    pb::CoordinatorMessage stop;
    stop.mutable_stop()->set_generation(machine_.generation());
    stop.mutable_stop()->set_reason(*decision.stop_generation);
    stop.mutable_stop()->set_signal(stop_signal_.number);
    stop.mutable_stop()->set_workers_have_signal(stop_signal_.workers_have_it);
    SendToRegistered(stop);
  }
  if (decision.finished) {
    Note("finished", -1,
         absl::StrCat(JobPhaseName(decision.finished->phase), " (exit code ",
                      decision.finished->exit_code,
                      "): ", decision.finished->summary));
    // A registered agent's stream stays open until it says it heard: one
    // cut just now is awaited (WaitForFarewells) and told again when its
    // agent registers again, so that it leaves with the job's code.
    for (AgentLink* link : links_) {
      TellOfEnd(link, *decision.finished);
      if (auto it = registered_.find(link); it != registered_.end()) {
        told_of_end_[link] = it->second.machine_rank;
        awaiting_farewell_[it->second.machine_rank] = TimePoint::max();
        Unregister(it);  // nothing more is sent on it (no heartbeat acks)
      } else {
        link->Close();
      }
    }
    const TimePoint now = clock_();
    for (const auto& [m, node] : machine_.nodes()) {
      awaiting_farewell_.emplace(
          m, now + node.info.lease + std::chrono::seconds(2));
    }
    fenced_.clear();
    if (!options_.state_file.empty()) {
      // After every write asked for before: in order, on the same thread.
      OffloadWork([path = options_.state_file] { RemoveJobRecord(path); },
                  [] {});
    }
  }
  if (!fenced_.empty() && machine_.phase() != JobPhase::kStopping) {
    for (AgentLink* link : fenced_) link->Close();
    fenced_.clear();
  }
  if (!decision.finished && !IsFinished(machine_.phase()) &&
      !options_.state_file.empty() &&
      (machine_.restarts_used() != persisted_restarts_ ||
       machine_.failures().size() != persisted_failures_)) {
    PersistInBackground(RecordOf(machine_.generation()));
  }
  if (decision.start_generation && !decision.finished) StartGeneration();
}

void CoordinatorCore::ApplyHandovers(const std::vector<Handover>& handovers) {
  if (handovers.empty()) return;
  // Every stream is found by its key before any is changed: a swap moves
  // a spare to a machine and the machine's agent to a new spare key.
  std::vector<std::pair<AgentLink*, const Handover*>> moves;
  for (const Handover& handover : handovers) {
    for (auto& [link, agent] : registered_) {
      if (agent.machine_rank == handover.from) {
        moves.emplace_back(link, &handover);
        break;
      }
    }
  }
  for (auto& [link, handover] : moves) {
    Registered& agent = registered_.at(link);
    agent.machine_rank = handover->to;
    if (agent.udp_session != 0) {  // datagrams name the machine
      by_udp_session_.erase(agent.udp_session);
      agent.udp_session = 0;
    }
    pb::CoordinatorMessage role;
    role.mutable_role_change()->set_spare(handover->to < 0);
    role.mutable_role_change()->set_machine_rank(std::max(-1, handover->to));
    role.mutable_role_change()->set_reason(handover->reason);
    link->Send(role);
    Log()->warn("{}", handover->reason);
    Note(handover->to < 0 ? "spare_demoted" : "spare_promoted",
         std::max(handover->to, handover->from), handover->reason);
    if (on_registered_ && handover->to >= 0) on_registered_(handover->to, link);
  }
}

absl::Status CoordinatorCore::Uncordon(const std::string& hostname) {
  const absl::Status status = machine_.Uncordon(hostname, clock_());
  if (status.ok()) {
    Log()->info("host {} is uncordoned: it may be given ranks again", hostname);
    cordons_logged_.erase(hostname);
    Note("uncordoned", -1, absl::StrCat("host ", hostname, " is uncordoned"));
    if (!options_.state_file.empty() && !IsFinished(machine_.phase())) {
      PersistInBackground(RecordOf(machine_.generation()));
    }
    Execute(machine_.Tick(clock_()));
  }
  return status;
}

void CoordinatorCore::RememberStopSignal(const StopSignal& signal) {
  // The first stop decides what workers receive first.
  if (!IsFinished(machine_.phase()) &&
      machine_.phase() != JobPhase::kStopping) {
    stop_signal_ = signal;
  }
}

std::optional<TimePoint> CoordinatorCore::NextDeadline() const {
  return machine_.NextDeadline(clock_());
}

void CoordinatorCore::Tick() {
  Execute(machine_.Tick(clock_()));
  events_.Flush();
}

void CoordinatorCore::SendToRegistered(const pb::CoordinatorMessage& message) {
  for (const auto& [link, agent] : registered_) link->Send(message);
}

int CoordinatorCore::MachineOf(const AgentLink* link) const {
  const auto found = registered_.find(const_cast<AgentLink*>(link));
  return found == registered_.end() ? -1 : found->second.machine_rank;
}

int CoordinatorCore::SendToMachines(const std::set<int>& machines,
                                    const pb::CoordinatorMessage& message) {
  int sent = 0;
  for (const auto& [link, agent] : registered_) {
    if (!machines.empty() && machines.count(agent.machine_rank) == 0) continue;
    link->Send(message);
    ++sent;
  }
  return sent;
}

void CoordinatorCore::OnDisconnected(AgentLink* link) {
  links_.erase(link);
  fenced_.erase(link);
  told_of_end_.erase(link);  // its machine is still awaited
  auto found = registered_.find(link);
  if (found != registered_.end()) {
    const int m = found->second.machine_rank;
    Unregister(found);
    if (!IsFinished(machine_.phase())) {
      if (m < 0) {
        Log()->info("a spare disconnected ({})", link->Peer());
      } else {
        Log()->warn("the agent of machine {} disconnected", m);
      }
    }
    Execute(machine_.AgentDisconnected(m, clock_()));
    Execute(machine_.Tick(clock_()));
  }
}

void CoordinatorCore::RequestStop(const std::string& reason, int exit_code,
                                  const StopSignal& signal) {
  if (!IsFinished(machine_.phase())) Note("stop_requested", -1, reason);
  RememberStopSignal(signal);
  Execute(machine_.StopRequested(reason, exit_code, clock_()));
  Execute(machine_.Tick(clock_()));
}

void CoordinatorCore::OfferUdpSession(AgentLink* link, Registered& agent,
                                      pb::RegistrationReply* reply) {
  // One draw: 8 bytes of session, then the key. Without randomness, or on
  // a (2^-64) clash, no offer: heartbeats stay on the stream.
  const std::string random = random_bytes_(8 + kHeartbeatKeySize);
  if (random.size() != 8 + kHeartbeatKeySize) return;
  uint64_t session = 0;
  for (size_t i = 0; i < 8; ++i) {
    session = (session << 8) | static_cast<unsigned char>(random[i]);
  }
  if (session == 0 || by_udp_session_.count(session)) return;
  const std::string key = random.substr(8);
  agent.udp_session = session;
  agent.udp_key = std::make_unique<HeartbeatKey>(key);
  by_udp_session_[session] = link;
  reply->set_heartbeat_udp_port(udp_port_);
  reply->set_heartbeat_session(session);
  reply->set_heartbeat_key(key);
}

std::map<AgentLink*, CoordinatorCore::Registered>::iterator
CoordinatorCore::Unregister(std::map<AgentLink*, Registered>::iterator it) {
  if (it->second.udp_session != 0)
    by_udp_session_.erase(it->second.udp_session);
  return registered_.erase(it);
}

void CoordinatorCore::OfferUdpHeartbeats(
    int port, std::function<std::string(size_t)> random_bytes) {
  udp_port_ = port;
  random_bytes_ = std::move(random_bytes);
}

std::vector<CoordinatorCore::DatagramReply>
CoordinatorCore::OnHeartbeatDatagrams(
    const std::vector<std::string_view>& datagrams) {
  std::vector<DatagramReply> replies;
  const TimePoint now = clock_();
  for (size_t i = 0; i < datagrams.size(); ++i) {
    const auto beat = ParseHeartbeat(datagrams[i]);
    const char* refused = nullptr;
    auto link =
        beat ? by_udp_session_.find(beat->session) : by_udp_session_.end();
    Registered* agent =
        link != by_udp_session_.end() ? &registered_.at(link->second) : nullptr;
    if (!beat || beat->kind != HeartbeatKind::kHeartbeat) {
      refused = "not a heartbeat";
    } else if (agent == nullptr) {
      refused = "no registered stream has its session";
    } else if (static_cast<int64_t>(beat->machine_rank) !=
                   agent->machine_rank ||
               !HeartbeatSignedWith(datagrams[i], *agent->udp_key)) {
      refused = "bad signature";
    } else if (beat->counter <= agent->udp_counter) {
      refused = "replayed";
    }
    if (refused != nullptr) {
      // Logged once: a flood of bad datagrams must not flood the log.
      if (!told_of_bad_datagram_) {
        Log()->warn(
            "dropped a heartbeat datagram ({}); later ones are "
            "dropped without a word",
            refused);
        told_of_bad_datagram_ = true;
      }
      continue;
    }
    agent->udp_counter = beat->counter;
    agent->heartbeat_via = "udp";
    machine_.Heartbeat(agent->machine_rank, now);
    HeartbeatDatagram ack = *beat;
    ack.kind = HeartbeatKind::kAck;
    replies.push_back({i, EncodeHeartbeat(ack, *agent->udp_key)});
  }
  return replies;
}

std::set<std::string> CoordinatorCore::AgentPeers() const {
  std::set<std::string> peers;
  for (const auto& [link, agent] : registered_) {
    peers.insert(PeerFromGrpc(link->Peer()));
  }
  return peers;
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
      for (const auto& [link, agent] : registered_) {
        (*via)[agent.machine_rank] = agent.heartbeat_via;
      }
    }
    const auto found = via->find(machine_rank);
    return found == via->end() ? nullptr : found->second;
  };
  JobStatusCopy copy =
      CopyJobStatus(machine_, clock_(), request, heartbeat_via);
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

void CoordinatorCore::TellOfEnd(AgentLink* link, const JobOutcome& outcome) {
  pb::CoordinatorMessage finished;
  finished.mutable_finished()->set_state(JobPhaseName(outcome.phase));
  finished.mutable_finished()->set_exit_code(outcome.exit_code);
  finished.mutable_finished()->set_summary(outcome.summary);
  link->Send(finished);
}

bool CoordinatorCore::FarewellsHeard() {
  const TimePoint now = clock_();
  for (auto it = awaiting_farewell_.begin(); it != awaiting_farewell_.end();) {
    it = it->second < now ? awaiting_farewell_.erase(it) : std::next(it);
  }
  return links_.empty() && awaiting_farewell_.empty();
}

}  // namespace trl

#include "bench/sim/sim_agent.h"

#include <csignal>

#include "common/auth_token.h"
#include "common/grpc_handoff.h"

namespace trl::sim {

namespace pb = trl::launch::v1;

void SimRecorder::Assigned(int64_t generation) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (++assigned_[generation] == agents_) {
    all_assigned_at_[generation] = SimClock::now();
    changed_.notify_all();
  }
}

void SimRecorder::Registered() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++registered_;
  changed_.notify_all();
}

bool SimRecorder::WaitRegistered(int count, SimClock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_until(lock, deadline,
                             [&] { return registered_ >= count; });
}

void SimRecorder::StopReceived(int agent, int64_t generation) {
  std::lock_guard<std::mutex> lock(mutex_);
  stops_[generation].emplace_back(agent, SimClock::now());
  changed_.notify_all();
}

void SimRecorder::Refused(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (refusals_.size() < 10) refusals_.push_back(reason);
  changed_.notify_all();
}

void SimRecorder::Ended() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++ended_;
  changed_.notify_all();
}

std::optional<SimClock::time_point> SimRecorder::WaitAllAssigned(
    int64_t generation, SimClock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!changed_.wait_until(lock, deadline, [&] {
        return all_assigned_at_.count(generation) > 0;
      })) {
    return std::nullopt;
  }
  return all_assigned_at_.at(generation);
}

std::optional<SimClock::time_point> SimRecorder::WaitStop(
    int64_t generation, int except, SimClock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  std::optional<SimClock::time_point> first;
  changed_.wait_until(lock, deadline, [&] {
    for (const auto& [agent, at] : stops_[generation]) {
      if (agent != except) {
        first = at;
        return true;
      }
    }
    return false;
  });
  return first;
}

bool SimRecorder::WaitAllEnded(SimClock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_until(lock, deadline, [&] { return ended_ == agents_; });
}

std::vector<std::string> SimRecorder::refusals() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return refusals_;
}

SimAgent::SimAgent(int index, pb::AgentRegistration registration,
                   const std::string& auth_token, SimDatagrams* datagrams,
                   AgentCoreSettings settings, SimRecorder* recorder)
    : index_(index),
      registration_(std::move(registration)),
      recorder_(recorder),
      core_(std::move(settings)),
      datagrams_(datagrams) {
  if (!auth_token.empty()) {
    context_.AddMetadata(kAuthMetadataKey, BearerValue(auth_token));
  }
}

void SimAgent::Start(pb::Coordinator::Stub* stub) {
  stub->async()->Attach(&context_, this);
  AddHold();  // released by Shutdown(): no OnDone before then
  pb::AgentMessage hello;
  {
    std::lock_guard<std::mutex> lock(core_mutex_);
    hello = core_.StartSession(registration_, SimClock::now());
  }
  Send(std::move(hello));
  HandToGrpc(this);
  StartRead(&incoming_);
  StartCall();
  started_ = true;
}

void SimAgent::Send(pb::AgentMessage message) {
  const pb::AgentMessage* next = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closing_) return;
    {
      // In the order written, as a real agent: the coordinator's words
      // count what it read.
      std::lock_guard<std::mutex> core_lock(core_mutex_);
      core_.StreamMessageSent(SimClock::now());
    }
    outgoing_.push_back(std::move(message));
    if (writing_) return;
    writing_ = true;
    next = &outgoing_.front();
    AddHold();  // a write from outside a reaction: keep the call alive
  }
  HandToGrpc(this);
  StartWrite(next);
}

void SimAgent::OnWriteDone(bool ok) {
  TakeFromGrpc(this);
  const pb::AgentMessage* next = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    outgoing_.pop_front();
    if (!ok) outgoing_.clear();
    if (!outgoing_.empty()) {
      next = &outgoing_.front();
    } else {
      writing_ = false;
    }
  }
  HandToGrpc(this);
  if (next != nullptr) {
    StartWrite(next);  // the hold carries over to this write
  } else {
    RemoveHold();
  }
}

void SimAgent::Tick(SimClock::time_point now) {
  // Not registered yet, a frozen machine, or one whose lease ran out: no
  // clock runs.
  if (!started_ || silent_ || lease_ran_out_) return;
  bool acked = false;
  {
    std::lock_guard<std::mutex> lock(udp_mutex_);
    acked = sequence_ && sequence_->LastAcked();
  }
  AgentCore::Heartbeat beat;
  bool expired = false;
  {
    std::lock_guard<std::mutex> lock(core_mutex_);
    beat = core_.HeartbeatAt(now, acked);
    expired = core_.LeaseAt(SimClock::now()).expired;
  }
  if (expired) {
    // Once: the agent's clock stops with its stream.
    if (!lease_ran_out_.exchange(true)) {
      recorder_->LeaseExpired();
      Shutdown();
    }
    return;
  }
  if (beat.datagram) {
    std::lock_guard<std::mutex> lock(udp_mutex_);
    if (sequence_) datagrams_->Send(sequence_->Next(SimClock::now()));
  }
  if (beat.stream) {
    pb::AgentMessage message;
    message.mutable_heartbeat();
    Send(std::move(message));
  }
}

void SimAgent::DatagramReceived(std::string_view bytes) {
  std::optional<SimClock::time_point> sent;
  {
    std::lock_guard<std::mutex> lock(udp_mutex_);
    if (sequence_) sent = sequence_->Accept(bytes);
  }
  if (!sent) return;
  recorder_->HeartbeatAcked();
  std::lock_guard<std::mutex> lock(core_mutex_);
  core_.UdpAcked(*sent);
}

void SimAgent::FailWorker(int local_rank, int exit_code) {
  pb::WorkerExited exited;
  exited.set_local_rank(local_rank);
  exited.set_exit_code(exit_code);
  exited.add_last_lines("simulated failure");
  AgentEffects effects;
  {
    std::lock_guard<std::mutex> lock(core_mutex_);
    exited.set_generation(core_.running_generation());
    if (!exited_.insert(local_rank).second) return;  // it exited already
    effects = core_.WorkerExited(std::move(exited));
  }
  Apply(effects);
}

void SimAgent::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closing_) return;
    closing_ = true;
  }
  if (!started_) {
    // Never registered (a run that failed before its wave): gRPC holds
    // nothing of it to end.
    recorder_->Ended();
    return;
  }
  context_.TryCancel();
  HandToGrpc(this);
  RemoveHold();
}

void SimAgent::OnReadDone(bool ok) {
  TakeFromGrpc(this);
  if (!ok) return;  // the stream ended; OnDone follows
  Handle(incoming_);
  HandToGrpc(this);
  StartRead(&incoming_);
}

void SimAgent::Handle(const pb::CoordinatorMessage& message) {
  if (message.has_heartbeat_ack()) recorder_->HeartbeatAcked();
  if (message.has_registration_reply()) {
    if (message.registration_reply().accepted()) {
      recorder_->Registered();
    } else {
      recorder_->Refused(message.registration_reply().reason());
    }
  }
  AgentEffects effects;
  {
    std::lock_guard<std::mutex> lock(core_mutex_);
    effects = core_.Received(message, SimClock::now());
  }
  Apply(effects);
}

void SimAgent::Apply(const AgentEffects& effects) {
  // Nothing to sweep, and the command is never checked (the registration
  // does not ask for it).
  if (effects.open_datagrams && datagrams_ != nullptr) {
    const auto& to = *effects.open_datagrams;
    // As UdpHeartbeatSender::Open checks.
    const bool ok = to.key.size() == kHeartbeatKeySize && to.session != 0 &&
                    datagrams_->OpenTowards(to.port);
    {
      std::lock_guard<std::mutex> lock(udp_mutex_);
      if (ok) {
        sequence_ = std::make_unique<HeartbeatSequence>(
            registration_.machine_rank(), to.session, to.key);
      }
    }
    std::lock_guard<std::mutex> lock(core_mutex_);
    core_.UdpOpened(ok);
  }
  for (const auto& message : effects.send) Send(message);
  if (effects.capture_only) {
    // Nothing to read: a simulated worker has no process.
    pb::AgentMessage captured;
    captured.mutable_stacks_captured()->set_generation(*effects.capture_only);
    Send(captured);
  }
  if (effects.start_workers) {
    // Every worker "starts" at once, with a pid no process has, and is
    // reported in one message, as the real agent does.
    const auto& a = *effects.start_workers;
    std::vector<std::pair<int, int>> pids;
    for (int local = 0; local < a.local_world_size(); ++local) {
      pids.emplace_back(local, 4000000 + index_);
    }
    AgentEffects started;
    {
      std::lock_guard<std::mutex> lock(core_mutex_);
      exited_.clear();
      started = core_.WorkersStarted(a.generation(), pids);
    }
    for (const auto& message : started.send) Send(message);
    recorder_->Assigned(a.generation());
  }
  if (effects.signal_workers) {
    // Every worker "dies" of the signal at once.
    const int signal = effects.signal_workers->number;
    std::vector<pb::AgentMessage> exits;
    int64_t generation = -1;
    {
      std::lock_guard<std::mutex> lock(core_mutex_);
      generation = core_.running_generation();
      for (int local = 0; local < registration_.local_world_size(); ++local) {
        // A signal reaches only the workers still running.
        if (!exited_.insert(local).second) continue;
        pb::WorkerExited exited;
        exited.set_generation(generation);
        exited.set_local_rank(local);
        exited.set_exit_code(128 + signal);
        exited.set_signal(signal);
        for (auto& message : core_.WorkerExited(std::move(exited)).send) {
          exits.push_back(std::move(message));
        }
      }
    }
    recorder_->StopReceived(index_, generation);
    for (auto& message : exits) Send(std::move(message));
  }
}

void SimAgent::OnDone(const grpc::Status& status) {
  TakeFromGrpc(this);
  recorder_->Ended();
}

}  // namespace trl::sim

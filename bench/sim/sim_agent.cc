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
                   const std::string& auth_token, std::string udp_host,
                   SimRecorder* recorder)
    : index_(index),
      registration_(std::move(registration)),
      recorder_(recorder),
      udp_host_(std::move(udp_host)) {
  if (!auth_token.empty()) {
    context_.AddMetadata(kAuthMetadataKey, BearerValue(auth_token));
  }
}

void SimAgent::Start(pb::Coordinator::Stub* stub) {
  stub->async()->Attach(&context_, this);
  AddHold();  // released by Shutdown(): no OnDone before then
  pb::AgentMessage hello;
  *hello.mutable_registration() = registration_;
  Send(std::move(hello));
  HandToGrpc(this);
  StartRead(&incoming_);
  StartCall();
}

void SimAgent::Send(pb::AgentMessage message) {
  const pb::AgentMessage* next = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closing_) return;
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

void SimAgent::Heartbeat() {
  if (silent_) return;
  {
    // As the real agent: a datagram alone while the last one was
    // acknowledged, the stream as well otherwise.
    std::lock_guard<std::mutex> lock(udp_mutex_);
    if (udp_) {
      for (int acks = udp_->ReadAcks(); acks > 0; --acks) {
        recorder_->HeartbeatAcked();
      }
      const bool heard = udp_->LastHeartbeatAcked();
      udp_->SendHeartbeat();
      if (heard) return;
    }
  }
  pb::AgentMessage beat;
  beat.mutable_heartbeat();
  Send(std::move(beat));
}

void SimAgent::FailWorker(int local_rank, int exit_code) {
  pb::AgentMessage message;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    message.mutable_worker_exited()->set_generation(generation_);
  }
  message.mutable_worker_exited()->set_local_rank(local_rank);
  message.mutable_worker_exited()->set_exit_code(exit_code);
  message.mutable_worker_exited()->add_last_lines("simulated failure");
  Send(std::move(message));
}

void SimAgent::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closing_) return;
    closing_ = true;
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
  switch (message.body_case()) {
    case pb::CoordinatorMessage::kRegistrationReply: {
      const auto& reply = message.registration_reply();
      if (!reply.accepted()) {
        recorder_->Refused(reply.reason());
      } else if (reply.heartbeat_udp_port() > 0 && !udp_host_.empty()) {
        auto sender = UdpHeartbeatSender::Open(
            udp_host_, reply.heartbeat_udp_port(), registration_.machine_rank(),
            reply.heartbeat_session(), reply.heartbeat_key());
        std::lock_guard<std::mutex> lock(udp_mutex_);
        if (sender.ok()) udp_ = *std::move(sender);
      }
      break;
    }
    case pb::CoordinatorMessage::kAssignment: {
      const auto& a = message.assignment();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        generation_ = a.generation();
      }
      // Every worker "starts" at once, with a pid no process has, and is
      // reported in one message, as the real agent does.
      pb::AgentMessage started;
      started.mutable_workers_started()->set_generation(a.generation());
      for (int local = 0; local < a.local_world_size(); ++local) {
        auto* worker = started.mutable_workers_started()->add_workers();
        worker->set_local_rank(local);
        worker->set_pid(4000000 + index_);
      }
      Send(std::move(started));
      recorder_->Assigned(a.generation());
      break;
    }
    case pb::CoordinatorMessage::kStop: {
      const auto& stop = message.stop();
      int workers = 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop.generation() != generation_) break;
        workers = registration_.local_world_size();
      }
      recorder_->StopReceived(index_, stop.generation());
      // Every worker "dies" of the stop signal at once.
      const int signal = stop.signal() > 0 ? stop.signal() : SIGTERM;
      for (int local = 0; local < workers; ++local) {
        pb::AgentMessage exited;
        exited.mutable_worker_exited()->set_generation(stop.generation());
        exited.mutable_worker_exited()->set_local_rank(local);
        exited.mutable_worker_exited()->set_exit_code(128 + signal);
        exited.mutable_worker_exited()->set_signal(signal);
        Send(std::move(exited));
      }
      break;
    }
    case pb::CoordinatorMessage::kHeartbeatAck:
      recorder_->HeartbeatAcked();
      break;
    default:
      break;
  }
}

void SimAgent::OnDone(const grpc::Status& status) {
  TakeFromGrpc(this);
  recorder_->Ended();
}

}  // namespace trl::sim

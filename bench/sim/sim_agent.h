// One simulated agent: a real gRPC stream to the real coordinator, run by
// the real agent's core (agent/core/agent_core.h: registration, lease, fencing,
// heartbeat path, stop handling), but spawning no processes: its "workers"
// start the moment the core starts them and exit the moment the core
// signals them. Many live in one process (trl-agent-sim); they hold no
// thread of their own: each is a gRPC callback reactor, and one timer
// thread drives every heartbeat and lease.
#ifndef TRL_BENCH_SIM_SIM_AGENT_H_
#define TRL_BENCH_SIM_SIM_AGENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/core/agent_core.h"
#include "agent/link/heartbeat_sequence.h"
#include "bench/sim/sim_datagrams.h"
#include "proto/trl_launch.grpc.pb.h"

namespace trl::sim {

using SimClock = std::chrono::steady_clock;

// What the simulated agents saw, and when: thread-safe, with waits.
class SimRecorder {
 public:
  explicit SimRecorder(int agents) : agents_(agents) {}

  void Assigned(int64_t generation);
  void Registered();
  void StopReceived(int agent, int64_t generation);
  void Refused(const std::string& reason);
  void Ended();
  void HeartbeatAcked() { acks_.fetch_add(1, std::memory_order_relaxed); }

  // When the last agent got its assignment of `generation`; nullopt if not
  // every agent had one by `deadline`.
  std::optional<SimClock::time_point> WaitAllAssigned(
      int64_t generation, SimClock::time_point deadline);
  // When the first stop order of `generation` reached an agent other than
  // `except`.
  std::optional<SimClock::time_point> WaitStop(int64_t generation, int except,
                                               SimClock::time_point deadline);
  bool WaitAllEnded(SimClock::time_point deadline);
  // Whether `count` agents had their registration accepted by `deadline`.
  bool WaitRegistered(int count, SimClock::time_point deadline);

  std::vector<std::string> refusals() const;
  int64_t acks() const { return acks_.load(); }
  // An agent's lease ran out (the coordinator was silent for its length):
  // the real agent stops its workers and rejoins; a simulated one ends.
  void LeaseExpired() { lease_expired_.fetch_add(1); }
  int64_t lease_expired() const { return lease_expired_.load(); }

 private:
  const int agents_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int64_t, int> assigned_;  // generation -> agents holding it
  std::map<int64_t, SimClock::time_point> all_assigned_at_;
  // generation -> (agent, time) of every stop order received
  std::map<int64_t, std::vector<std::pair<int, SimClock::time_point>>> stops_;
  std::vector<std::string> refusals_;
  int ended_ = 0;
  int registered_ = 0;
  std::atomic<int64_t> acks_{0};
  std::atomic<int64_t> lease_expired_{0};
};

class SimAgent
    : public grpc::ClientBidiReactor<trl::launch::v1::AgentMessage,
                                     trl::launch::v1::CoordinatorMessage> {
 public:
  // `datagrams`: the process's socket for heartbeat datagrams when the
  // coordinator offers them; null: heartbeats stay on the stream.
  SimAgent(int index, trl::launch::v1::AgentRegistration registration,
           const std::string& auth_token, SimDatagrams* datagrams,
           AgentCoreSettings settings, SimRecorder* recorder);

  // Opens the stream and registers.
  void Start(trl::launch::v1::Coordinator::Stub* stub);
  // The agent's clock ticks at `now`: a heartbeat when one is due, and the
  // lease (which ends the stream when it runs out). Ticks come once an
  // interval, so a lease is seen to run out up to two intervals late (the
  // real agent looks again after its 200 ms grace): leases_expired is a
  // lower bound.
  void Tick(SimClock::time_point now);
  // A datagram the coordinator sent this agent (SimDatagrams::Drain).
  void DatagramReceived(std::string_view bytes);
  // Stops heartbeats but keeps the stream open: a machine that froze.
  void GoSilent() { silent_ = true; }
  // Reports local rank `local_rank` of the current generation as exited.
  void FailWorker(int local_rank, int exit_code);
  // Ends the stream; OnDone follows.
  void Shutdown();

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  void Send(trl::launch::v1::AgentMessage message);
  void Handle(const trl::launch::v1::CoordinatorMessage& message);
  // Carries out the core's decisions (the real agent's AgentSession::Apply,
  // with made-up workers).
  void Apply(const AgentEffects& effects);

  const int index_;
  const trl::launch::v1::AgentRegistration registration_;
  SimRecorder* const recorder_;
  grpc::ClientContext context_;
  trl::launch::v1::CoordinatorMessage incoming_;

  std::mutex mutex_;
  std::deque<trl::launch::v1::AgentMessage> outgoing_;  // front in flight
  bool writing_ = false;
  bool closing_ = false;
  std::atomic<bool> silent_{false};
  std::atomic<bool> started_{false};  // Start() was called
  std::atomic<bool> lease_ran_out_{false};
  std::mutex core_mutex_;
  AgentCore core_;  // guarded by core_mutex_
  // The local ranks of the running generation that exited (guarded by
  // core_mutex_).
  std::set<int> exited_;
  SimDatagrams* const datagrams_;
  std::mutex udp_mutex_;
  std::unique_ptr<HeartbeatSequence> sequence_;  // guarded by udp_mutex_
};

}  // namespace trl::sim

#endif  // TRL_BENCH_SIM_SIM_AGENT_H_

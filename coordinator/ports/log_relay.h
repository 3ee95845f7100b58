// `trl-coord logs` on the coordinator's side: each client's StreamLogs
// call becomes a log subscription on the agents that hold its ranks
// (LogSubscribe on their streams); the lines they send back (LogBatch,
// read off the agent streams without the coordinator's lock) are relayed
// to the client.
//
// Memory is bounded whatever the workers print: each client has a queue
// of at most kClientQueueBytes, and lines that do not fit are dropped for
// that client, counted, with a marker where they were (a slow client never
// slows the agents, the other clients or the job); at most kMaxClients
// clients at once. A client's leaving ends its subscriptions on the agents
// (LogUnsubscribe).
#ifndef TRL_COORDINATOR_PORTS_LOG_RELAY_H_
#define TRL_COORDINATOR_PORTS_LOG_RELAY_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/owner/coordinator.h"
#include "proto/trl_launch.pb.h"

namespace trl {

class LogRelay {
 public:
  static constexpr size_t kClientQueueBytes = 4 << 20;
  static constexpr size_t kBatchBytes = 64 * 1024;
  static constexpr size_t kMaxClients = 8;

  // `core` must outlive the relay.
  explicit LogRelay(Coordinator* core);
  ~LogRelay();

  // The reactor for one authenticated StreamLogs call; an unknown rank or
  // machine ends it with INVALID_ARGUMENT naming it.
  grpc::ServerWriteReactor<trl::launch::v1::LogBatch>* Open(
      const trl::launch::v1::LogsRequest& request);
  // A batch the registered agent of `machine` sent (-1: not registered);
  // never blocks. A batch for a subscription its machine was not sent is
  // dropped: no agent speaks for another machine's ranks.
  void OnAgentBatch(int machine, const trl::launch::v1::LogBatch& batch);
  // The job ended: every client's stream ends (OK) once its queue is sent,
  // with `job_end` (how it ended) in its last batch when given.
  void EndAll(const std::optional<trl::launch::v1::JobEndForLogs>& job_end =
                  std::nullopt);
  // An agent of `machine` registered on `link` (Coordinator::OnRegistered,
  // its lock held): each following client of that machine is subscribed
  // on it again, for the retained lines after the last one the client got
  // of that machine, then the new ones. Without this a rejoined agent (or
  // one that took a lost agent's place) would send `logs -f` nothing.
  void OnMachineRegistered(int machine, AgentLink* link);

  class Client;

 private:
  friend class Client;
  void Forget(uint64_t id);

  Coordinator* const core_;
  absl::Mutex mutex_;
  uint64_t next_id_ ABSL_GUARDED_BY(mutex_) = 1;
  bool ended_ ABSL_GUARDED_BY(mutex_) = false;
  std::map<uint64_t, std::shared_ptr<Client>> clients_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace trl

#endif  // TRL_COORDINATOR_PORTS_LOG_RELAY_H_

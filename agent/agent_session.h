// One connection of an agent to the coordinator, from registration to the
// job's end or to the connection's loss: it starts and stops the workers
// of each assigned generation, reports their starts and exits, sends
// heartbeats, and holds a lease: without a word from the coordinator for
// the lease's length it gives up the connection. Workers never outlive the
// session that started them.
#ifndef TRL_AGENT_AGENT_SESSION_H_
#define TRL_AGENT_AGENT_SESSION_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/udp_heartbeat_sender.h"
#include "agent/worker_group.h"
#include "proto/trl_launch.grpc.pb.h"

namespace trl {

class AgentSession {
 public:
  // How a session ended.
  struct End {
    enum Kind { kJobFinished, kRefused, kLost } kind = kLost;
    int exit_code = 1;  // the job's, for kJobFinished
  };

  // `scratch_dir` holds per-rank files when no log_dir is set.
  // `carried_exits`: what an earlier session knew of the last generation's
  // own exits (see OwnExitsOfLastGeneration).
  AgentSession(const AgentOptions& options, Console* console,
               std::shared_ptr<grpc::Channel> channel, std::string scratch_dir,
               std::vector<trl::launch::v1::WorkerExited> carried_exits = {});
  ~AgentSession();

  // Runs the session on the calling thread, which forks the workers and so
  // must outlive them (it does: they are stopped before Run returns).
  End Run(const trl::launch::v1::AgentRegistration& registration);

  // Thread-safe, from the signal thread: forward `signal` to the workers'
  // process groups (unless they have it) and tell the coordinator;
  // `escalate` kills them instead.
  void StopLocally(const StopSignal& signal, bool escalate);

  // The exits of the last generation's workers that ended on their own
  // before the connection was lost: sent with the next registration, since
  // the coordinator may never have heard of them.
  std::vector<trl::launch::v1::WorkerExited> OwnExitsOfLastGeneration() const;

 private:
  bool Write(const trl::launch::v1::AgentMessage& message);
  void HeartbeatLoop();
  // Sends the lines of the coordinator's log subscriptions (LogRing) over
  // the stream until the session ends. A slow stream only fills the
  // subscriptions' bounded queues; the workers' pumps never wait for it.
  void ForwardLogs();
  void OnLogSubscribe(const trl::launch::v1::LogSubscribe& subscribe);
  // Ends the session once the coordinator has been silent for the lease.
  void WatchLease();
  // Sends heartbeats as datagrams from now on (the stream stays the
  // fallback).
  // Says whether the job's command (in the registration reply) runs here:
  // its interpreter and script, found as this machine's workers would.
  void CheckCommand(const trl::launch::v1::RegistrationReply& reply);
  std::string SearchPath() const;
  void UseUdpHeartbeats(int machine_rank,
                        const trl::launch::v1::RegistrationReply& reply);
  void StartWorkers(const trl::launch::v1::Assignment& assignment);
  void ReportExit(int64_t generation, int local_rank,
                  const WorkerOutcome& outcome);
  // Ends the current worker group and whatever its workers left behind.
  // Requires group_mutex_.
  void EndGroup();

  const AgentOptions& options_;
  Console* const console_;
  std::unique_ptr<trl::launch::v1::Coordinator::Stub> stub_;
  const std::string scratch_dir_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<trl::launch::v1::AgentMessage,
                                           trl::launch::v1::CoordinatorMessage>>
      stream_;

  std::mutex write_mutex_;
  bool open_ = false;  // guarded by write_mutex_
  // Heartbeats over UDP, once the coordinator offered them; guarded by
  // write_mutex_.
  std::unique_ptr<UdpHeartbeatSender> udp_;
  std::condition_variable heartbeat_wakeup_;
  // When the coordinator was last heard from (steady clock, in ns).
  std::atomic<int64_t> last_heard_ns_{0};
  std::atomic<bool> lease_expired_{false};
  // Set while the reader ends what an earlier agent left (before any
  // worker of ours runs): the coordinator's acks wait unread in the
  // socket meanwhile, and the lease has nothing to guard yet.
  std::atomic<bool> sweeping_{false};
  std::mutex lease_mutex_;
  std::condition_variable lease_wakeup_;
  bool lease_watch_ended_ = false;  // guarded by lease_mutex_

  mutable std::mutex report_mutex_;
  int64_t report_generation_ = -1;                          // guarded
  std::map<int, trl::launch::v1::WorkerExited> own_exits_;  // guarded
  std::atomic<bool> connection_lost_{false};

  // The coordinator's log subscriptions on this connection (ended with
  // it).
  std::mutex logs_mutex_;
  std::set<uint64_t> log_subscriptions_;  // guarded by logs_mutex_
  // Batches that may be sent before the coordinator acknowledges one
  // (LogAck); guarded by logs_mutex_.
  static constexpr int kLogCredits = 2;
  int log_credits_ = kLogCredits;
  std::condition_variable log_credit_;
  std::atomic<bool> logs_stop_{false};

  std::mutex group_mutex_;
  std::unique_ptr<WorkerGroup> group_;  // guarded by group_mutex_
  std::string group_job_id_;            // guarded by group_mutex_
  std::chrono::milliseconds stop_grace_{30000};
};

}  // namespace trl

#endif  // TRL_AGENT_AGENT_SESSION_H_

// One connection of an agent to the coordinator, from registration to the
// job's end or to the connection's loss: the I/O edge of the agent's core
// (agent/core/agent_core.h), which decides. The session reads the stream, runs
// the heartbeat and lease clocks, starts and signals the workers of each
// assigned generation, and writes what the core says to write. Workers
// never outlive the session that started them.
#ifndef TRL_AGENT_SESSION_AGENT_SESSION_H_
#define TRL_AGENT_SESSION_AGENT_SESSION_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/cleanup/exit_ledger.h"
#include "agent/core/log_dir_choice.h"
#include "agent/link/udp_heartbeat_sender.h"
#include "agent/session/agent.h"
#include "agent/session/shared_agent_core.h"
#include "agent/workers/worker_group.h"
#include "proto/trl_launch.grpc.pb.h"

namespace trl {

class AgentSession {
 public:
  // `scratch_dir` holds per-rank files when no log_dir is set. `core`
  // outlives the session (it spans the agent's sessions).
  AgentSession(const AgentOptions& options, Console* console,
               std::shared_ptr<grpc::Channel> channel, std::string scratch_dir,
               SharedAgentCore* core);
  ~AgentSession();

  // Runs the session on the calling thread, which forks the workers and so
  // must outlive them (it does: they are stopped before Run returns).
  SessionEnd Run(const trl::launch::v1::AgentRegistration& registration);

  // Thread-safe: carries out what the core decided outside the stream's
  // reader (a stop signal's effects). `reply`: the registration reply the
  // effects answer, if any.
  void Apply(const AgentEffects& effects,
             const trl::launch::v1::RegistrationReply* reply = nullptr);
  // Thread-safe and never waits for the stream: tells the coordinator this
  // machine's health changed (empty: healthy), written by the heartbeat
  // thread (before the registration is written: right after it). The
  // agent calls it under its own lock, which a stop order (Ctrl-C) needs:
  // a stalled stream must not hold that lock until the lease ends.
  void ReportHealth(const std::string& problem);

 private:
  bool Write(const trl::launch::v1::AgentMessage& message);
  // Write with write_mutex_ held; the core notes when it was sent.
  bool WriteLocked(const trl::launch::v1::AgentMessage& message);
  // Writes the health report not yet written, if any; requires
  // write_mutex_.
  void WriteHealthLocked();
  // When due, each rank's newest output line not yet reported
  // (agent_session_output.cc), as a RankOutput message; false when there is
  // none. Only ForwardLogs calls it (it owns the report's state), and sends
  // it with a log credit.
  bool TakeOutputReport(std::chrono::steady_clock::time_point now,
                        trl::launch::v1::AgentMessage* message);
  void HeartbeatLoop();
  // Sends the lines of the coordinator's log subscriptions (LogRing) over
  // the stream until the session ends. A slow stream only fills the
  // subscriptions' bounded queues; the workers' pumps never wait for it.
  void ForwardLogs();
  void OnLogSubscribe(const trl::launch::v1::LogSubscribe& subscribe);
  // Ends the session once the core says the lease ran out.
  void WatchLease();
  // Says whether the job's command (in the registration reply) runs here:
  // its interpreter and script, found as this machine's workers would.
  void CheckCommand(const trl::launch::v1::RegistrationReply& reply);
  std::string SearchPath() const;
  // Sends heartbeats as datagrams from now on (the stream stays the
  // fallback).
  void UseUdpHeartbeats(int machine_rank, const AgentEffects::Datagrams& to);
  // Ends what an earlier agent of this machine left on this host.
  void SweepStale(int machine_rank);
  void StartWorkers(const trl::launch::v1::Assignment& assignment);
  // This generation's log directory (log_dir_choice.h), said once when it
  // comes from the coordinator or is refused. Under group_mutex_.
  LogDirChoice LogDirFor(const trl::launch::v1::Assignment& assignment);
  void ReportExit(int64_t generation, int local_rank,
                  const WorkerOutcome& outcome, const std::string& executable);
  // The coordinator's worker-hung report, for the worker group's hang.
  void ReportHang(int64_t generation, int local_rank,
                  const std::string& reason);
  // The first half of a failure's stop: keeps where this generation's
  // workers stand, without a signal, then says so (StacksCaptured).
  void CaptureBeforeTheStop(int64_t generation);
  // Ends the current worker group and whatever its workers left behind.
  // Requires group_mutex_.
  void EndGroup();
  // The group's workers are about to be signalled: from now on their exits
  // are not their own (exit_ledger.h). Requires group_mutex_.
  void MarkStopping();
  // What the workers of a machine cut off (or declared lost) have to save
  // a checkpoint: the time until the fence's deadline, when its guardian
  // would kill them anyway (the group caps it at the stop grace).
  std::chrono::milliseconds TimeLeftInTheFence();

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
  // The health report not written yet (the newest: the coordinator keeps
  // only the last). Its own lock: ReportHealth never waits for a write.
  std::mutex health_mutex_;
  std::optional<std::string> health_pending_;  // guarded by health_mutex_
  // What the progress reports have sent (LogRing::NewestLinesAfter), and
  // when the next is due; ForwardLogs's thread only.
  uint64_t output_reported_ = 0;
  std::chrono::steady_clock::time_point next_output_report_{};
  // Heartbeats over UDP, once the coordinator offered them; guarded by
  // write_mutex_.
  std::unique_ptr<UdpHeartbeatSender> udp_;
  std::condition_variable heartbeat_wakeup_;
  SharedAgentCore* const core_;
  std::mutex lease_mutex_;
  std::condition_variable lease_wakeup_;
  bool lease_watch_ended_ = false;  // guarded by lease_mutex_

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
  // Where the group's workers' exits are kept for a later agent
  // (agent/cleanup/exit_ledger.h); guarded by group_mutex_, the ledger
  // itself is safe from any thread.
  std::shared_ptr<const ExitLedger> ledger_;
  const std::string host_id_;
  std::string said_log_dir_;  // guarded by group_mutex_
  std::chrono::milliseconds stop_grace_{30000};
};

}  // namespace trl

#endif  // TRL_AGENT_SESSION_AGENT_SESSION_H_

// The coordinator's core: it owns the job state machine and the set of
// connected agents, turns agent messages into state-machine events, and
// carries out the resulting decisions by sending messages to agents.
// Transport-free: gRPC streams reach it through AgentLink.
//
// Not thread-safe, on purpose: one thread owns it (coordinator.h's owner
// thread; a test's own thread). Nothing it does blocks: AgentLink::Send
// only queues, and the slow work of a generation's start (the rendezvous,
// the state file's fsync: generation_preparer.h) goes to the Offload,
// whose `done` must come back on the owner's thread.
#ifndef TRL_COORDINATOR_OWNER_CORE_H_
#define TRL_COORDINATOR_OWNER_CORE_H_

#include <signal.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "common/accelerate_config.h"
#include "common/heartbeat_datagram.h"
#include "common/stop_signals.h"
#include "coordinator/job/state_machine.h"
#include "coordinator/owner/agent_link.h"
#include "coordinator/owner/agent_table.h"
#include "coordinator/owner/capture_barrier.h"
#include "coordinator/owner/coordinator_options.h"
#include "coordinator/owner/decision_journal.h"
#include "coordinator/owner/farewells.h"
#include "coordinator/owner/generation_preparer.h"
#include "coordinator/owner/heartbeat_sessions.h"
#include "coordinator/owner/job_record_keeper.h"
#include "coordinator/owner/offloaded_work.h"
#include "coordinator/owner/waiting_report.h"
#include "coordinator/record/events.h"
#include "coordinator/record/state_file.h"
#include "coordinator/status/job_status.h"
#include "proto/trl_launch.pb.h"

namespace trl {

class CoordinatorCore {
 public:
  using Clock = std::function<TimePoint()>;
  // Runs `work` where slow work may run (it must not touch the core), then
  // `done` on the owner's thread. Without one, both run at once, in line.
  using Offload = OffloadedWork::Offload;

  // The wall clock, Unix time in milliseconds: what the state file and the
  // events say (a restarted coordinator's backoff, an event's time).
  using WallClock = std::function<int64_t()>;

  CoordinatorCore(CoordinatorOptions options, RendezvousSource rendezvous,
                  Clock clock, WallClock wall_clock = SystemUnixMillis);

  void OnMessage(AgentLink* link, const trl::launch::v1::AgentMessage& message);
  // Idempotent: a link may report its end more than once.
  void OnDisconnected(AgentLink* link);
  // Stops the job; workers get `signal` first (the one that stopped us, so
  // that a pre-emption notice such as SIGUSR1 reaches them; not again if
  // Slurm sent it to them), then SIGKILL after the grace period.
  void RequestStop(const std::string& reason, int exit_code,
                   const StopSignal& signal = StopSignal{SIGTERM});
  // Checks timeouts; the edge calls it every monitor interval, or at
  // NextDeadline if that is sooner.
  void Tick();
  std::optional<TimePoint> NextDeadline() const;

  // The whole status (every machine, rank and failure).
  trl::launch::v1::JobStatus Status() const;
  // What `request` asks for (status/view.h).
  trl::launch::v1::JobStatus Status(
      const trl::launch::v1::JobStatusRequest& request) const;
  // The rows `request` asks for, copied: FinishJobStatus (job_status.h)
  // makes the answer of them on another thread.
  JobStatusCopy CopyStatus(
      const trl::launch::v1::JobStatusRequest& request) const;
  // What the connection defences refused so far (calls without the
  // token, connections over the caps), reported with Status() so that
  // `ps --json` and /metrics show the same numbers. `counts` must be
  // cheap and must not call back into the Coordinator.
  struct DefenceCounts {
    uint64_t refused_calls = 0;
    uint64_t connections_cut = 0;
  };
  void ReportDefences(std::function<DefenceCounts()> counts);
  const std::string& job_id() const { return options_.job_id; }
  // Where the registered agents' connections come from, "ADDRESS:PORT"
  // ("[ADDRESS]:PORT" for IPv6): connection caps never cut these.
  std::set<std::string> AgentPeers() const;

  // Offers heartbeats over UDP on `port` to agents that register from now
  // on; `random_bytes(n)` gives each stream its session and key.
  // `encrypted`: the streams use TLS (an agent's last word is heard only
  // then: HeartbeatSessions::OfferUdp).
  void OfferUdpHeartbeats(int port,
                          std::function<std::string(size_t)> random_bytes,
                          bool encrypted);
  // A batch of datagrams read from the UDP port: each that is a heartbeat
  // of a registered stream's session, correctly signed and newer than the
  // last, counts as that agent's heartbeat and gets an ack.
  struct DatagramReply {
    size_t index;  // of the datagram answered
    std::string bytes;
  };
  std::vector<DatagramReply> OnHeartbeatDatagrams(
      const std::vector<std::string_view>& datagrams);

  // The machine whose registered agent holds `link`'s stream, or -1 (not
  // registered, or no longer).
  int MachineOf(const AgentLink* link) const;
  // Queues `message` on the stream of each registered agent of
  // `machines` (every one when empty); returns how many (log_relay.h).
  int SendToMachines(const std::set<int>& machines,
                     const trl::launch::v1::CoordinatorMessage& message);

  // Called whenever an agent registers (first, again, or in another's
  // place) with its machine and stream (log_relay.h subscribes it again).
  // Runs on the owner: it may only queue on `link`, never wait for the
  // Coordinator. nullptr: none.
  void OnRegistered(
      std::function<void(int machine_rank, AgentLink* link)> callback) {
    on_registered_ = std::move(callback);
  }

  // `trl-coord uncordon`: the host may be given ranks again; NotFound if
  // it was not cordoned.
  absl::Status Uncordon(const std::string& hostname);

  // The job's history (record/events.h).
  trl::launch::v1::JobEvents Events() const;

  // How the job ended, once it has.
  const std::optional<JobOutcome>& outcome() const {
    return machine_.outcome();
  }
  // Whether every machine told how the job ended has said it heard (an
  // agent whose stream was cut at the end hears it when it registers
  // again; it is awaited until its lease and 2 s have passed) and every
  // agent stream has ended.
  bool FarewellsHeard();
  // Whether slow work it handed to the Offload has not come back yet.
  bool WorkOutstanding() const { return work_.outstanding(); }

  void SetOffload(Offload offload) { work_.SetOffload(std::move(offload)); }

 private:
  void HandleRegistration(AgentLink* link,
                          const trl::launch::v1::AgentRegistration& request);
  // The agent process that holds `info`'s machine (the same host and pid)
  // registers again: it has given its old stream up (its lease ran out
  // while we were paused), though that stream's end has not reached us.
  // Ends the old stream as its end would have; true if there was one.
  bool EndStreamGivenUp(const AgentInfo& info);
  // Machine `m`'s agent died and its workers have ended, its guardian
  // says (heartbeat_datagram.h), and its stream has ended: its ranks need
  // not wait out its lease.
  void OnAgentGone(int m);
  // Acts on the last words that came while their streams were open, once
  // those have ended (Unregister collects them).
  void ApplyLastWords();
  void Execute(const Decision& decision);
  // Re-keys the streams of agents that stand for another machine or spare
  // now, and tells them.
  void ApplyHandovers(const std::vector<Handover>& handovers);
  void RememberStopSignal(const StopSignal& signal);
  // Sends a generation's stop to every agent; one for a failure
  // (`two_phases`) in a job of several machines asks them first to keep
  // where their workers stand, and is held until they have
  // (capture_barrier.h).
  void SendStop(trl::launch::v1::CoordinatorMessage stop, bool two_phases);
  // Sends a stop the barrier released, if it did.
  void SendReleased(std::optional<trl::launch::v1::CoordinatorMessage> stop);
  // The machines the job still waits for, when it is time to say so.
  void SayWhoIsAwaited();

  const CoordinatorOptions options_;
  const Clock clock_;
  const WallClock wall_clock_;

  JobStateMachine machine_;
  // The slow work handed to the Offload, counted until it is done.
  OffloadedWork work_;
  // Which stream stands for which machine or spare.
  AgentTable agents_;
  // Once the job has ended: who is still to say they heard it.
  Farewells farewells_;
  // When registered streams' heartbeats are acknowledged, and their UDP
  // sessions.
  HeartbeatSessions heartbeats_;
  // Ends a registered stream's entry (and its heartbeats' session).
  void Unregister(AgentLink* link);
  std::function<DefenceCounts()> defence_counts_;
  // Machines whose agent's last word came while its stream was open, and
  // whose stream has ended since (ApplyLastWords).
  std::vector<int> last_words_heard_;
  bool in_disconnect_ = false;  // OnDisconnected applies them at its end
  std::function<void(int, AgentLink*)> on_registered_;
  StopSignal stop_signal_{SIGTERM};  // what stop orders send first
  // A failure's stop, held until every machine has kept where its workers
  // stand.
  CaptureBarrier capture_barrier_;
  // Spares cut off (dropped for silence, their stream broken) and not
  // registered again, and the longest lease among them: at the job's end
  // the coordinator waits that lease + 2 s for one to come back and hear
  // how the job ended (nemesis: a spare partitioned in the job's last
  // seconds exited 1 after a job that succeeded). Spare keys' leases.
  int spares_cut_ = 0;
  std::chrono::milliseconds longest_cut_spare_lease_{0};
  std::map<int, std::chrono::milliseconds> spare_leases_;
  // A spare's stream ended or was dropped while the job runs.
  void SpareCut(int key);
  // The last generation whose ranks' places were told once it ended.
  int64_t stood_told_ = -1;
  // What decisions say to the operator, and the job's history.
  DecisionJournal journal_;
  // Which machines the job still waits for, said every so often.
  WaitingReport waiting_report_;
  // The job's record for a restarted coordinator; its writes are
  // offloaded work.
  JobRecordKeeper record_;
  // A generation's start, prepared as offloaded work.
  GenerationPreparer preparer_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_CORE_H_

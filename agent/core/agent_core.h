// The agent's logic, with no I/O, no thread and no clock of its own: every
// input comes as a call with the time it happened, every decision comes
// back as effects (agent_effects.h) for the edge to carry out. Real agents
// (agent/session/: agent_session.cc, agent.cc) and the scale simulator
// (bench/sim) run this same code; tests drive it on a made-up clock.
//
// It spans the agent's life, across its sessions (connections):
//  - registration: what the next registration carries (the last
//    generation's own exits) and what an accepted or refused reply means;
//  - the lease: with no word from the coordinator for its length (plus a
//    short grace for words already waiting in the socket) the session ends.
//    A word renews it from when this agent sent what the coordinator had
//    heard when it wrote the word (CoordinatorMessage.agent_messages_read,
//    a datagram ack's counter), not from when it is read: a word that
//    waited in a frozen agent's socket keeps no lease the coordinator has
//    ended, and no generation starts once the lease has run out;
//  - fencing: a session runs generations in increasing order, a stop order
//    of another generation is ignored, and a worker event of an ended
//    generation is not reported as started;
//  - the heartbeat path: datagrams alone while each is acknowledged, the
//    stream as well while one is not;
//  - stop escalation: the first signal stops the workers and tells the
//    coordinator, a second kills them;
//  - rejoin: after a lost session, reconnect (within the reconnect
//    timeout) unless a stop was asked for; any other end is the agent's.
#ifndef TRL_AGENT_CORE_AGENT_CORE_H_
#define TRL_AGENT_CORE_AGENT_CORE_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/core/agent_effects.h"
#include "common/stop_signals.h"
#include "proto/trl_launch.pb.h"

namespace trl {

struct AgentCoreSettings {
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds lease{4000};
  // How long an expired-looking lease is given for the reader to take
  // what already waits in the socket (a process that was frozen wakes with
  // the coordinator's last words unread).
  std::chrono::milliseconds lease_grace{200};
  // Once the lease and its grace are over, how long the workers have
  // between SIGTERM and SIGKILL: fencing's own bound, apart from the stop
  // grace (the rest of the job is being restarted without them).
  std::chrono::milliseconds fence_kill_grace{300};
  bool udp_heartbeats = true;
  // A hot spare (trl-agent --spare) starts without a machine rank.
  bool spare = false;
  std::chrono::milliseconds connect_timeout{900000};
  std::chrono::milliseconds reconnect_timeout{120000};
};

class AgentCore {
 public:
  using Clock = std::chrono::steady_clock;
  using Time = Clock::time_point;

  explicit AgentCore(AgentCoreSettings settings);

  // --- The agent's life -------------------------------------------------

  // How long to wait for the coordinator before the next session: the
  // whole rendezvous the first time, the reconnect timeout after a loss.
  std::chrono::milliseconds WaitLimit() const;
  // Whether a failing TLS handshake may be taken for a refusal: not once a
  // handshake with this coordinator has succeeded (then it is the
  // network's or a frozen coordinator's doing).
  bool HandshakeMayBeRefusal() const { return !handshake_proven_; }
  // A stop signal (SIGTERM, SIGINT, ...) reached the agent.
  AgentEffects StopRequested(const StopSignal& signal);
  // 128+signal once a stop was asked for, else 0.
  int StopExitCode() const;

  // --- One session ------------------------------------------------------

  // A session starts at `now`: fills in what `registration` carries from
  // the last session and returns the message that opens the stream.
  trl::launch::v1::AgentMessage StartSession(
      const trl::launch::v1::AgentRegistration& registration, Time now);
  // The edge wrote a message on the stream at `now`: every message of the
  // session (the registration first), in the order written. The
  // coordinator's words count those it had read (agent_messages_read).
  void StreamMessageSent(Time now);
  // Any message from the coordinator, on the stream, read at `now`.
  AgentEffects Received(const trl::launch::v1::CoordinatorMessage& message,
                        Time now);
  // The coordinator acknowledged a heartbeat datagram this agent sent at
  // `sent` (the newest acknowledged).
  void UdpAcked(Time sent);
  // The edge opened (or failed to open) the datagram path it was told to.
  void UdpOpened(bool ok) { udp_open_ = ok; }
  // The edge is ending what an earlier agent of this machine left: its
  // reads wait meanwhile, so the lease is not held against it.
  void SweepStarted() { sweeping_ = true; }
  void SweepEnded() { sweeping_ = false; }

  // The edge is about to start the workers of `generation` (after ending
  // the older ones, which takes time): if the lease ran out meanwhile,
  // nothing starts and the session ends, as for an assignment read late.
  AgentEffects StartingWorkers(int64_t generation, Time now);
  // The workers of `generation` started.
  AgentEffects WorkersStarted(int64_t generation,
                              const std::vector<std::pair<int, int>>& pids);
  // A worker of `exited.generation()` ended (or never ran).
  // `own_end`: the worker ended on its own, not by the agent's stop (see
  // WorkerOutcome::own_end); such an exit is carried to the next
  // registration even when it is read after the connection was lost.
  AgentEffects WorkerExited(trl::launch::v1::WorkerExited exited,
                            bool own_end = false);

  struct Heartbeat {
    bool datagram = false;
    bool stream = false;
    Time next;  // when the next is due
  };
  // Whether a heartbeat is due at `now`, and on which path.
  // `last_datagram_acked`: whether the last datagram sent was acknowledged.
  Heartbeat HeartbeatAt(Time now, bool last_datagram_acked);

  struct Lease {
    bool expired = false;
    Time check_again;  // when to look again, if not expired
  };
  // Whether the lease ran out by `now`.
  Lease LeaseAt(Time now);
  bool lease_expired() const { return lease_expired_; }
  // Until when this agent's workers may run without another word from the
  // coordinator (the lease, its grace and the kill grace): what the
  // guardian enforces if the agent cannot (fence_page.h). nullopt before
  // the first session and during a sweep (no workers then).
  std::optional<Time> FenceDeadline() const;
  // What the coordinator adds to the lease to know this agent's workers
  // are surely gone: the lease's grace, the kill grace and the guardian's
  // reaction time.
  std::chrono::milliseconds FenceBound() const;

  // The stream ended (read failed) without a word that ended the session:
  // the connection is lost. From here on, exits are the agent's doing, not
  // the workers' own. Returns the session's end.
  SessionEnd StreamEnded();
  // The stream's final status said the agent is not allowed in (a wrong
  // token): a lost session becomes a refusal, which retrying cannot mend.
  SessionEnd Finished(SessionEnd end, bool not_authenticated);
  // After the session ended: whether to rejoin or leave, and with what
  // exit code.
  struct Next {
    bool rejoin = false;
    int exit_code = 0;
  };
  Next AfterSession(const SessionEnd& end);

  // The last generation's own exits (what the next registration carries).
  std::vector<trl::launch::v1::WorkerExited> OwnExitsOfLastGeneration() const;
  // The exit of `local_rank` in `generation` that the next registration
  // would carry (what the agent keeps on disk for a later agent), if any.
  std::optional<trl::launch::v1::WorkerExited> OwnExit(int64_t generation,
                                                       int local_rank) const;
  // Before the first session: what an earlier agent of this machine kept
  // of generation `generation` of run `run_id` of the job
  // (agent/cleanup/exit_ledger.h), carried by the registration as a thawed
  // agent carries its own.
  void CarryEarlierExits(const std::string& run_id, int64_t generation,
                         std::vector<trl::launch::v1::WorkerExited> exits);
  int64_t running_generation() const { return running_generation_; }
  // What the agent stands for now: a spare, or a machine. A spare takes a
  // machine's rank when the coordinator hands it over (RoleChange), and a
  // machine's agent may become a spare (its place taken while it was away,
  // or its host cordoned); the next registration says what it is.
  bool spare() const { return spare_; }
  // -1 before the first registration of a machine's agent (its own
  // --machine_rank then), and for a spare.
  int machine_rank() const { return machine_rank_; }
  const AgentCoreSettings& settings() const { return settings_; }

 private:
  AgentEffects Assigned(const trl::launch::v1::Assignment& assignment,
                        Time now);
  // The coordinator had heard this agent's word sent at `sent`.
  void Vouched(Time sent);
  // Whether the lease has run out by `now`; if so, it is over for good,
  // and `effects` end the session saying `generation` was not started.
  bool LeaseRanOut(Time now, int64_t generation, AgentEffects* effects);
  // When this agent sent its stream message `count` (1: the registration),
  // if still known.
  std::optional<Time> StreamMessageSentAt(uint64_t count);
  AgentEffects Registered(const trl::launch::v1::RegistrationReply& reply);
  AgentEffects RoleChanged(const trl::launch::v1::RoleChange& change);

  const AgentCoreSettings settings_;
  // The agent's life.
  int stop_signal_ = 0;
  bool handshake_proven_ = false;
  bool had_session_ = false;
  int64_t report_generation_ = -1;
  std::string report_run_id_;  // the run of the job of report_generation_
  std::map<int, trl::launch::v1::WorkerExited> own_exits_;
  bool spare_ = false;
  bool may_be_spare_ = false;  // started as one, or became one
  int machine_rank_ = -1;
  // The session's.
  trl::launch::v1::AgentRegistration registration_;
  // When this agent sent the newest word the coordinator is known to have
  // heard (at the session's start, its own clock): the lease runs from
  // here.
  Time last_heard_{};
  // When the stream's messages were sent: the first is message
  // stream_sent_first_ (1: the registration); at most kStreamSendsKept.
  std::deque<Time> stream_sent_;
  uint64_t stream_sent_first_ = 1;
  std::optional<Time> expired_looking_since_;
  bool lease_expired_ = false;
  bool sweeping_ = false;
  bool udp_open_ = false;
  Time next_heartbeat_{};
  int64_t assigned_generation_ = -1;  // the newest of this session
  int64_t running_generation_ = -1;   // the workers' (-1: none)
  bool connection_lost_ = false;
  bool ended_ = false;
};

}  // namespace trl

#endif  // TRL_AGENT_CORE_AGENT_CORE_H_

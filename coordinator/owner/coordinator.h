// The coordinator's one owner. A single thread (the owner) runs the
// CoordinatorCore: agent messages, stream ends, stop requests, heartbeat
// datagrams and the ticks that check timeouts are events, queued by the
// edges (gRPC reactors, the UDP reader, the signal watcher, the local
// agent) and handled one at a time in the order they came. The core's
// slow work (a generation's rendezvous, the state file) runs on a
// SerialWorker and comes back to the owner as an event. Queries (status,
// the history, which machine a stream is) are events too: the owner copies
// what was asked for between two events, and the caller builds its answer
// from that copy on its own thread.
//
// Agents' messages are the one event without a natural bound (a stream
// sends as fast as it likes): each stream may have only its share queued
// (EventQueueCaps); a stream over it is paused until the owner catches up.
//
// docs/coordinator-threads.md draws the threads and the events.
#ifndef TRL_COORDINATOR_OWNER_COORDINATOR_H_
#define TRL_COORDINATOR_OWNER_COORDINATOR_H_

#include <signal.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/monotonic_cond_var.h"
#include "coordinator/owner/core.h"
#include "coordinator/owner/serial_worker.h"

namespace trl {

// How much of the owner's queue agents' messages may take. A stream is
// paused (OnMessage returns false) by the message that reaches its own
// share or the total; it reads again once the owner has handled its queued
// messages down to half its share and the total is under half too.
// Queries, stream ends, stop requests and the owner's own events are not
// counted and never paused. Bytes are the message's encoded size plus
// kEventOverheadBytes. docs/coordinator-threads.md says why these numbers.
struct EventQueueCaps {
  size_t stream_events = 64;
  size_t stream_bytes = 1 << 20;
  size_t total_events = 8192;
  size_t total_bytes = 64 << 20;
};

// Agents' messages in the owner's queue, for tests and counters.
struct EventQueueStats {
  size_t queued_events = 0;  // now
  size_t queued_bytes = 0;
  size_t high_water_events = 0;  // the most ever queued at once
  size_t high_water_bytes = 0;
  size_t stream_high_water_events = 0;  // the most one stream ever had
  size_t paused_streams = 0;            // now
  uint64_t pauses = 0;                  // in all
  size_t queued_all = 0;  // every event not yet taken by the owner, now
};

class Coordinator {
 public:
  using Clock = CoordinatorCore::Clock;
  using DatagramReply = CoordinatorCore::DatagramReply;
  using DefenceCounts = CoordinatorCore::DefenceCounts;

  // The owner ticks every options.policy.tick_interval (1 s if unset), or
  // sooner when the core's next deadline is sooner, both on `clock`.
  Coordinator(CoordinatorOptions options, RendezvousSource rendezvous,
              Clock clock, EventQueueCaps caps = EventQueueCaps(),
              CoordinatorCore::WallClock wall_clock = SystemUnixMillis);
  // Waits (up to 15 s) for the slow work under way, so that the job's
  // last state-file change is made, then ends both threads.
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // What an agent message costs the queue beyond its encoded size (the
  // event, its closure, the message's own object).
  static constexpr size_t kEventOverheadBytes = 256;

  // Events: queued, in order; they return at once.
  // An agent's message. Returns false when `link` is paused: it must read
  // no more until the owner calls link->ResumeReading() (the message
  // itself is queued). Never false on the owner thread.
  bool OnMessage(AgentLink* link, trl::launch::v1::AgentMessage message);
  void RequestStop(const std::string& reason, int exit_code,
                   const StopSignal& signal = StopSignal{SIGTERM});
  // The owner looks at `clock` again and ticks if a tick or a deadline is
  // due; returns once it has. For a test that moved its clock.
  void Nudge();
  // `encrypted`: see CoordinatorCore::OfferUdpHeartbeats.
  void OfferUdpHeartbeats(int port,
                          std::function<std::string(size_t)> random_bytes,
                          bool encrypted);
  // `counts` runs on the owner: cheap, and never calling back in here.
  void ReportDefences(std::function<DefenceCounts()> counts);
  // CoordinatorCore::OnRegistered: `callback` runs on the owner; it is in
  // place (or gone, for nullptr) when this returns.
  void OnRegistered(
      std::function<void(int machine_rank, AgentLink* link)> callback);

  // Returns once the owner has handled it, and with it everything `link`
  // sent before: from then on nothing uses `link`, and its stream may be
  // destroyed. Idempotent.
  void OnDisconnected(AgentLink* link);

  // Queries: answered by the owner between events; the caller waits (the
  // owner itself, asking from inside an event, is answered at once).
  // A batch of heartbeat datagrams goes ahead of everything queued: it is
  // answered after the event the owner is running (see ahead_).
  std::vector<DatagramReply> OnHeartbeatDatagrams(
      const std::vector<std::string_view>& datagrams);
  trl::launch::v1::JobStatus Status() const;
  trl::launch::v1::JobStatus Status(
      const trl::launch::v1::JobStatusRequest& request) const;
  trl::launch::v1::JobEvents Events() const;
  std::set<std::string> AgentPeers() const;
  // `trl-coord uncordon HOST` (CoordinatorCore::Uncordon).
  absl::Status Uncordon(const std::string& hostname);
  int MachineOf(const AgentLink* link) const;
  int SendToMachines(const std::set<int>& machines,
                     const trl::launch::v1::CoordinatorMessage& message);
  const std::string& job_id() const { return job_id_; }
  // Agents' messages queued; answered at once (not a query).
  EventQueueStats QueueStats() const;

  // Blocks until the job has ended or the (steady clock) deadline passed.
  std::optional<JobOutcome> WaitForOutcome(TimePoint deadline) const;
  // Blocks until CoordinatorCore::FarewellsHeard or the deadline passed.
  bool WaitForFarewells(TimePoint deadline) const;

 private:
  // One event; `stream` is set for an agent's message (counted in the
  // caps), with its `bytes`.
  struct Event {
    std::function<void()> run;
    AgentLink* stream = nullptr;
    size_t bytes = 0;
  };
  // An agent stream's share of the queue.
  struct StreamQueue {
    size_t events = 0;
    size_t bytes = 0;
    bool paused = false;
    bool waiting_for_total = false;  // in waiting_for_total_
  };

  // Queues `event` for the owner. Once the owner has ended, runs nothing
  // and returns false.
  bool Post(std::function<void()> event) const;
  // The same, ahead of everything queued (ahead_).
  bool PostAhead(std::function<void()> event) const;
  // On the owner, after an agent's message ran: takes it off its stream's
  // share, and resumes the streams that may read again.
  void Handled(const Event& event) ABSL_LOCKS_EXCLUDED(mutex_);
  // On the owner, once `link`'s stream ended: nothing resumes it now.
  void Forget(const AgentLink* link) ABSL_LOCKS_EXCLUDED(mutex_);
  bool TotalUnderHalf() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  bool OwnerHasNothingQueued() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Runs `query` on the owner and returns its result.
  template <typename Query>
  auto Ask(Query query, bool ahead = false) const -> decltype(query());
  void RunOwner();
  // On the owner, between two events: runs what was posted ahead.
  void RunAhead();
  // Ticks the core if its tick is due by `clock_`, and sets when the next
  // one is (sooner if the core has a deadline before it). Owner only.
  void TickIfDue();
  TimePoint next_tick_;  // on clock_; owner only
  // What the owner publishes after each batch of events: the outcome (for
  // WaitForOutcome), whether slow work is outstanding (the destructor) and
  // whether every farewell is heard (WaitForFarewells).
  void PublishOutcome() ABSL_LOCKS_EXCLUDED(mutex_);

  const std::string job_id_;
  const std::chrono::milliseconds tick_interval_;
  const Clock clock_;

  mutable absl::Mutex mutex_;
  // The owner's wait for its next event or tick and WaitForOutcome follow
  // the monotonic clock (common/monotonic_cond_var.h says why not absl's
  // timed wait). owner_wakeup_ is notified when ending_ is set and when
  // an event is queued while none was (the owner waits only then: one
  // wake-up per batch, not per event); outcome_published_ when outcome_
  // changes (coord_main's thread waits on it for the whole job, and must
  // not be woken by every event).
  mutable MonotonicCondVar owner_wakeup_;
  mutable MonotonicCondVar outcome_published_;
  // Notified when work_outstanding_ or farewells_heard_ changes: the end
  // of a job waits for events, not in slices of sleep.
  mutable MonotonicCondVar ending_progress_;
  mutable std::deque<Event> events_ ABSL_GUARDED_BY(mutex_);
  // The lane ahead of events_, for heartbeat datagrams only: the owner
  // looks at it before each event, so a batch waits for one event, not
  // for the queue (at 16,384 agents, thousands of messages: the socket's
  // buffer filled and acks were lost). The one UDP thread asks and waits
  // for its answer, so the lane holds at most one batch (64 datagrams):
  // a flood of datagrams can delay each queued event by one batch, no
  // more. ahead_waiting_ is the owner's cheap look.
  mutable std::deque<Event> ahead_ ABSL_GUARDED_BY(mutex_);
  mutable std::atomic<bool> ahead_waiting_{false};
  const EventQueueCaps caps_;
  std::unordered_map<const AgentLink*, StreamQueue> streams_
      ABSL_GUARDED_BY(mutex_);
  // Paused streams whose own share is low enough, waiting for the total.
  std::vector<AgentLink*> waiting_for_total_ ABSL_GUARDED_BY(mutex_);
  EventQueueStats queue_ ABSL_GUARDED_BY(mutex_);
  bool ending_ ABSL_GUARDED_BY(mutex_) = false;
  bool owner_ended_ ABSL_GUARDED_BY(mutex_) = false;
  std::optional<JobOutcome> outcome_ ABSL_GUARDED_BY(mutex_);
  bool work_outstanding_ ABSL_GUARDED_BY(mutex_) = false;
  bool farewells_heard_ ABSL_GUARDED_BY(mutex_) = false;

  // Touched only by the owner thread (and by the constructor before it
  // starts); mutable, since the const queries run there too.
  mutable CoordinatorCore core_;
  SerialWorker slow_work_;
  std::atomic<std::thread::id> owner_id_{};
  std::thread owner_;  // last: started once the rest exists
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_COORDINATOR_H_

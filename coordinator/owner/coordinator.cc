#include "coordinator/owner/coordinator.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/synchronization/notification.h"
#include "common/thread_name.h"
#include "common/tsan_visible_mutex.h"

namespace trl {

namespace pb = trl::launch::v1;

Coordinator::Coordinator(CoordinatorOptions options,
                         RendezvousSource rendezvous, Clock clock,
                         EventQueueCaps caps,
                         CoordinatorCore::WallClock wall_clock)
    : job_id_(options.job_id),
      tick_interval_(options.policy.tick_interval.count() > 0
                         ? options.policy.tick_interval
                         : std::chrono::milliseconds(1000)),
      clock_(clock),
      caps_(caps),
      core_(std::move(options), std::move(rendezvous), std::move(clock),
            std::move(wall_clock)) {
  core_.SetOffload(
      [this](std::function<void()> work, std::function<void()> done) {
        slow_work_.Post(
            [this, work = std::move(work), done = std::move(done)]() mutable {
              work();
              Post(std::move(done));
            });
      });
  PublishOutcome();
  owner_ = std::thread([this] { RunOwner(); });
}

Coordinator::~Coordinator() {
  // The job's last writes (its state file removed at the end) are slow
  // work whose end comes back as an event: the owner must still run.
  // Asked through the queue (it sees work handed out by events still
  // queued), then waited for: the owner publishes after each batch, and
  // the published word may be a batch behind the answer, so it is asked
  // again after each wake-up; every 50 ms at most without one.
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (Ask([this] { return core_.WorkOutstanding(); })) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= give_up) break;
    MutexLock lock(&mutex_);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
      return !work_outstanding_;
    };
    ending_progress_.WaitUntil(
        &mutex_,
        std::min<TimePoint>(give_up, now + std::chrono::milliseconds(50)),
        idle);
  }
  {
    MutexLock lock(&mutex_);
    ending_ = true;
  }
  owner_wakeup_.NotifyAll();
  owner_.join();
  // slow_work_ (destroyed next) runs whatever is still queued.
}

bool Coordinator::Post(std::function<void()> event) const {
  MutexLock lock(&mutex_);
  if (owner_ended_) return false;
  const bool owner_may_wait = OwnerHasNothingQueued();
  events_.push_back(Event{std::move(event)});
  if (owner_may_wait) owner_wakeup_.NotifyAll();
  return true;
}

bool Coordinator::PostAhead(std::function<void()> event) const {
  MutexLock lock(&mutex_);
  if (owner_ended_) return false;
  const bool owner_may_wait = OwnerHasNothingQueued();
  ahead_.push_back(Event{std::move(event)});
  ahead_waiting_.store(true, std::memory_order_release);
  if (owner_may_wait) owner_wakeup_.NotifyAll();
  return true;
}

template <typename Query>
auto Coordinator::Ask(Query query, bool ahead) const -> decltype(query()) {
  using Answer = decltype(query());
  // Asked by the owner itself (an event's handler calling out to code that
  // asks again): it would wait for itself.
  if (std::this_thread::get_id() == owner_id_.load()) return query();
  std::optional<Answer> answer;
  absl::Notification answered;
  auto answer_it = [&] {
    answer.emplace(query());
    HandToGrpc(&answer);  // TSan cannot see through absl::Notification
    answered.Notify();
  };
  const bool posted = ahead ? PostAhead(answer_it) : Post(answer_it);
  if (!posted) {
    // The owner has ended (the coordinator is being destroyed): nothing
    // else runs the core now.
    return query();
  }
  answered.WaitForNotification();
  TakeFromGrpc(&answer);
  return std::move(*answer);
}

void Coordinator::RunOwner() {
  NameThisThread("trl-owner");
  owner_id_.store(std::this_thread::get_id());
  // Ticks are timed on the injected clock, as the core's deadlines are: a
  // test on a fake clock fires a tick by moving the clock and calling
  // Nudge. The wait itself is on the monotonic clock, for as long as the
  // injected one has left until the tick.
  next_tick_ = clock_();
  while (true) {
    const auto wake_at =
        std::chrono::steady_clock::now() +
        std::max<TimePoint::duration>(next_tick_ - clock_(),
                                      TimePoint::duration::zero());
    std::deque<Event> batch;
    {
      MutexLock lock(&mutex_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
        return !events_.empty() || !ahead_.empty() || ending_;
      };
      owner_wakeup_.WaitUntil(&mutex_, wake_at, ready);
      if (ending_ && events_.empty() && ahead_.empty()) {
        owner_ended_ = true;
        return;
      }
      batch.swap(events_);
    }
    RunAhead();
    for (const Event& event : batch) {
      RunAhead();
      event.run();
      if (event.stream != nullptr) Handled(event);
    }
    TickIfDue();
    PublishOutcome();
  }
}

void Coordinator::TickIfDue() {
  if (clock_() >= next_tick_) {
    core_.Tick();
    next_tick_ = clock_() + tick_interval_;
  }
  // Sooner if a deadline (a heartbeat timeout, a backoff) is due first.
  if (const auto deadline = core_.NextDeadline()) {
    next_tick_ = std::min(next_tick_, std::max(*deadline, clock_()));
  }
}

void Coordinator::Nudge() {
  Ask([this] {
    TickIfDue();
    return true;
  });
}

void Coordinator::RunAhead() {
  if (!ahead_waiting_.load(std::memory_order_acquire)) return;
  std::deque<Event> ahead;
  {
    MutexLock lock(&mutex_);
    ahead.swap(ahead_);
    ahead_waiting_.store(false, std::memory_order_relaxed);
  }
  for (const Event& event : ahead) event.run();
}

void Coordinator::PublishOutcome() {
  const std::optional<JobOutcome>& outcome = core_.outcome();
  const bool outstanding = core_.WorkOutstanding();
  // Only once the job has ended: before, nobody waits for it.
  const bool heard = outcome.has_value() && core_.FarewellsHeard();
  MutexLock lock(&mutex_);
  if (outstanding != work_outstanding_ || heard != farewells_heard_) {
    work_outstanding_ = outstanding;
    farewells_heard_ = heard;
    ending_progress_.NotifyAll();
  }
  if (outcome.has_value() == outcome_.has_value()) return;
  outcome_ = outcome;
  outcome_published_.NotifyAll();
}

bool Coordinator::OnMessage(AgentLink* link, pb::AgentMessage message) {
  const size_t bytes = message.ByteSizeLong() + kEventOverheadBytes;
  const bool on_owner = std::this_thread::get_id() == owner_id_.load();
  MutexLock lock(&mutex_);
  if (owner_ended_) return true;  // dropped: the job is over
  const bool owner_may_wait = OwnerHasNothingQueued();
  events_.push_back(Event{[this, link, message = std::move(message)] {
                            core_.OnMessage(link, message);
                          },
                          link, bytes});
  if (owner_may_wait) owner_wakeup_.NotifyAll();
  StreamQueue& stream = streams_[link];
  stream.events += 1;
  stream.bytes += bytes;
  queue_.queued_events += 1;
  queue_.queued_bytes += bytes;
  queue_.high_water_events =
      std::max(queue_.high_water_events, queue_.queued_events);
  queue_.high_water_bytes =
      std::max(queue_.high_water_bytes, queue_.queued_bytes);
  queue_.stream_high_water_events =
      std::max(queue_.stream_high_water_events, stream.events);
  // The owner never waits for itself; a paused stream is not paused again.
  if (on_owner || stream.paused) return true;
  const bool over = stream.events >= caps_.stream_events ||
                    stream.bytes >= caps_.stream_bytes ||
                    queue_.queued_events >= caps_.total_events ||
                    queue_.queued_bytes >= caps_.total_bytes;
  if (!over) return true;
  stream.paused = true;
  queue_.paused_streams += 1;
  queue_.pauses += 1;
  return false;
}

bool Coordinator::OwnerHasNothingQueued() const {
  return events_.empty() && ahead_.empty();
}

bool Coordinator::TotalUnderHalf() const {
  return queue_.queued_events <= caps_.total_events / 2 &&
         queue_.queued_bytes <= caps_.total_bytes / 2;
}

void Coordinator::Handled(const Event& event) {
  std::vector<AgentLink*> resume;
  {
    MutexLock lock(&mutex_);
    queue_.queued_events -= 1;
    queue_.queued_bytes -= event.bytes;
    auto found = streams_.find(event.stream);
    if (found != streams_.end()) {
      StreamQueue& stream = found->second;
      stream.events -= 1;
      stream.bytes -= event.bytes;
      if (stream.paused && !stream.waiting_for_total &&
          stream.events <= caps_.stream_events / 2 &&
          stream.bytes <= caps_.stream_bytes / 2) {
        stream.waiting_for_total = true;
        waiting_for_total_.push_back(event.stream);
      }
      if (!stream.paused && stream.events == 0) streams_.erase(found);
    }
    if (!waiting_for_total_.empty() && TotalUnderHalf()) {
      for (AgentLink* link : waiting_for_total_) {
        auto waiting = streams_.find(link);
        waiting->second.paused = false;
        waiting->second.waiting_for_total = false;
        if (waiting->second.events == 0) streams_.erase(waiting);
        queue_.paused_streams -= 1;
        resume.push_back(link);
      }
      waiting_for_total_.clear();
    }
  }
  // Between two events, outside the core: the stream's next read runs on
  // one of gRPC's threads (never inline here) and may post again.
  for (AgentLink* link : resume) link->ResumeReading();
}

void Coordinator::Forget(const AgentLink* link) {
  MutexLock lock(&mutex_);
  auto found = streams_.find(link);
  if (found == streams_.end()) return;
  if (found->second.paused) queue_.paused_streams -= 1;
  if (found->second.waiting_for_total) {
    waiting_for_total_.erase(
        std::find(waiting_for_total_.begin(), waiting_for_total_.end(), link));
  }
  streams_.erase(found);
}

EventQueueStats Coordinator::QueueStats() const {
  MutexLock lock(&mutex_);
  EventQueueStats stats = queue_;
  stats.queued_all = events_.size() + ahead_.size();
  return stats;
}

void Coordinator::RequestStop(const std::string& reason, int exit_code,
                              const StopSignal& signal) {
  Post([this, reason, exit_code, signal] {
    core_.RequestStop(reason, exit_code, signal);
  });
}

void Coordinator::OfferUdpHeartbeats(
    int port, std::function<std::string(size_t)> random_bytes, bool encrypted) {
  Post([this, port, random_bytes = std::move(random_bytes),
        encrypted]() mutable {
    core_.OfferUdpHeartbeats(port, std::move(random_bytes), encrypted);
  });
}

void Coordinator::ReportDefences(std::function<DefenceCounts()> counts) {
  Post([this, counts = std::move(counts)]() mutable {
    core_.ReportDefences(std::move(counts));
  });
}

void Coordinator::OnRegistered(
    std::function<void(int machine_rank, AgentLink* link)> callback) {
  // Installed before this returns: once a relay has set nullptr (it is
  // going away), no later registration calls the old one.
  Ask([this, &callback] {
    core_.OnRegistered(std::move(callback));
    return true;
  });
}

void Coordinator::OnDisconnected(AgentLink* link) {
  Ask([this, link] {
    core_.OnDisconnected(link);
    // Before the caller hears it was handled and deletes the stream.
    Forget(link);
    return true;
  });
}

std::vector<Coordinator::DatagramReply> Coordinator::OnHeartbeatDatagrams(
    const std::vector<std::string_view>& datagrams) {
  return Ask([&] { return core_.OnHeartbeatDatagrams(datagrams); },
             /*ahead=*/true);
}

pb::JobStatus Coordinator::Status() const {
  return Status(pb::JobStatusRequest());
}

pb::JobStatus Coordinator::Status(const pb::JobStatusRequest& request) const {
  // The owner copies the rows asked for; they become the answer here.
  JobStatusCopy copy = Ask([&] { return core_.CopyStatus(request); });
  return FinishJobStatus(std::move(copy));
}

pb::JobEvents Coordinator::Events() const {
  return Ask([this] { return core_.Events(); });
}

std::set<std::string> Coordinator::AgentPeers() const {
  return Ask([this] { return core_.AgentPeers(); });
}

absl::Status Coordinator::Uncordon(const std::string& hostname) {
  return Ask([this, &hostname] { return core_.Uncordon(hostname); });
}

int Coordinator::MachineOf(const AgentLink* link) const {
  return Ask([this, link] { return core_.MachineOf(link); });
}

int Coordinator::SendToMachines(const std::set<int>& machines,
                                const pb::CoordinatorMessage& message) {
  return Ask([&] { return core_.SendToMachines(machines, message); });
}

std::optional<JobOutcome> Coordinator::WaitForOutcome(
    TimePoint deadline) const {
  MutexLock lock(&mutex_);
  auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return outcome_.has_value();
  };
  outcome_published_.WaitUntil(&mutex_, deadline, ended);
  return outcome_;
}

bool Coordinator::WaitForFarewells(TimePoint deadline) const {
  while (true) {
    if (Ask([this] { return core_.FarewellsHeard(); })) {
      return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    // Woken when the owner hears the last farewell (or the last stream
    // ends). Without one, asked again within 50 ms: a machine cut off
    // stops being awaited as the clock passes, which no event says.
    MutexLock lock(&mutex_);
    auto heard = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
      return farewells_heard_;
    };
    if (ending_progress_.WaitUntil(
            &mutex_,
            std::min<TimePoint>(deadline, now + std::chrono::milliseconds(50)),
            heard)) {
      return true;
    }
  }
}

}  // namespace trl

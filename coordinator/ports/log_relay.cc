#include "coordinator/ports/log_relay.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_handoff.h"
#include "common/tsan_visible_mutex.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

// What a queued line costs beyond its text, roughly.
constexpr size_t kLineOverhead = 64;

// A call refused before it starts.
class RefusedLogs : public grpc::ServerWriteReactor<pb::LogBatch> {
 public:
  explicit RefusedLogs(const grpc::Status& status) {
    HandToGrpc(this);
    Finish(status);
  }
  void OnDone() override {
    TakeFromGrpc(this);
    delete this;
  }
};

}  // namespace

// One client's call: its queue and the reactor that writes it. The
// reactor (owned by gRPC) stays alive while a write is in flight or Finish
// has not been called; only this class calls Finish, with the mutex held
// to decide and no write in flight, so a pusher that set writing_ may call
// StartWrite after letting the mutex go.
class LogRelay::Client : public grpc::ServerWriteReactor<pb::LogBatch> {
 public:
  Client(LogRelay* relay, uint64_t id, const pb::LogsRequest& request,
         std::set<int> machines)
      : relay_(relay),
        id_(id),
        follow_(request.follow()),
        rank_(request.has_rank() ? request.rank() : -1),
        machines_(std::move(machines)) {}

  // Called once the relay knows how many agents will answer (some may
  // have answered already).
  void Start(int agents) {
    bool finish = false;
    bool write = false;
    {
      MutexLock lock(&mutex_);
      pending_history_ += agents;
      started_ = true;
      write = NextLocked(&finish);
    }
    Act(write, finish);
  }

  // Lines from `machine`'s agent (history_done: its retained lines are
  // all sent).
  void Push(int machine, const pb::LogBatch& batch, int history_done) {
    bool finish = false;
    bool write = false;
    {
      MutexLock lock(&mutex_);
      if (finished_) return;
      int64_t& last_ms = last_unix_ms_[machine];
      for (const pb::LogLine& line : batch.lines()) {
        last_ms = std::max(last_ms, line.unix_ms());
        const size_t cost = line.text().size() + kLineOverhead;
        if (queued_bytes_ + cost > kClientQueueBytes) {
          // This client reads slower than the workers print: drop.
          const uint64_t count = line.dropped() > 0 ? line.dropped() : 1;
          if (!queue_.empty() && queue_.back().dropped() > 0) {
            queue_.back().set_dropped(queue_.back().dropped() + count);
          } else {
            pb::LogLine marker;
            marker.set_unix_ms(line.unix_ms());
            marker.set_rank(-1);
            marker.set_dropped(count);
            queue_.push_back(std::move(marker));
            queued_bytes_ += kLineOverhead;
          }
          continue;
        }
        queue_.push_back(line);
        queued_bytes_ += cost;
      }
      pending_history_ -= history_done;
      write = NextLocked(&finish);
    }
    Act(write, finish);
  }

  void End(const std::optional<pb::JobEndForLogs>& job_end) {
    bool finish = false;
    bool write = false;
    {
      MutexLock lock(&mutex_);
      ended_ = true;
      // Only a client that follows to the end exits with the job's code.
      if (follow_) job_end_ = job_end;
      write = NextLocked(&finish);
    }
    Act(write, finish);
  }

  void OnWriteDone(bool ok) override {
    TakeFromGrpc(this);
    bool finish = false;
    bool write = false;
    {
      MutexLock lock(&mutex_);
      writing_ = false;
      if (!ok) cancelled_ = true;
      write = NextLocked(&finish);
    }
    Act(write, finish);
  }

  void OnCancel() override {
    TakeFromGrpc(this);
    bool finish = false;
    {
      MutexLock lock(&mutex_);
      cancelled_ = true;
      NextLocked(&finish);
    }
    Act(false, finish);
  }

  void OnDone() override {
    TakeFromGrpc(this);
    relay_->Forget(id_);  // may delete the relay's reference, not this
    self_.reset();        // may delete this
  }

  const std::set<int>& machines() const { return machines_; }
  bool follows(int machine) const {
    return follow_ && (machines_.empty() || machines_.count(machine) > 0);
  }
  // The subscription that asks `machine` for what this client has not had
  // of it.
  pb::CoordinatorMessage Resubscription(int machine) {
    pb::CoordinatorMessage message;
    pb::LogSubscribe* subscribe = message.mutable_log_subscribe();
    subscribe->set_subscription(id_);
    if (rank_ >= 0) subscribe->add_ranks(rank_);
    subscribe->set_follow(true);
    MutexLock lock(&mutex_);
    auto it = last_unix_ms_.find(machine);
    subscribe->set_history_after_unix_ms(
        it == last_unix_ms_.end() ? 0 : it->second);
    return message;
  }
  void KeepAlive(std::shared_ptr<Client> self) { self_ = std::move(self); }

 private:
  // Decides, with mutex_ held, whether to start a write (filling
  // in_flight_) or to finish. Never both.
  bool NextLocked(bool* finish) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    *finish = false;
    if (finished_ || writing_) return false;
    if (cancelled_) {
      finished_ = true;
      *finish = true;
      return false;
    }
    if (queue_.empty() && ended_ && job_end_) {
      // The last batch: how the job ended (`logs -f` exits with its code).
      in_flight_.Clear();
      *in_flight_.mutable_job_end() = *job_end_;
      job_end_.reset();
      writing_ = true;
      return true;
    }
    if (queue_.empty()) {
      if (ended_ || (!follow_ && pending_history_ <= 0 && started_)) {
        finished_ = true;
        *finish = true;
      }
      return false;
    }
    in_flight_.Clear();
    size_t bytes = 0;
    while (!queue_.empty() && bytes < kBatchBytes) {
      pb::LogLine& line = queue_.front();
      const size_t cost = line.text().size() + kLineOverhead;
      bytes += cost;
      queued_bytes_ -= cost;
      in_flight_.add_lines()->Swap(&line);
      queue_.pop_front();
    }
    writing_ = true;
    return true;
  }

  void Act(bool write, bool finish) {
    if (write) {
      HandToGrpc(this);
      StartWrite(&in_flight_);
    } else if (finish) {
      HandToGrpc(this);
      Finish(grpc::Status::OK);
    }
  }

  LogRelay* const relay_;
  const uint64_t id_;
  const bool follow_;
  const int rank_;                // -1: every rank of the machines
  const std::set<int> machines_;  // empty: every machine
  std::shared_ptr<Client> self_;  // the relay's and gRPC's hold

  absl::Mutex mutex_;
  std::deque<pb::LogLine> queue_ ABSL_GUARDED_BY(mutex_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  // Per machine, when its agent read the newest line this client got.
  std::map<int, int64_t> last_unix_ms_ ABSL_GUARDED_BY(mutex_);
  int pending_history_ ABSL_GUARDED_BY(mutex_) = 0;
  bool started_ ABSL_GUARDED_BY(mutex_) = false;
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mutex_) = false;
  bool ended_ ABSL_GUARDED_BY(mutex_) = false;
  // Sent once the queue is empty, after the job ended.
  std::optional<pb::JobEndForLogs> job_end_ ABSL_GUARDED_BY(mutex_);
  // Filled by NextLocked with mutex_ held; then the write in flight's
  // alone until OnWriteDone.
  pb::LogBatch in_flight_;
};

LogRelay::LogRelay(Coordinator* core) : core_(core) {
  core_->OnRegistered([this](int machine, AgentLink* link) {
    OnMachineRegistered(machine, link);
  });
}

LogRelay::~LogRelay() { core_->OnRegistered(nullptr); }

void LogRelay::OnMachineRegistered(int machine, AgentLink* link) {
  std::vector<std::shared_ptr<Client>> following;
  {
    MutexLock lock(&mutex_);
    for (const auto& [id, client] : clients_) {
      if (client->follows(machine)) following.push_back(client);
    }
  }
  for (const auto& client : following) {
    link->Send(client->Resubscription(machine));
  }
}

grpc::ServerWriteReactor<pb::LogBatch>* LogRelay::Open(
    const pb::LogsRequest& request) {
  const pb::JobStatus status = core_->Status();
  std::set<int> machines;  // empty: every machine
  if (request.has_machine_rank()) {
    const int machine = request.machine_rank();
    if (machine < 0 || machine >= status.num_machines()) {
      return new RefusedLogs(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("machine ", machine, " does not exist: the job has ",
                       status.num_machines(), " machine(s), 0..",
                       status.num_machines() - 1)));
    }
    machines.insert(machine);
  }
  if (request.has_rank()) {
    const int rank = request.rank();
    if (rank < 0 || (status.world_size() > 0 && rank >= status.world_size())) {
      return new RefusedLogs(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("rank ", rank, " does not exist: the job has ",
                       status.world_size(), " rank(s), 0..",
                       status.world_size() - 1)));
    }
    for (const auto& entry : status.ranks()) {
      if (entry.rank() != rank) continue;
      if (!machines.empty() && machines.count(entry.machine_rank()) == 0) {
        return new RefusedLogs(
            grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                         absl::StrCat("rank ", rank, " runs on machine ",
                                      entry.machine_rank(), ", not on machine ",
                                      *machines.begin())));
      }
      machines = {entry.machine_rank()};
    }
  }
  std::shared_ptr<Client> client;
  uint64_t id = 0;
  {
    MutexLock lock(&mutex_);
    if (clients_.size() >= kMaxClients) {
      return new RefusedLogs(
          grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                       absl::StrCat("the coordinator serves at most ",
                                    kMaxClients, " `logs` clients at once")));
    }
    if (ended_) {
      return new RefusedLogs(
          grpc::Status(grpc::StatusCode::UNAVAILABLE, "the job has ended"));
    }
    id = next_id_++;
    client = std::make_shared<Client>(this, id, request, machines);
    client->KeepAlive(client);
    clients_[id] = client;
  }
  pb::CoordinatorMessage subscribe;
  subscribe.mutable_log_subscribe()->set_subscription(id);
  if (request.has_rank()) {
    subscribe.mutable_log_subscribe()->add_ranks(request.rank());
  }
  subscribe.mutable_log_subscribe()->set_follow(request.follow());
  const int agents = core_->SendToMachines(machines, subscribe);
  client->Start(agents);
  HandToGrpc(client.get());
  return client.get();
}

void LogRelay::OnAgentBatch(int machine, const pb::LogBatch& batch) {
  if (machine < 0) return;  // a stream that has not registered
  std::shared_ptr<Client> client;
  {
    MutexLock lock(&mutex_);
    auto it = clients_.find(batch.subscription());
    if (it == clients_.end()) return;  // a client that left
    client = it->second;
  }
  if (!client->machines().empty() && client->machines().count(machine) == 0) {
    return;  // not a machine this subscription was sent to
  }
  client->Push(machine, batch, batch.history_done() ? 1 : 0);
}

void LogRelay::EndAll(const std::optional<pb::JobEndForLogs>& job_end) {
  std::vector<std::shared_ptr<Client>> clients;
  {
    MutexLock lock(&mutex_);
    ended_ = true;
    for (auto& [id, client] : clients_) clients.push_back(client);
  }
  for (auto& client : clients) client->End(job_end);
}

void LogRelay::Forget(uint64_t id) {
  std::shared_ptr<Client> client;
  {
    MutexLock lock(&mutex_);
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    client = std::move(it->second);
    clients_.erase(it);
  }
  pb::CoordinatorMessage unsubscribe;
  unsubscribe.mutable_log_unsubscribe()->set_subscription(id);
  core_->SendToMachines(client->machines(), unsubscribe);
}

}  // namespace trl

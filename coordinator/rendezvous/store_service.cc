#include "coordinator/rendezvous/store_service.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <map>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/auth_token.h"
#include "common/grpc_handoff.h"
#include "common/logging.h"
#include "common/monotonic_cond_var.h"
#include "common/thread_name.h"
#include "common/tsan_visible_mutex.h"
#include "coordinator/access/connection_limits.h"
#include "proto/trl_launch.grpc.pb.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

// The longest a single Get may wait.
constexpr uint32_t kMaxWaitMs = 3600 * 1000;

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

StoreCaller CallerOf(const grpc::CallbackServerContext& context,
                     const pb::StoreNamespace& scope) {
  StoreCaller caller{scope.job_id(), scope.generation(), ""};
  const auto& metadata = context.client_metadata();
  auto found = metadata.find(kAuthMetadataKey);
  if (found != metadata.end()) {
    const std::string value(found->second.data(), found->second.size());
    const std::string prefix = "Bearer ";
    if (value.rfind(prefix, 0) == 0) caller.token = value.substr(prefix.size());
  }
  return caller;
}

}  // namespace

class StoreService::Impl : public pb::Store::CallbackService {
 public:
  explicit Impl(StoreLimits limits)
      : store_(limits), timer_([this] { ExpireLoop(); }) {}

  ~Impl() override {
    {
      MutexLock lock(&mutex_);
      stopping_ = true;
    }
    timer_wakeup_.NotifyAll();
    timer_.join();
  }

  std::string OpenGeneration(const std::string& job_id, int64_t generation) {
    auto token = RandomToken();
    // Without /dev/urandom the coordinator could not have created its own
    // token either; a fixed token here would open the store to anyone.
    if (!token.ok()) {
      std::random_device random;
      token = absl::StrCat(absl::Hex(random()), absl::Hex(random()),
                           absl::Hex(random()), absl::Hex(random()));
    }
    std::vector<RendezvousStore::Completion> done;
    {
      MutexLock lock(&mutex_);
      store_.OpenGeneration(job_id, generation, *token);
      done = store_.TakeCompletions();
      authenticated_peers_.clear();  // proven for the generation that ended
    }
    Deliver(std::move(done));
    return *token;
  }

  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* context,
                                const pb::StoreSetRequest* request,
                                pb::StoreSetReply* reply) override {
    absl::Status status;
    std::vector<RendezvousStore::Completion> done;
    {
      MutexLock lock(&mutex_);
      status = store_.Set(CallerOf(*context, request->scope()), request->key(),
                          request->value());
      done = store_.TakeCompletions();
    }
    Deliver(std::move(done));
    return Answer(context, status);
  }

  grpc::ServerUnaryReactor* Add(grpc::CallbackServerContext* context,
                                const pb::StoreAddRequest* request,
                                pb::StoreAddReply* reply) override {
    absl::StatusOr<int64_t> sum;
    std::vector<RendezvousStore::Completion> done;
    {
      MutexLock lock(&mutex_);
      sum = store_.Add(CallerOf(*context, request->scope()), request->key(),
                       request->delta());
      done = store_.TakeCompletions();
    }
    Deliver(std::move(done));
    if (sum.ok()) reply->set_value(*sum);
    return Answer(context, sum.status());
  }

  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context,
                                const pb::StoreGetRequest* request,
                                pb::StoreGetReply* reply) override;

  std::set<std::string> AuthenticatedPeers() {
    MutexLock lock(&mutex_);
    return authenticated_peers_;
  }

  bool IsCurrentToken(const std::string& token) {
    MutexLock lock(&mutex_);
    return store_.IsCurrentToken(token);
  }

 private:
  class Wait;

  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context,
                                   const absl::Status& status) {
    // Any answer but a refused credential means the caller holds this
    // generation's: its connection is proven (connection_limits.h).
    if (status.code() != absl::StatusCode::kUnauthenticated &&
        status.code() != absl::StatusCode::kPermissionDenied) {
      MutexLock lock(&mutex_);
      if (authenticated_peers_.size() < kMaxAuthenticatedPeers) {
        authenticated_peers_.insert(PeerFromGrpc(context->peer()));
      }
    }
    if (!status.ok()) {
      ComponentLogger("store")->debug("refused a call from {}: {}",
                                      context->peer(),
                                      std::string(status.message()));
    }
    auto* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpc(status));
    return reactor;
  }

  // Finishes the waits in `done`, outside the lock (gRPC may run reactions
  // inline).
  void Deliver(std::vector<RendezvousStore::Completion> done);
  void ExpireLoop();

  absl::Mutex mutex_;
  RendezvousStore store_ ABSL_GUARDED_BY(mutex_);
  static constexpr size_t kMaxAuthenticatedPeers = 1 << 20;
  std::set<std::string> authenticated_peers_ ABSL_GUARDED_BY(mutex_);
  std::map<RendezvousStore::WaiterId, Wait*> waits_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  // ExpireLoop sleeps until the store's next deadline, on the monotonic
  // clock (a clock step must neither hold nor hurry the waits' expiry);
  // a new wait (whose deadline may come first) or the end wakes it.
  MonotonicCondVar timer_wakeup_;
  uint64_t timer_wakeups_ ABSL_GUARDED_BY(mutex_) = 0;
  std::thread timer_;
};

// One Get that waits. Whoever removes it from waits_ finishes it; gRPC
// deletes nothing, so it deletes itself in OnDone.
class StoreService::Impl::Wait : public grpc::ServerUnaryReactor {
 public:
  Wait(Impl* owner, pb::StoreGetReply* reply) : owner_(owner), reply_(reply) {}

  void Complete(const RendezvousStore::Completion& done) {
    for (const auto& value : done.values) reply_->add_values(value);
    HandToGrpc(this);
    Finish(ToGrpc(done.status));
  }

  void OnCancel() override {
    TakeFromGrpc(this);
    bool mine = false;
    {
      MutexLock lock(&owner_->mutex_);
      auto found = owner_->waits_.find(id_);
      if (found != owner_->waits_.end() && found->second == this) {
        owner_->waits_.erase(found);
        owner_->store_.Cancel(id_);
        mine = true;
      }
    }
    HandToGrpc(this);
    if (mine) Finish(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    TakeFromGrpc(this);
    delete this;
  }

  RendezvousStore::WaiterId id_ = 0;

 private:
  Impl* const owner_;
  pb::StoreGetReply* const reply_;
};

grpc::ServerUnaryReactor* StoreService::Impl::Get(
    grpc::CallbackServerContext* context, const pb::StoreGetRequest* request,
    pb::StoreGetReply* reply) {
  auto* wait = new Wait(this, reply);
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(std::min(request->timeout_ms(), kMaxWaitMs));
  std::vector<std::string> keys(request->keys().begin(), request->keys().end());
  std::vector<RendezvousStore::Completion> done;
  absl::Status refused;
  {
    MutexLock lock(&mutex_);
    auto id = store_.Wait(CallerOf(*context, request->scope()), std::move(keys),
                          request->want_values(), deadline);
    if (id.ok()) {
      wait->id_ = *id;
      waits_[*id] = wait;
      ++timer_wakeups_;
    } else {
      refused = id.status();
    }
    done = store_.TakeCompletions();
  }
  HandToGrpc(wait);
  if (!refused.ok()) {
    wait->Finish(ToGrpc(refused));
  } else {
    timer_wakeup_.NotifyAll();  // a new deadline for the timer
  }
  Deliver(std::move(done));
  return wait;
}

void StoreService::Impl::Deliver(
    std::vector<RendezvousStore::Completion> done) {
  std::vector<std::pair<Wait*, RendezvousStore::Completion>> mine;
  {
    MutexLock lock(&mutex_);
    for (auto& completion : done) {
      auto found = waits_.find(completion.id);
      if (found == waits_.end()) continue;
      mine.emplace_back(found->second, std::move(completion));
      waits_.erase(found);
    }
  }
  for (auto& [wait, completion] : mine) wait->Complete(completion);
}

void StoreService::Impl::ExpireLoop() {
  NameThisThread("trl-store-timer");
  while (true) {
    std::vector<RendezvousStore::Completion> done;
    {
      MutexLock lock(&mutex_);
      const uint64_t seen = timer_wakeups_;
      auto woken = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
        return stopping_ || timer_wakeups_ != seen;
      };
      const auto next = store_.NextDeadline();
      if (next) {
        timer_wakeup_.WaitUntil(&mutex_, *next, woken);
      } else {
        timer_wakeup_.Wait(&mutex_, woken);
      }
      if (stopping_) return;
      // By the clock, not by why the wait ended: during a storm of Gets
      // (each one wakes this) a passed deadline is still expired.
      if (!next || std::chrono::steady_clock::now() < *next) continue;
      store_.Expire(std::chrono::steady_clock::now());
      done = store_.TakeCompletions();
    }
    if (!done.empty()) Deliver(std::move(done));
  }
}

StoreService::StoreService(StoreLimits limits)
    : impl_(std::make_unique<Impl>(limits)) {}
StoreService::~StoreService() = default;

std::string StoreService::OpenGeneration(const std::string& job_id,
                                         int64_t generation) {
  return impl_->OpenGeneration(job_id, generation);
}

grpc::Service* StoreService::service() { return impl_.get(); }

std::set<std::string> StoreService::AuthenticatedPeers() const {
  return impl_->AuthenticatedPeers();
}

bool StoreService::IsCurrentToken(const std::string& token) const {
  return impl_->IsCurrentToken(token);
}

}  // namespace trl

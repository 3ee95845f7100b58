#include "coordinator/rendezvous/store.h"

#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/auth_token.h"

namespace trl {

RendezvousStore::RendezvousStore(StoreLimits limits) : limits_(limits) {}

void RendezvousStore::OpenGeneration(const std::string& job_id,
                                     int64_t generation,
                                     const std::string& token) {
  for (const auto& [id, waiter] : waiters_) {
    completions_.push_back(Completion{
        id,
        absl::FailedPreconditionError(absl::StrCat(
            "generation ", current_ ? current_->generation : 0,
            " is over: the job moved on to generation ", generation)),
        {}});
  }
  waiters_.clear();
  waiting_on_.clear();
  values_.clear();
  total_bytes_ = 0;
  current_ = StoreCaller{job_id, generation, token};
}

absl::Status RendezvousStore::Admit(const StoreCaller& caller) const {
  if (!current_) {
    return absl::FailedPreconditionError("no generation has started yet");
  }
  if (caller.job_id != current_->job_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", caller.job_id, "' is not this coordinator's job '",
        current_->job_id, "'"));
  }
  if (caller.generation < current_->generation) {
    return absl::FailedPreconditionError(absl::StrCat(
        "generation ", caller.generation, " is over: the job is at generation ",
        current_->generation));
  }
  if (caller.generation > current_->generation) {
    return absl::FailedPreconditionError(
        absl::StrCat("generation ", caller.generation, " has not started: the ",
                     "job is at generation ", current_->generation));
  }
  if (!TokensEqual(current_->token, caller.token)) {
    return absl::UnauthenticatedError(
        "wrong store token (a worker's is in TRL_STORE_TOKEN)");
  }
  return absl::OkStatus();
}

absl::Status RendezvousStore::CheckKey(const std::string& key) const {
  if (key.empty()) return absl::InvalidArgumentError("empty store key");
  if (key.size() > limits_.max_key_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("store key of ", key.size(),
                                                   " bytes (at most ",
                                                   limits_.max_key_bytes, ")"));
  }
  return absl::OkStatus();
}

absl::Status RendezvousStore::Store(const std::string& key, std::string value) {
  if (value.size() > limits_.max_value_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("value of store key '", key, "' has ", value.size(),
                     " bytes (at most ", limits_.max_value_bytes, ")"));
  }
  auto found = values_.find(key);
  const size_t old_bytes =
      found == values_.end() ? 0 : key.size() + found->second.size();
  const size_t new_total = total_bytes_ - old_bytes + key.size() + value.size();
  if (new_total > limits_.max_total_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the store of this generation would hold ", new_total,
                     " bytes (at most ", limits_.max_total_bytes, ")"));
  }
  total_bytes_ = new_total;
  const bool is_new = found == values_.end();
  values_[key] = std::move(value);
  if (is_new) WakeWaitersOf(key);
  return absl::OkStatus();
}

bool RendezvousStore::IsCurrentToken(const std::string& token) const {
  return current_.has_value() && TokensEqual(current_->token, token);
}

absl::Status RendezvousStore::Set(const StoreCaller& caller,
                                  const std::string& key, std::string value) {
  if (absl::Status admitted = Admit(caller); !admitted.ok()) return admitted;
  if (absl::Status valid = CheckKey(key); !valid.ok()) return valid;
  return Store(key, std::move(value));
}

absl::StatusOr<int64_t> RendezvousStore::Add(const StoreCaller& caller,
                                             const std::string& key,
                                             int64_t delta) {
  if (absl::Status admitted = Admit(caller); !admitted.ok()) return admitted;
  if (absl::Status valid = CheckKey(key); !valid.ok()) return valid;
  int64_t value = 0;
  auto found = values_.find(key);
  if (found != values_.end() && !absl::SimpleAtoi(found->second, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("store key '", key, "' does not hold an integer"));
  }
  if ((delta > 0 && value > INT64_MAX - delta) ||
      (delta < 0 && value < INT64_MIN - delta)) {
    return absl::OutOfRangeError(
        absl::StrCat("adding ", delta, " to store key '", key, "' overflows"));
  }
  value += delta;
  if (absl::Status stored = Store(key, absl::StrCat(value)); !stored.ok()) {
    return stored;
  }
  return value;
}

absl::StatusOr<RendezvousStore::WaiterId> RendezvousStore::Wait(
    const StoreCaller& caller, std::vector<std::string> keys, bool want_values,
    TimePoint deadline) {
  if (absl::Status admitted = Admit(caller); !admitted.ok()) return admitted;
  if (keys.empty() || keys.size() > limits_.max_keys_per_wait) {
    return absl::InvalidArgumentError(
        absl::StrCat("a wait names ", keys.size(), " keys (1 to ",
                     limits_.max_keys_per_wait, ")"));
  }
  for (const auto& key : keys) {
    if (absl::Status valid = CheckKey(key); !valid.ok()) return valid;
  }
  if (waiters_.size() >= limits_.max_waiters) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many waits at once (at most ", limits_.max_waiters, ")"));
  }
  const WaiterId id = next_waiter_++;
  Waiter waiter{std::move(keys), want_values, deadline, 0};
  std::set<std::string> missing;
  for (const auto& key : waiter.keys) {
    if (values_.count(key) == 0) missing.insert(key);
  }
  waiter.missing = missing.size();
  for (const auto& key : missing) waiting_on_[key].push_back(id);
  waiters_.emplace(id, std::move(waiter));
  if (missing.empty()) Complete(id, absl::OkStatus());
  return id;
}

void RendezvousStore::WakeWaitersOf(const std::string& key) {
  auto found = waiting_on_.find(key);
  if (found == waiting_on_.end()) return;
  std::vector<WaiterId> ids = std::move(found->second);
  waiting_on_.erase(found);
  for (WaiterId id : ids) {
    auto waiter = waiters_.find(id);
    if (waiter == waiters_.end()) continue;  // ended already
    if (--waiter->second.missing == 0) Complete(id, absl::OkStatus());
  }
}

void RendezvousStore::Complete(WaiterId id, absl::Status status) {
  auto found = waiters_.find(id);
  if (found == waiters_.end()) return;
  Completion done{id, std::move(status), {}};
  if (done.status.ok() && found->second.want_values) {
    for (const auto& key : found->second.keys) {
      done.values.push_back(values_.at(key));
    }
  }
  waiters_.erase(found);
  completions_.push_back(std::move(done));
}

void RendezvousStore::Cancel(WaiterId id) { waiters_.erase(id); }

void RendezvousStore::Expire(TimePoint now) {
  std::vector<WaiterId> expired;
  for (const auto& [id, waiter] : waiters_) {
    if (waiter.deadline <= now) expired.push_back(id);
  }
  for (WaiterId id : expired) {
    std::string missing;
    for (const auto& key : waiters_.at(id).keys) {
      if (values_.count(key) == 0) {
        absl::StrAppend(&missing, missing.empty() ? "" : ", ", key);
      }
    }
    Complete(id, absl::DeadlineExceededError(absl::StrCat(
                     "store keys not set before the deadline: ", missing)));
  }
}

std::optional<TimePoint> RendezvousStore::NextDeadline() const {
  std::optional<TimePoint> next;
  for (const auto& [id, waiter] : waiters_) {
    if (!next || waiter.deadline < *next) next = waiter.deadline;
  }
  return next;
}

std::vector<RendezvousStore::Completion> RendezvousStore::TakeCompletions() {
  return std::exchange(completions_, {});
}

}  // namespace trl

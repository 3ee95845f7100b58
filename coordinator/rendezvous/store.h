// The workers' rendezvous store: a small key-value store (set, get, wait
// with a deadline, add) that the coordinator serves so that a CPU job's
// Gloo rendezvous needs no TCPStore of its own. One namespace per
// generation: opening generation g drops every key of g-1 and fails its
// waiters, and a caller must name the current job and generation and carry
// that generation's token, so a worker of an old generation can neither
// read nor write the new one's keys.
//
// Pure: no locks, no clock, no I/O. Waits do not block: a wait gets an id,
// and its result (values, or why it ended) is collected with
// TakeCompletions() after each call. The gRPC adapter serialises calls.
#ifndef TRL_COORDINATOR_RENDEZVOUS_STORE_H_
#define TRL_COORDINATOR_RENDEZVOUS_STORE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/job/state_machine.h"

namespace trl {

// Who is calling, as every request says it.
struct StoreCaller {
  std::string job_id;
  int64_t generation = 0;
  std::string token;
};

struct StoreLimits {
  size_t max_key_bytes = 512;
  size_t max_value_bytes = 1 << 20;
  size_t max_total_bytes = 256 << 20;  // keys and values of a generation
  size_t max_keys_per_wait = 4096;
  size_t max_waiters = 1 << 16;
};

class RendezvousStore {
 public:
  using WaiterId = uint64_t;
  struct Completion {
    WaiterId id = 0;
    absl::Status status;              // OK, DEADLINE_EXCEEDED, or stale
    std::vector<std::string> values;  // when OK and values were wanted
  };

  explicit RendezvousStore(StoreLimits limits = {});

  // Opens `generation`'s namespace with its token; the previous one's keys
  // are dropped and its waiters fail with FAILED_PRECONDITION.
  void OpenGeneration(const std::string& job_id, int64_t generation,
                      const std::string& token);

  // Whether `token` is the open generation's (no generation: false).
  bool IsCurrentToken(const std::string& token) const;

  absl::Status Set(const StoreCaller& caller, const std::string& key,
                   std::string value);
  // Adds `delta` to the key's integer value (absent: 0) and returns the sum.
  absl::StatusOr<int64_t> Add(const StoreCaller& caller, const std::string& key,
                              int64_t delta);
  // Waits until every key is set or `deadline` passes. The id is in a later
  // completion (at once when the keys are there already).
  absl::StatusOr<WaiterId> Wait(const StoreCaller& caller,
                                std::vector<std::string> keys, bool want_values,
                                TimePoint deadline);
  // The caller of a wait went away; no completion follows.
  void Cancel(WaiterId id);
  // Waits whose deadline is at or before `now` end with DEADLINE_EXCEEDED.
  void Expire(TimePoint now);
  std::optional<TimePoint> NextDeadline() const;

  std::vector<Completion> TakeCompletions();

  size_t key_count() const { return values_.size(); }
  size_t waiter_count() const { return waiters_.size(); }

 private:
  struct Waiter {
    std::vector<std::string> keys;
    bool want_values = false;
    TimePoint deadline;
    size_t missing = 0;  // distinct keys not set yet
  };

  absl::Status Admit(const StoreCaller& caller) const;
  absl::Status CheckKey(const std::string& key) const;
  absl::Status Store(const std::string& key, std::string value);
  // Counts `key` as set for the waiters on it; completes those that have
  // every key now.
  void WakeWaitersOf(const std::string& key);
  void Complete(WaiterId id, absl::Status status);

  const StoreLimits limits_;
  std::optional<StoreCaller> current_;  // job, generation and token
  std::map<std::string, std::string> values_;
  size_t total_bytes_ = 0;
  std::map<WaiterId, Waiter> waiters_;
  // Key -> the waits that still miss it (ids of ended waits are skipped).
  std::map<std::string, std::vector<WaiterId>> waiting_on_;
  WaiterId next_waiter_ = 1;
  std::vector<Completion> completions_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_RENDEZVOUS_STORE_H_

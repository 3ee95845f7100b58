// A condition variable for absl::Mutex whose timed waits follow the
// monotonic clock.
//
// absl::Mutex::AwaitWithTimeout and absl::CondVar::WaitWithTimeout (absl
// 20220623, Debian 12's) turn the timeout into a wall-clock deadline and
// sleep on FUTEX_CLOCK_REALTIME: a clock stepped back by X holds the wait
// X longer, one stepped forward ends it early (a loop that waits becomes a
// spin). std::condition_variable_any waits on the steady clock
// (pthread_cond_clockwait, CLOCK_MONOTONIC), and takes any lock: here the
// absl::Mutex the caller holds, so the state it guards keeps
// ABSL_GUARDED_BY and the compiler's check.
//
// Unlike Mutex::Await, nothing re-evaluates the predicate when the mutex
// is released: whoever changes what a waiter's predicate reads calls
// NotifyAll() (under the mutex or after it).
#ifndef TRL_COMMON_MONOTONIC_COND_VAR_H_
#define TRL_COMMON_MONOTONIC_COND_VAR_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_handoff.h"

namespace trl {

class MonotonicCondVar {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // Gives `mutex` up until `predicate()` holds (seen after a NotifyAll) or
  // `deadline` passed; returns whether it holds. `mutex` is held again
  // on return and whenever `predicate` runs.
  template <typename Predicate>
  bool WaitUntil(absl::Mutex* mutex, Deadline deadline,
                 const Predicate& predicate)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    HeldMutex held{mutex};
    return condition_.wait_until(held, deadline, Checked(predicate));
  }

  template <typename Predicate>
  bool WaitFor(absl::Mutex* mutex, std::chrono::nanoseconds timeout,
               const Predicate& predicate)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    // A year at most: now() + a huge timeout would overflow.
    const std::chrono::nanoseconds longest = std::chrono::hours(24 * 365);
    return WaitUntil(
        mutex, std::chrono::steady_clock::now() + std::min(timeout, longest),
        predicate);
  }

  template <typename Predicate>
  void Wait(absl::Mutex* mutex, const Predicate& predicate)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    HeldMutex held{mutex};
    condition_.wait(held, Checked(predicate));
  }

  void NotifyAll() { condition_.notify_all(); }

 private:
  // The lock condition_variable_any gives up and takes back. The edges are
  // those of trl::MutexLock (common/tsan_visible_mutex.h): TSan does not
  // see through Debian's absl::Mutex.
  struct HeldMutex {
    absl::Mutex* mutex;
    void lock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      mutex->Lock();
      TakeFromGrpc(mutex);
    }
    void unlock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      HandToGrpc(mutex);
      mutex->Unlock();
    }
  };

  // The predicate runs with the mutex held, which the analysis cannot
  // follow through the standard library.
  template <typename Predicate>
  static auto Checked(const Predicate& predicate) {
    return [&predicate]()
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return predicate(); };
  }

  std::condition_variable_any condition_;
};

}  // namespace trl

#endif  // TRL_COMMON_MONOTONIC_COND_VAR_H_

// absl::Mutex is the lock whose use the compiler checks (ABSL_GUARDED_BY,
// clang's -Wthread-safety). Debian's libabsl is not built with
// ThreadSanitizer, so TSan cannot see what one thread's unlock hands to
// the next thread's lock, and would report every guarded member as a
// race. These take the place of absl::MutexLock and Mutex::Await: the
// same locking, plus the edges TSan needs (on the mutex's address: release
// before it is given up, acquire once it is held again). They cost nothing
// in a build without TSan.
#ifndef TRL_COMMON_TSAN_VISIBLE_MUTEX_H_
#define TRL_COMMON_TSAN_VISIBLE_MUTEX_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_handoff.h"

namespace trl {

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(absl::Mutex* mutex) ABSL_EXCLUSIVE_LOCK_FUNCTION(mutex)
      : mutex_(mutex) {
    mutex_->Lock();
    TakeFromGrpc(mutex_);
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {
    HandToGrpc(mutex_);
    mutex_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  absl::Mutex* const mutex_;
};

// Mutex::Await: gives `mutex` up until `predicate()` holds. absl evaluates
// `predicate` with `mutex` held, but inside Await (or in the thread that
// unlocks), and gives the mutex up there when it is false: so the edges
// are drawn around each evaluation too. There is no timed form here on
// purpose: absl's timed waits follow the wall clock; a timed wait is
// MonotonicCondVar's (common/monotonic_cond_var.h).
template <typename Predicate>
void Await(absl::Mutex* mutex, const Predicate& predicate)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
  auto seen = [mutex, &predicate]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    TakeFromGrpc(mutex);
    const bool holds = predicate();
    HandToGrpc(mutex);  // false: absl gives the mutex up after this
    return holds;
  };
  HandToGrpc(mutex);
  mutex->Await(absl::Condition(&seen));
  TakeFromGrpc(mutex);
}

}  // namespace trl

#endif  // TRL_COMMON_TSAN_VISIBLE_MUTEX_H_

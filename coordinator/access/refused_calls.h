// Calls refused for want of authentication, counted and reported at a
// bounded rate: the first one is logged at once, later ones as one line
// per interval that says how many there were. A flood of 20,000 bad calls
// costs a few log lines, not 20,000.
//
// Thread-safe.
#ifndef TRL_COORDINATOR_ACCESS_REFUSED_CALLS_H_
#define TRL_COORDINATOR_ACCESS_REFUSED_CALLS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace trl {

class RefusedCalls {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RefusedCalls(
      std::chrono::milliseconds interval = std::chrono::seconds(10))
      : interval_(interval) {}

  // Counts a refusal; returns the line to log now, if any.
  std::optional<std::string> Refused(const std::string& peer,
                                     const std::string& problem,
                                     Clock::time_point now);
  uint64_t total() const;
  // Refusals counted by every RefusedCalls of this process (each port and
  // authenticator has its own; the job's status shows their sum).
  static uint64_t InProcess();

 private:
  const std::chrono::milliseconds interval_;
  mutable absl::Mutex mutex_;
  uint64_t total_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t unreported_ ABSL_GUARDED_BY(mutex_) = 0;
  std::optional<Clock::time_point> last_report_ ABSL_GUARDED_BY(mutex_);
};

// Logs through the coordinator's logger.
class RefusedCallLog {
 public:
  void Log(const std::string& peer, const std::string& problem);
  uint64_t total() const { return calls_.total(); }

 private:
  RefusedCalls calls_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_ACCESS_REFUSED_CALLS_H_

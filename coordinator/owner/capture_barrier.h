// A stop in two phases (a failure in a job of several machines): every
// machine is first asked to keep where its workers stand
// (StopGeneration.capture_only), and the stop itself, its signals, is held
// here until every machine asked has said it has (StacksCaptured), has
// gone, or the wait is over. Without it, the machine that found a hang (or
// whose rank failed) signals its ranks while another machine's are still
// being read, and those, blocked on them in a collective, wake first: the
// diagnosis then says they were running.
//
// Pure: the owner (owner/core.h) feeds it and sends what it releases. Not
// thread-safe: the owner serialises calls.
#ifndef TRL_COORDINATOR_OWNER_CAPTURE_BARRIER_H_
#define TRL_COORDINATOR_OWNER_CAPTURE_BARRIER_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>

#include "coordinator/job/records.h"
#include "proto/trl_launch.pb.h"

namespace trl {

// How long a stop waits for the machines' captures at most: an agent's
// capture limit (HangOptions::capture_limit, 10 s) and 1 s for the words.
inline constexpr std::chrono::milliseconds kCaptureWait{11000};

class CaptureBarrier {
 public:
  using Message = trl::launch::v1::CoordinatorMessage;

  // Holds `stop` (of `generation`) until each of `machines` has captured,
  // or `deadline`. A stop held already is released first (returned).
  std::optional<Message> Hold(int64_t generation, std::set<int> machines,
                              Message stop, TimePoint deadline);
  // Machine `m` has captured its workers of `generation`: the stop, if it
  // was the last one awaited.
  std::optional<Message> Captured(int m, int64_t generation);
  // Machine `m` is gone (its stream ended, it was declared lost): it is
  // awaited no more.
  std::optional<Message> Gone(int m);
  // The stop, once its deadline has passed.
  std::optional<Message> Due(TimePoint now);
  // The stop, now, whatever is awaited (another stop order follows, or
  // the job ends).
  std::optional<Message> Release();

  bool holding() const { return stop_.has_value(); }
  // When the stop is due at the latest; none when nothing is held.
  std::optional<TimePoint> deadline() const;
  const std::set<int>& awaited() const { return awaited_; }

 private:
  std::optional<Message> ReleaseIfNoneAwaited();

  int64_t generation_ = -1;
  std::set<int> awaited_;
  std::optional<Message> stop_;
  TimePoint deadline_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_CAPTURE_BARRIER_H_

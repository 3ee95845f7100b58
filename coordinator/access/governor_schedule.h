// When the connection governor (connection_limits.h) looks at the sockets.
// A look walks every TCP socket of the network namespace (in the kernel),
// so it looks only when there is reason to: the namespace accepted a
// connection since the last look (TcpPassiveOpens), or the last look
// found a port over a cap, or it cut something (a flood refills what was
// cut). Otherwise the connections on its ports can only have closed, and
// it looks only every `idle_interval`, in case the counter missed a way
// in. Pure: the caller passes the time and the counter.
#ifndef TRL_COORDINATOR_ACCESS_GOVERNOR_SCHEDULE_H_
#define TRL_COORDINATOR_ACCESS_GOVERNOR_SCHEDULE_H_

#include <chrono>
#include <cstdint>
#include <optional>

namespace trl {

class GovernorSchedule {
 public:
  using Clock = std::chrono::steady_clock;

  explicit GovernorSchedule(std::chrono::milliseconds idle_interval)
      : idle_interval_(idle_interval) {}

  // Whether to look at `now`, with the accept counter read just before
  // (nullopt: it could not be read, so look).
  bool Due(Clock::time_point now, std::optional<uint64_t> passive_opens) const;

  // A look happened at `now`, with `passive_opens` read before it; it
  // found a port over a cap (whatever it cut) or not.
  void Looked(Clock::time_point now, std::optional<uint64_t> passive_opens,
              bool over_a_cap);

 private:
  const std::chrono::milliseconds idle_interval_;
  bool looked_ = false;
  Clock::time_point last_look_;
  std::optional<uint64_t> passive_opens_;
  bool over_a_cap_ = false;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_ACCESS_GOVERNOR_SCHEDULE_H_

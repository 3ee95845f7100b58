// Fencing a frozen agent: the agent's word to its guardian
// (agent/cleanup/job_guardian.h) of how long its workers may run, in a page of
// memory the two processes share. The agent moves the deadline on each time it
// hears from the coordinator (its lease, the lease's grace and the workers'
// kill grace); the guardian, a process of its own that a SIGSTOP of the agent
// does not stop, kills the agent's workers once the deadline has passed.
// Deadlines are on CLOCK_BOOTTIME, which goes on counting while the machine is
// suspended: a thawed guardian sees at once that its time is up.
//
// Lock-free: one 64-bit atomic, written by the agent, read by the guardian.
#ifndef TRL_AGENT_CLEANUP_FENCE_PAGE_H_
#define TRL_AGENT_CLEANUP_FENCE_PAGE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

namespace trl {

class FencePage {
 public:
  // A page shared with the processes forked after this call; null if the
  // kernel refused the mapping. Never unmapped (it lives as long as the
  // process).
  static FencePage* Create();

  // Until `deadline` (the steady clock, read now against the boot clock)
  // the workers may run; nullopt: no limit (there are no workers).
  void Publish(std::optional<std::chrono::steady_clock::time_point> deadline);

  // The deadline on CLOCK_BOOTTIME, in nanoseconds; nullopt when disarmed.
  std::optional<int64_t> DeadlineNs() const;

  // CLOCK_BOOTTIME now, in nanoseconds.
  static int64_t BootNowNs();

 private:
  FencePage() = default;
  std::atomic<int64_t> deadline_ns_{0};  // 0: disarmed
  // The last steady deadline published: the clocks are read only when it
  // moves. Touched by the agent only (under its core's lock).
  std::chrono::steady_clock::time_point published_{};
  bool armed_ = false;

  static_assert(std::atomic<int64_t>::is_always_lock_free,
                "shared between processes, the atomic must hold no lock");
};

}  // namespace trl

#endif  // TRL_AGENT_CLEANUP_FENCE_PAGE_H_

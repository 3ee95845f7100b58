// Fencing a frozen agent: the agent's word to its guardian
// (agent/cleanup/job_guardian.h) of how long its workers may run, in a page of
// memory the two processes share. The agent moves the deadline on each time it
// hears from the coordinator (its lease, the lease's grace and the workers'
// kill grace); the guardian, a process of its own that a SIGSTOP of the agent
// does not stop, kills the agent's workers once the deadline has passed.
// Deadlines are on CLOCK_BOOTTIME, which goes on counting while the machine is
// suspended: a thawed guardian sees at once that its time is up.
//
// It also carries the agent's last word (common/heartbeat_datagram.h: "agent
// gone"), which the guardian sends for it once the agent has died and every
// worker it started has ended, and a count of the agent's worker starts, so
// that the guardian knows whether the processes it noted are all of them.
//
// Lock-free for the guardian: 64-bit atomics, and a sequence count around
// the last word; the agent's threads take a lock (only they write).
#ifndef TRL_AGENT_CLEANUP_FENCE_PAGE_H_
#define TRL_AGENT_CLEANUP_FENCE_PAGE_H_

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

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

  // The last word and where it goes: replaces the one before (each of the
  // agent's streams has a session of its own). False if it does not fit.
  bool LeaveLastWord(const sockaddr* to, socklen_t to_length,
                     std::string_view datagram);
  struct LastWord {
    sockaddr_storage to{};
    socklen_t to_length = 0;
    std::string datagram;
  };
  // No last word: the agent ends in order (it has said goodbye itself).
  void ForgetLastWord();
  // The last word left, if one was and none was being written.
  std::optional<LastWord> ReadLastWord() const;

  // The agent is about to start workers, and has started them: between
  // the two, processes may exist that the guardian has not noted.
  void WorkersStarting();
  void WorkersStarted();
  // How many starts have begun and ended; equal when none is under way.
  struct Starts {
    uint64_t begun = 0;
    uint64_t ended = 0;
    bool operator==(const Starts& other) const {
      return begun == other.begun && ended == other.ended;
    }
    bool operator!=(const Starts& other) const { return !(*this == other); }
    bool Settled() const { return begun == ended; }
  };
  Starts WorkerStarts() const;

 private:
  FencePage() = default;
  std::atomic<int64_t> deadline_ns_{0};  // 0: disarmed
  // The last steady deadline published: the clocks are read only when it
  // moves. Touched by the agent only (under its core's lock).
  std::chrono::steady_clock::time_point published_{};
  bool armed_ = false;

  static constexpr size_t kLastWordBytes = 64;
  // Odd while the agent writes the last word; 0: none left.
  std::atomic<uint32_t> last_word_sequence_{0};
  sockaddr_storage last_word_to_{};
  socklen_t last_word_to_length_ = 0;
  char last_word_[kLastWordBytes] = {};
  std::mutex last_word_writer_;  // the agent's threads only

  std::atomic<uint64_t> starts_begun_{0};
  std::atomic<uint64_t> starts_ended_{0};

  static_assert(std::atomic<int64_t>::is_always_lock_free,
                "shared between processes, the atomic must hold no lock");
};

}  // namespace trl

#endif  // TRL_AGENT_CLEANUP_FENCE_PAGE_H_

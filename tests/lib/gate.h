// A gate a test holds the coordinator's owner thread at (from a callback
// that runs on the owner, such as OnRegistered) until the test opens it,
// so that the owner's queue fills behind it. Hold waits `at_most` for the
// gate to open, so that a failing test still ends. Thread-safe.
#ifndef TRL_TESTS_LIB_GATE_H_
#define TRL_TESTS_LIB_GATE_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace trl {

class Gate {
 public:
  explicit Gate(std::chrono::seconds at_most = std::chrono::seconds(30))
      : at_most_(at_most) {}

  // On the held thread: says it is held, and waits until opened.
  void Hold() {
    std::unique_lock<std::mutex> lock(mutex_);
    held_ = true;
    changed_.notify_all();
    changed_.wait_for(lock, at_most_, [this] { return open_; });
  }
  bool HeldWithin(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, wait, [this] { return held_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  const std::chrono::seconds at_most_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool held_ = false;
  bool open_ = false;
};

}  // namespace trl

#endif  // TRL_TESTS_LIB_GATE_H_

// An AgentLink in memory, for tests of the coordinator's owner and core
// without sockets: it keeps what the coordinator told one agent (each
// message, when it came by the test's clock, whether the stream was closed
// and how often its reading was resumed) and lets a test on another thread
// wait for it. Thread-safe: the owner thread sends while the test reads.
#ifndef TRL_TESTS_LIB_FAKE_AGENT_LINK_H_
#define TRL_TESTS_LIB_FAKE_AGENT_LINK_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/owner/agent_link.h"
#include "proto/trl_launch.pb.h"

namespace trl {

class FakeAgentLink : public AgentLink {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Message = trl::launch::v1::CoordinatorMessage;

  FakeAgentLink() = default;
  // Each message is stamped with `clock()` as it is sent (the test's clock,
  // as the coordinator under test sees it).
  explicit FakeAgentLink(std::function<TimePoint()> clock)
      : clock_(std::move(clock)) {}

  void Send(const Message& message) override {
    std::lock_guard<std::mutex> lock(mutex_);
    sent_.push_back(message);
    if (clock_) sent_at_.push_back(clock_());
    changed_.notify_all();
  }
  void Close() override {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    changed_.notify_all();
  }
  std::string Peer() const override { return "test"; }
  void ResumeReading() override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++resumes_;
    changed_.notify_all();
  }

  // The last registration reply (empty if none came).
  trl::launch::v1::RegistrationReply reply() const {
    return Last([](const Message& m) { return m.has_registration_reply(); })
        .registration_reply();
  }
  // Whether a stop order that signals came (not only the first half of a
  // two-phase stop, which asks for a capture).
  bool stopped() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return SignallingStopsLocked() > 0;
  }
  // The stop orders received, in order.
  std::vector<trl::launch::v1::StopGeneration> stops() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<trl::launch::v1::StopGeneration> out;
    for (const auto& m : sent_) {
      if (m.has_stop()) out.push_back(m.stop());
    }
    return out;
  }
  // The job's final state and exit code, once told ("" and -1 before).
  std::string finished() const {
    const Message last =
        Last([](const Message& m) { return m.has_finished(); });
    return last.has_finished() ? last.finished().state() : "";
  }
  int exit_code() const {
    const Message last =
        Last([](const Message& m) { return m.has_finished(); });
    return last.has_finished() ? last.finished().exit_code() : -1;
  }
  bool closed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return closed_;
  }
  int resumes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return resumes_;
  }
  int acks() const { return Count(&Message::has_heartbeat_ack); }
  int role_changes() const { return Count(&Message::has_role_change); }
  // The assignments received, and their generations.
  std::vector<trl::launch::v1::Assignment> assignments() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<trl::launch::v1::Assignment> out;
    for (const auto& m : sent_) {
      if (m.has_assignment()) out.push_back(m.assignment());
    }
    return out;
  }
  std::vector<int64_t> generations() const {
    std::vector<int64_t> out;
    for (const auto& a : assignments()) out.push_back(a.generation());
    return out;
  }
  // When each heartbeat acknowledgement came, in milliseconds after
  // `start` by the clock given to the constructor.
  std::vector<int> AckTimesMs(TimePoint start) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<int> out;
    for (size_t i = 0; i < sent_.size() && i < sent_at_.size(); ++i) {
      if (!sent_[i].has_heartbeat_ack()) continue;
      out.push_back(static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(sent_at_[i] -
                                                                start)
              .count()));
    }
    return out;
  }

  // Wait (on the real clock) until a heartbeat was acknowledged, until a
  // stop order or an assignment came (and return those that did), or until
  // reading was resumed `resumes` times or `stop` was set.
  bool AckedWithin(std::chrono::milliseconds wait) const {
    return WaitUntil(
        [this] { return CountLocked(&Message::has_heartbeat_ack) > 0; }, wait);
  }
  bool StoppedWithin(std::chrono::milliseconds wait) const {
    return WaitUntil([this] { return SignallingStopsLocked() > 0; }, wait);
  }
  std::vector<trl::launch::v1::Assignment> AssignmentsWithin(
      std::chrono::milliseconds wait) const {
    WaitUntil([this] { return CountLocked(&Message::has_assignment) > 0; },
              wait);
    return assignments();
  }
  bool ResumedWithin(int resumes, const std::atomic<bool>& stop,
                     std::chrono::milliseconds wait) const {
    // `stop` is set by another thread that does not notify: look again
    // every 10 ms.
    const auto give_up = std::chrono::steady_clock::now() + wait;
    std::unique_lock<std::mutex> lock(mutex_);
    while (resumes_ < resumes && !stop &&
           std::chrono::steady_clock::now() < give_up) {
      changed_.wait_for(lock, std::chrono::milliseconds(10));
    }
    return resumes_ >= resumes;
  }

 private:
  int SignallingStopsLocked() const {
    int n = 0;
    for (const auto& m : sent_) {
      n += m.has_stop() && !m.stop().capture_only() ? 1 : 0;
    }
    return n;
  }
  int Count(bool (Message::*has)() const) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return CountLocked(has);
  }
  int CountLocked(bool (Message::*has)() const) const {
    int n = 0;
    for (const auto& m : sent_) n += (m.*has)() ? 1 : 0;
    return n;
  }
  Message Last(const std::function<bool(const Message&)>& which) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = sent_.rbegin(); it != sent_.rend(); ++it) {
      if (which(*it)) return *it;
    }
    return Message();
  }
  bool WaitUntil(const std::function<bool()>& done,
                 std::chrono::milliseconds wait) const {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, wait, done);
  }

  const std::function<TimePoint()> clock_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::vector<Message> sent_;
  std::vector<TimePoint> sent_at_;
  bool closed_ = false;
  int resumes_ = 0;
};

}  // namespace trl

#endif  // TRL_TESTS_LIB_FAKE_AGENT_LINK_H_

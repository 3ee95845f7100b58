#include "agent/cleanup/fence_page.h"

#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace trl {

static_assert(sizeof(FencePage) <= 4096, "the fence is one page");

FencePage* FencePage::Create() {
  void* page = mmap(nullptr, sizeof(FencePage), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return nullptr;
  return new (page) FencePage();
}

int64_t FencePage::BootNowNs() {
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

void FencePage::Publish(
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (!deadline) {
    if (armed_) deadline_ns_.store(0, std::memory_order_release);
    armed_ = false;
    return;
  }
  if (armed_ && *deadline == published_) return;
  // The boot clock first: a pause between the two reads then moves the
  // deadline earlier, never later.
  const int64_t boot_now = BootNowNs();
  const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
      *deadline - std::chrono::steady_clock::now());
  // Never 0, which means disarmed.
  const int64_t at = std::max<int64_t>(boot_now + left.count(), 1);
  deadline_ns_.store(at, std::memory_order_release);
  published_ = *deadline;
  armed_ = true;
}

std::optional<int64_t> FencePage::DeadlineNs() const {
  const int64_t at = deadline_ns_.load(std::memory_order_acquire);
  if (at == 0) return std::nullopt;
  return at;
}

bool FencePage::LeaveLastWord(const sockaddr* to, socklen_t to_length,
                              std::string_view datagram) {
  if (datagram.size() != kLastWordBytes || to_length <= 0 ||
      static_cast<size_t>(to_length) > sizeof(last_word_to_)) {
    return false;
  }
  std::lock_guard<std::mutex> lock(last_word_writer_);
  const uint32_t sequence = last_word_sequence_.load(std::memory_order_relaxed);
  last_word_sequence_.store(sequence + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  std::memcpy(&last_word_to_, to, static_cast<size_t>(to_length));
  last_word_to_length_ = to_length;
  std::memcpy(last_word_, datagram.data(), kLastWordBytes);
  last_word_sequence_.store(sequence + 2, std::memory_order_release);
  return true;
}

void FencePage::ForgetLastWord() {
  std::lock_guard<std::mutex> lock(last_word_writer_);
  last_word_sequence_.store(0, std::memory_order_release);
}

std::optional<FencePage::LastWord> FencePage::ReadLastWord() const {
  const uint32_t before = last_word_sequence_.load(std::memory_order_acquire);
  if (before == 0 || before % 2 != 0) return std::nullopt;
  LastWord word;
  std::memcpy(&word.to, &last_word_to_, sizeof(word.to));
  word.to_length = last_word_to_length_;
  word.datagram.assign(last_word_, kLastWordBytes);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (last_word_sequence_.load(std::memory_order_relaxed) != before ||
      word.to_length <= 0 ||
      static_cast<size_t>(word.to_length) > sizeof(word.to)) {
    return std::nullopt;
  }
  return word;
}

void FencePage::WorkersStarting() {
  starts_begun_.fetch_add(1, std::memory_order_acq_rel);
}

void FencePage::WorkersStarted() {
  starts_ended_.store(starts_begun_.load(std::memory_order_acquire),
                      std::memory_order_release);
}

FencePage::Starts FencePage::WorkerStarts() const {
  Starts starts;
  starts.ended = starts_ended_.load(std::memory_order_acquire);
  starts.begun = starts_begun_.load(std::memory_order_acquire);
  return starts;
}

}  // namespace trl

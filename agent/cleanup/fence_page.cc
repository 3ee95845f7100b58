#include "agent/cleanup/fence_page.h"

#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <new>

namespace trl {

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

}  // namespace trl

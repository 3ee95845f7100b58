// Runs one timed wait that nothing ends early and prints how long it took.
// MonotonicWaitTest runs it under the wall-clock shim
// (tests/lib/clock_shift.c) to show that a clock step does not change it.
//   trl-monotonic-wait-probe monotonic|absl WAIT_MS
// prints "wall_shift_s=S waited_ms=W": S is how far this process's wall
// clock is from the kernel's (the shim's offset, so the test knows the
// shim is in place), W the wait on the monotonic clock. "monotonic" is
// MonotonicCondVar (what the coordinator uses); "absl" is absl's own timed
// wait, for the contrast.
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/monotonic_cond_var.h"
#include "common/tsan_visible_mutex.h"

namespace {

double WallSeconds(bool through_libc) {
  timespec now{};
  if (through_libc) {
    clock_gettime(CLOCK_REALTIME, &now);
  } else {
    syscall(SYS_clock_gettime, CLOCK_REALTIME, &now);
  }
  return static_cast<double>(now.tv_sec) + now.tv_nsec / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "monotonic") != 0 &&
                    std::strcmp(argv[1], "absl") != 0)) {
    std::fprintf(stderr, "usage: %s monotonic|absl WAIT_MS\n", argv[0]);
    return 2;
  }
  const bool monotonic = std::strcmp(argv[1], "monotonic") == 0;
  const auto wait = std::chrono::milliseconds(std::atoi(argv[2]));
  const double shift = WallSeconds(true) - WallSeconds(false);

  absl::Mutex mutex;
  trl::MonotonicCondVar condition;
  bool never = false;  // nothing sets it: only the timeout ends the wait
  const auto started = std::chrono::steady_clock::now();
  {
    trl::MutexLock lock(&mutex);
    if (monotonic) {
      condition.WaitFor(&mutex, wait, [&never] { return never; });
    } else {
      mutex.AwaitWithTimeout(absl::Condition(&never), absl::FromChrono(wait));
    }
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  std::printf("wall_shift_s=%.0f waited_ms=%lld\n", shift,
              static_cast<long long>(waited.count()));
  return 0;
}

// The coordinator's timed waits (the owner's next event or tick, the
// store's expiry, the governor's interval) follow the monotonic clock:
// a wall clock an hour off, as after a step by NTP or an operator, neither
// holds nor hurries them. A probe runs the wait in a process whose wall
// clock the shim (tests/lib/clock_shift.c) shifts; absl's own timed wait
// in the same probe shows what the shim does to a wall-clock wait.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "tests/integration/subprocess.h"

namespace trl {
namespace {

using std::chrono::milliseconds;
using trl::testing::Subprocess;

constexpr int kWaitMs = 300;

struct ProbeRun {
  bool finished = false;  // within the test's 3 s
  double wall_shift_s = 0;
  long waited_ms = -1;
};

ProbeRun RunProbe(const std::string& kind, int shift_s) {
  const std::string shift_file = ::testing::TempDir() + "/clock-shift-" + kind +
                                 "-" + std::to_string(shift_s);
  std::ofstream(shift_file) << shift_s << "\n";
  Subprocess probe(
      {TRL_MONOTONIC_WAIT_PROBE_BIN, kind, std::to_string(kWaitMs)},
      {std::string("LD_PRELOAD=") + TRL_CLOCK_SHIFT_LIB,
       "TRL_CLOCK_SHIFT_FILE=" + shift_file});
  ProbeRun run;
  const std::optional<int> exit_code = probe.Wait(milliseconds(3000));
  if (!exit_code.has_value()) return run;  // still waiting: killed
  EXPECT_EQ(*exit_code, 0) << probe.Output();
  run.finished = true;
  EXPECT_EQ(
      std::sscanf(probe.Stdout().c_str(), "wall_shift_s=%lf waited_ms=%ld",
                  &run.wall_shift_s, &run.waited_ms),
      2)
      << probe.Output();
  return run;
}

// The shim is in place (its offset seen by the probe): the test could
// not pass by running the probe on the true clock.
void ExpectShifted(const ProbeRun& run, int shift_s) {
  EXPECT_NEAR(run.wall_shift_s, shift_s, 5) << "the clock shim is not in place";
}

TEST(MonotonicWaitTest, AWaitTakesItsTimeWithTheWallClockAnHourAhead) {
  const ProbeRun run = RunProbe("monotonic", 3600);
  ASSERT_TRUE(run.finished) << "a 300 ms wait did not end within 3 s";
  ExpectShifted(run, 3600);
  EXPECT_GE(run.waited_ms, kWaitMs);
  EXPECT_LT(run.waited_ms, 2000);
}

TEST(MonotonicWaitTest, AWaitTakesItsTimeWithTheWallClockAnHourBehind) {
  const ProbeRun run = RunProbe("monotonic", -3600);
  ASSERT_TRUE(run.finished) << "a 300 ms wait did not end within 3 s";
  ExpectShifted(run, -3600);
  EXPECT_GE(run.waited_ms, kWaitMs) << "the wait ended early";
  EXPECT_LT(run.waited_ms, 2000);
}

// Why MonotonicCondVar exists: absl's timed wait (20220623) sleeps until a
// wall-clock deadline. This also shows that the shim moves a wait's
// deadline, so the two tests above would see a wall-clock wait.
TEST(MonotonicWaitTest, AbslsTimedWaitFollowsTheWallClock) {
  const ProbeRun behind = RunProbe("absl", -3600);
  ASSERT_TRUE(behind.finished);
  ExpectShifted(behind, -3600);
  EXPECT_LT(behind.waited_ms, kWaitMs / 2) << "absl's wait took its time";
  const ProbeRun ahead = RunProbe("absl", 3600);
  EXPECT_FALSE(ahead.finished)
      << "absl's 300 ms wait ended in " << ahead.waited_ms << " ms";
}

}  // namespace
}  // namespace trl

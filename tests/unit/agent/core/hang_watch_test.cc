// The hang detectors on a made-up clock: none needs the script's help, none
// fires on a worker that prints or computes, and each names itself.
#include "agent/core/hang_watch.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

using std::chrono::milliseconds;
using Time = HangWatch::Time;

Time At(int64_t ms) { return Time() + milliseconds(ms); }

HangSettings Settings(int64_t output_ms, int64_t cpu_ms, int64_t file_ms = 0) {
  HangSettings settings;
  settings.output_timeout = milliseconds(output_ms);
  settings.cpu_timeout = milliseconds(cpu_ms);
  settings.heartbeat_timeout = milliseconds(file_ms);
  return settings;
}

WorkerSample Printed(uint64_t bytes, double cpu = 0) {
  WorkerSample sample;
  sample.output_bytes = bytes;
  sample.cpu_seconds = cpu;
  return sample;
}

TEST(HangWatchTest, AMachineWhoseRanksAllFallSilentIsHungAndEachIsNamed) {
  HangWatch watch(Settings(10000, 0), {0, 1}, At(0));
  // Rank 1 prints until 4 s: the machine is not silent before 14 s.
  for (int64_t t = 1000; t <= 4000; t += 1000) {
    watch.Sample(0, Printed(5), At(t));
    watch.Sample(1, Printed(static_cast<uint64_t>(t)), At(t));
    EXPECT_FALSE(watch.Check(At(t)).has_value());
  }
  EXPECT_FALSE(watch.Check(At(13999)).has_value());
  const std::optional<Hang> hang = watch.Check(At(14000));
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->detector, "output");
  EXPECT_EQ(hang->local_ranks, (std::vector<int>{0, 1}));
  EXPECT_NE(hang->reason.find("no output from any rank of this machine for "
                              "10.0 s (--hang_output_timeout 10)"),
            std::string::npos)
      << hang->reason;
  // Said once.
  EXPECT_FALSE(watch.Check(At(20000)).has_value());
}

TEST(HangWatchTest, AWorkerIdleForTheTimeoutIsHungAndOnlyIt) {
  HangWatch watch(Settings(0, 5000), {0, 1}, At(0));
  for (int64_t t = 0; t <= 6000; t += 500) {
    // Rank 0 computes (half a core); rank 1 sleeps.
    watch.Sample(0, Printed(0, t / 2000.0), At(t));
    watch.Sample(1, Printed(0, 0.3), At(t));
    if (t < 5000) EXPECT_FALSE(watch.Check(At(t)).has_value()) << t;
  }
  const std::optional<Hang> hang = watch.Check(At(6000));
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->detector, "cpu");
  EXPECT_EQ(hang->local_ranks, (std::vector<int>{1}));
  EXPECT_NE(hang->reason.find("less than 1% of a core"), std::string::npos)
      << hang->reason;
}

TEST(HangWatchTest, AWorkerThatUsesMoreThanTheIdleShareIsNotHung) {
  // 2 % of a core, steadily (a thread that wakes now and then, a slow
  // loop): not idle. 0.5 %: idle.
  HangWatch busy(Settings(0, 10000), {0}, At(0));
  HangWatch idle(Settings(0, 10000), {0}, At(0));
  for (int64_t t = 0; t <= 30000; t += 1000) {
    busy.Sample(0, Printed(0, t * 0.02 / 1000), At(t));
    idle.Sample(0, Printed(0, t * 0.005 / 1000), At(t));
  }
  EXPECT_FALSE(busy.Check(At(30000)).has_value());
  EXPECT_TRUE(idle.Check(At(30000)).has_value());
}

TEST(HangWatchTest, AWorkerThatPrintsIsNotIdle) {
  // A tick printed every second costs next to no CPU: alive all the same.
  HangWatch watch(Settings(0, 5000), {0}, At(0));
  for (int64_t t = 0; t <= 20000; t += 1000) {
    watch.Sample(0, Printed(static_cast<uint64_t>(t), 0.001), At(t));
  }
  EXPECT_FALSE(watch.Check(At(20000)).has_value());
  watch.Sample(0, Printed(20000, 0.001), At(25000));
  EXPECT_TRUE(watch.Check(At(25000)).has_value());
}

TEST(HangWatchTest, AFallingCpuTotalRestartsTheWindow) {
  // A busy child dies and its own children go to the subreaper: the
  // tree's total falls by what they had used. That is no idleness: the
  // window starts again (it once had to burn the lost seconds first).
  HangWatch watch(Settings(0, 5000), {0}, At(0));
  watch.Sample(0, Printed(0, 100.0), At(1000));
  watch.Sample(0, Printed(0, 40.0), At(2000));  // fell
  watch.Sample(0, Printed(0, 40.5), At(3000));  // busy again
  watch.Sample(0, Printed(0, 41.0), At(6500));
  EXPECT_FALSE(watch.Check(At(6500)).has_value());
}

TEST(HangWatchTest, TheIdleWindowStartsAtTheFirstReading) {
  // A worker whose CPU time cannot be read yet (just started) is not
  // idle for the time before.
  HangWatch watch(Settings(0, 5000), {0}, At(0));
  watch.Sample(0, WorkerSample(), At(4000));
  watch.Sample(0, Printed(0, 1.0), At(6000));
  EXPECT_FALSE(watch.Check(At(10000)).has_value());
  watch.Sample(0, Printed(0, 1.0), At(11000));
  EXPECT_TRUE(watch.Check(At(11000)).has_value());
}

TEST(HangWatchTest, AnExitedWorkerIsNotHungNorKeepsTheMachineAlive) {
  HangWatch watch(Settings(5000, 5000), {0, 1}, At(0));
  watch.Sample(0, Printed(1, 0), At(1000));
  watch.Exited(1);
  watch.Sample(0, Printed(1, 0), At(2000));
  const std::optional<Hang> hang = watch.Check(At(7000));
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->local_ranks, (std::vector<int>{0}));
  HangWatch gone(Settings(5000, 5000), {0}, At(0));
  gone.Exited(0);
  EXPECT_FALSE(gone.Check(At(60000)).has_value());
}

TEST(HangWatchTest, TheHeartbeatFileCountsTouchesWhateverTheirTime) {
  HangWatch watch(Settings(0, 0, 3000), {0}, At(0));
  WorkerSample touched;
  touched.heartbeat_mtime_ns = 1000;  // far in the past: a touch all the same
  watch.Sample(0, touched, At(2000));
  EXPECT_FALSE(watch.Check(At(4000)).has_value());
  watch.Sample(0, touched, At(4500));  // the same mtime: no touch
  const std::optional<Hang> hang = watch.Check(At(5001));
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->detector, "heartbeat_file");
  EXPECT_NE(hang->reason.find("no heartbeat in TRL_HEARTBEAT_FILE"),
            std::string::npos);
}

TEST(HangWatchTest, ZeroTurnsADetectorOffAndTheSamplingFollowsTheShortest) {
  HangWatch off(Settings(0, 0, 0), {0}, At(0));
  EXPECT_FALSE(off.Check(At(86400000)).has_value());
  EXPECT_FALSE(Settings(0, 0, 0).any());
  EXPECT_EQ(Settings(900000, 600000).SamplePeriod(), milliseconds(5000));
  EXPECT_EQ(Settings(0, 2000).SamplePeriod(), milliseconds(200));
  EXPECT_EQ(Settings(500, 0).SamplePeriod(), milliseconds(100));
}

}  // namespace
}  // namespace trl

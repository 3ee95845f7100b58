// Naming stop signals, and telling a signal Slurm sent to a whole job step
// (the workers have it already) from one sent to this process alone.
#include "common/stop_signals.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace trl {
namespace {

TEST(StopSignalsTest, NamesSignalsTheWayKillDoes) {
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(SignalName(1000), "signal 1000");
}

TEST(StopSignalsTest, OnlySlurmsStepDaemonSignalsTheWholeStep) {
  EXPECT_TRUE(SenderSignalsWholeSlurmStep("slurmstepd"));
  // scancel asks slurmctld, which asks slurmstepd: the sender is never
  // scancel itself. Anyone else signalled this process alone.
  for (const char* sender : {"", "scancel", "slurmd", "bash", "kill",
                             "slurmstepd2", "Slurmstepd", "slurmstep"}) {
    EXPECT_FALSE(SenderSignalsWholeSlurmStep(sender)) << sender;
  }
}

TEST(StopSignalsTest, NoStopSignalIsPendingInAFreshProcess) {
  EXPECT_EQ(PendingStopSignal(), 0);
}

}  // namespace
}  // namespace trl

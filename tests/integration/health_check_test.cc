// Node health (issue 33) with real processes: the operator's check
// (--health_check) bounded in time with nothing of it left running, the
// disk check, and a machine that fails its check given no ranks until it
// passes, with the real daemons on loopback.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/cleanup/orphans.h"
#include "agent/health/node_health.h"
#include "common/network.h"
#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

// Whether `pid` is gone (or a zombie no one has reaped yet: it runs no
// more).
bool Ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)),
                   std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  return text.empty() || (close != std::string::npos &&
                          close + 2 < text.size() && text[close + 2] == 'Z');
}

pid_t ReadPid(const std::string& path) {
  std::ifstream in(path);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

class HealthCheckTest : public LauncherTest {
 protected:
  void SetUp() override {
    LauncherTest::SetUp();
    dir_ = ::testing::TempDir() + "/trl-health-" + std::to_string(port_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    LauncherTest::TearDown();
  }
  std::string dir_;
};

TEST_F(HealthCheckTest, AFailingCheckNamesItsExitAndItsLastLine) {
  EXPECT_EQ(RunHealthCommand("echo checking; echo 'GPU 3 is missing' >&2; "
                             "exit 3",
                             seconds(10)),
            "--health_check exited 3: GPU 3 is missing");
  EXPECT_EQ(RunHealthCommand("exit 0", seconds(10)), "");
  EXPECT_EQ(RunHealthCommand("kill -9 $$", seconds(10)),
            "--health_check was killed by signal 9");
}

TEST_F(HealthCheckTest, ACheckThatHangsIsKilledAtItsBoundWithWhatItStarted) {
  const std::string pid_file = dir_ + "/child.pid";
  const auto start = std::chrono::steady_clock::now();
  const std::string problem = RunHealthCommand(
      "sleep 600 & echo $! > " + pid_file + "; echo probing nvidia-smi; wait",
      seconds(2));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(problem,
            "--health_check did not finish within 2 s (killed): probing "
            "nvidia-smi");
  EXPECT_LT(took, seconds(5));
  const pid_t child = ReadPid(pid_file);
  ASSERT_GT(child, 0);
  EXPECT_TRUE(WaitUntil([child] { return Ended(child); }, seconds(5)))
      << "the check's child " << child << " outlived it";
}

TEST_F(HealthCheckTest, ACheckThatLeavesAChildBehindEndsWhenItExits) {
  // Its child holds the output pipe open: the check still ends when it
  // exits, healthy, and the child is killed.
  const std::string pid_file = dir_ + "/child.pid";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(RunHealthCommand("sleep 600 & echo $! > " + pid_file + "; exit 0",
                             seconds(20)),
            "");
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(5));
  const pid_t child = ReadPid(pid_file);
  ASSERT_GT(child, 0);
  EXPECT_TRUE(WaitUntil([child] { return Ended(child); }, seconds(5)));
}

TEST_F(HealthCheckTest, AHealthCheckRunningAtAGenerationsEndIsNotSwept) {
  // The agent kills and reaps its children in other process groups when a
  // generation ends (agent/cleanup/orphans.h); the check, in a group of its
  // own, is not one of them: swept, it would read as a failed check.
  std::string problem = "not run";
  std::thread check(
      [&] { problem = RunHealthCommand("sleep 1; exit 0", seconds(10)); });
  std::this_thread::sleep_for(milliseconds(300));
  KillOrphansOfGeneration("trl-no-such-job", 0);
  check.join();
  EXPECT_EQ(problem, "");
}

TEST_F(HealthCheckTest, ADirectoryWithoutTheSpaceAskedForIsUnhealthy) {
  HealthCheckOptions options;
  options.directories = {dir_ + "/logs/not-made-yet"};
  options.min_free_bytes = uint64_t{1} << 60;  // an exbibyte
  const std::string problem = CheckNodeHealth(options);
  EXPECT_EQ(problem.rfind("disk: " + dir_ + "/logs/not-made-yet has ", 0), 0u)
      << problem;
  EXPECT_NE(problem.find(" MiB free, less than --min_free_disk_mb "
                         "1099511627776"),
            std::string::npos)
      << problem;
  options.min_free_bytes = 1;
  EXPECT_EQ(CheckNodeHealth(options), "");
}

TEST_F(HealthCheckTest, AnUnhealthyMachineGetsNoRanksUntilItsCheckPasses) {
  const std::string sick = dir_ + "/sick";
  std::ofstream(sick) << "x";
  auto coord = StartCoordinator(
      1, 1, {"/bin/sh", "-c", "echo ran gen $TRL_GENERATION pid $$"},
      {"--health_check",
       "test ! -e " + sick + " || { echo GPU 3 is missing; exit 1; }",
       "--health_check_interval", "0.2"});
  // Cordoned by the coordinator, and said so.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return coord->Stderr().find(
                   "[coord] host " + LocalHostName() +
                   " is cordoned (health check failed: --health_check exited "
                   "1: GPU 3 is missing): it gets no ranks until its health "
                   "checks pass") != std::string::npos;
      },
      seconds(20)))
      << coord->Output();
  // A second of periodic checks starts nothing.
  std::this_thread::sleep_for(seconds(1));
  EXPECT_EQ(coord->Stdout().find("ran gen"), std::string::npos)
      << coord->Output();
  // The operator mends the machine: the next check passes and the job runs.
  std::filesystem::remove(sick);
  ASSERT_EQ(coord->Wait(seconds(20)), 0) << coord->Output();
  EXPECT_NE(coord->Stdout().find("ran gen 0"), std::string::npos)
      << coord->Output();
  EXPECT_NE(coord->Stderr().find("passes its health checks again"),
            std::string::npos)
      << coord->Stderr();
}

TEST_F(HealthCheckTest, AFullLogDiskMakesTheMachineUnhealthyAndTheJobWaits) {
  // The log directory on a 4 MiB tmpfs of the coordinator's own mount
  // namespace, filled up: machine 0 is unhealthy and nothing starts; once
  // the file is removed (from inside that namespace), the job runs and
  // succeeds: it is not lost.
  Subprocess can_mount({"/usr/bin/unshare", "--mount", "/bin/true"});
  if (can_mount.Wait(seconds(10)) != 0) {
    GTEST_SKIP() << "no mount namespace here (root with CAP_SYS_ADMIN is "
                    "needed): "
                 << can_mount.Output();
  }
  const std::string disk = dir_ + "/disk";
  std::filesystem::create_directories(disk);
  const std::string flags =
      "--num_machines 1 --num_processes 1 --main_process_ip 127.0.0.1 "
      "--main_process_port " +
      std::to_string(port_) + " --use_cpu --log_dir " + disk +
      "/logs --min_free_disk_mb 1 --health_check_interval 0.2";
  Subprocess coord({"/usr/bin/unshare", "--mount", "--propagation", "private",
                    "/bin/sh", "-c",
                    "mount -t tmpfs -o size=4m tmpfs " + disk +
                        " && dd if=/dev/zero of=" + disk +
                        "/fill bs=1M count=8 2>/dev/null; exec " +
                        TRL_COORD_BIN + " start " + flags +
                        " /bin/sh -c 'echo ran gen $TRL_GENERATION pid $$'"});
  ASSERT_TRUE(WaitUntil(
      [&] {
        return coord.Stderr().find(
                   " is cordoned (health check failed: disk: " + disk +
                   "/logs has 0 MiB free, less than "
                   "--min_free_disk_mb 1)") != std::string::npos;
      },
      seconds(20)))
      << coord.Output();
  std::this_thread::sleep_for(seconds(1));
  EXPECT_EQ(coord.Stdout().find("ran gen"), std::string::npos)
      << coord.Output();
  // Space again, seen from inside the coordinator's mount namespace.
  Subprocess mend({"/usr/bin/nsenter", "-t", std::to_string(coord.pid()), "-m",
                   "rm", disk + "/fill"});
  ASSERT_EQ(mend.Wait(seconds(10)), 0) << mend.Output();
  ASSERT_EQ(coord.Wait(seconds(20)), 0) << coord.Output();
  EXPECT_NE(coord.Stdout().find("ran gen 0"), std::string::npos)
      << coord.Output();
  EXPECT_NE(coord.Stderr().find("passes its health checks again"),
            std::string::npos)
      << coord.Stderr();
}

}  // namespace
}  // namespace trl::testing

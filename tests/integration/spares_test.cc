// Hot spares and cordons with the real daemons on loopback: a spare takes
// the ranks of a machine whose agent was killed with SIGKILL and the job
// finishes; a cordoned host is cleared by `trl-coord uncordon`.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "tests/integration/launcher_fixture.h"
#include "tests/integration/subprocess.h"

namespace trl::testing {
namespace {

class SparesTest : public LauncherTest {
 protected:
  std::string Ps() const {
    Subprocess ps({TRL_COORD_BIN, "ps", "--address",
                   "127.0.0.1:" + std::to_string(port_)});
    ps.Wait(seconds(10));
    return ps.Stdout();
  }

  // The pids a worker printed as "pid N".
  void RememberPids(const std::string& output) {
    static const std::regex pid_pattern(" pid ([0-9]+)");
    for (std::sregex_iterator it(output.begin(), output.end(), pid_pattern),
         end;
         it != end; ++it) {
      worker_pids_.insert(std::stoi((*it)[1]));
    }
  }
};

TEST_F(SparesTest, ASpareTakesTheRanksOfAMachineWhoseAgentWasKilled) {
  const std::vector<std::string> flags = {
      "--heartbeat_interval", "0.2", "--max_restarts", "1",
      "--stop_grace",         "1",   "--no_python"};
  // Generation 0 runs until it is stopped; generation 1 says where it runs
  // and ends.
  const std::vector<std::string> worker = {
      "/bin/sh", "-c",
      "echo start gen $TRL_GENERATION rank $RANK machine $TRL_MACHINE_RANK "
      "pid $$; if [ \"$TRL_GENERATION\" = 0 ]; then exec sleep 60; fi"};
  auto doomed = StartAgent(2, 2, 1, flags);
  auto spare = StartSpare(2, 2, flags);
  auto coord = StartCoordinator(2, 2, worker, flags);
  ASSERT_TRUE(doomed->WaitForOutput("start gen 0 rank 1", seconds(20)))
      << doomed->Output() << coord->Output();
  ASSERT_TRUE(
      WaitUntil([&] { return Ps().find("spares: 1 (") != std::string::npos; },
                seconds(10)))
      << Ps() << coord->Output();
  RememberPids(doomed->Stdout());

  doomed->Signal(SIGKILL);  // the machine is gone, not cut off
  doomed->Wait(seconds(10));
  ASSERT_TRUE(coord->WaitForOutput("takes the place of machine 1", seconds(20)))
      << coord->Output();
  // Machine 1's ranks run on the spare in the next generation, with its
  // machine rank; the job ends well.
  ASSERT_TRUE(spare->WaitForOutput("start gen 1 rank 1 machine 1", seconds(30)))
      << spare->Output() << coord->Output();
  RememberPids(spare->Stdout());
  RememberPids(coord->Stdout());
  EXPECT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  EXPECT_EQ(spare->Wait(seconds(30)), 0) << spare->Output();
  EXPECT_NE(spare->Stderr().find("this spare stands for machine 1 now"),
            std::string::npos)
      << spare->Stderr();
  EXPECT_EQ(coord->Stdout().find("start gen 1 rank 1"), std::string::npos)
      << "machine 0 ran machine 1's rank:\n"
      << coord->Stdout();
}

TEST_F(SparesTest, ARestartedCoordinatorKeepsTheSpareInTheMachinesPlace) {
  // The spare took machine 1's place; the coordinator is killed and
  // started again. The stand-in registers as the spare that stood for
  // machine 1 and is machine 1 again: the job resumes and ends there.
  const std::string state_file =
      ::testing::TempDir() + "/trl-spare-" + std::to_string(port_) + ".state";
  const std::vector<std::string> flags = {
      "--heartbeat_interval", "0.2", "--max_restarts", "3",
      "--stop_grace",         "1",   "--no_python"};
  std::vector<std::string> coord_flags = flags;
  coord_flags.push_back("--state_file");
  coord_flags.push_back(state_file);
  const std::vector<std::string> worker = {
      "/bin/sh", "-c",
      "echo start gen $TRL_GENERATION rank $RANK machine $TRL_MACHINE_RANK "
      "pid $$; if [ \"$TRL_GENERATION\" -lt 2 ]; then exec sleep 60; fi"};
  auto doomed = StartAgent(2, 2, 1, flags);
  auto spare = StartSpare(2, 2, flags);
  auto coord = StartCoordinator(2, 2, worker, coord_flags);
  ASSERT_TRUE(doomed->WaitForOutput("start gen 0 rank 1", seconds(20)))
      << doomed->Output() << coord->Output();
  RememberPids(doomed->Stdout());
  doomed->Signal(SIGKILL);
  doomed->Wait(seconds(10));
  ASSERT_TRUE(spare->WaitForOutput("start gen 1 rank 1 machine 1", seconds(30)))
      << spare->Output() << coord->Output();
  RememberPids(spare->Stdout());
  RememberPids(coord->Stdout());
  coord->Signal(SIGKILL);
  ASSERT_EQ(coord->Wait(seconds(10)), 128 + SIGKILL);

  auto again = StartCoordinator(2, 2, worker, coord_flags);
  ASSERT_TRUE(spare->WaitForOutput("start gen 2 rank 1 machine 1", seconds(30)))
      << spare->Output() << again->Output();
  RememberPids(again->Stdout());
  EXPECT_EQ(again->Wait(seconds(30)), 0) << again->Output();
  EXPECT_EQ(spare->Wait(seconds(30)), 0) << spare->Output();
  EXPECT_NE(again->Stderr().find("machine 1 registered"), std::string::npos)
      << again->Stderr();
  std::filesystem::remove(state_file + ".events");
}

TEST_F(SparesTest, ASpareSentSigtermLeavesAndTheJobGoesOn) {
  const std::vector<std::string> flags = {"--heartbeat_interval", "0.2"};
  auto spare = StartSpare(1, 1, flags);
  auto coord = StartCoordinator(1, 1, Worker({"--sleep", "30"}), flags);
  ASSERT_TRUE(
      WaitUntil([&] { return Ps().find("spares: 1 (") != std::string::npos; },
                seconds(20)))
      << Ps() << coord->Output();
  spare->Signal(SIGTERM);
  EXPECT_EQ(spare->Wait(seconds(10)), 128 + SIGTERM) << spare->Output();
  EXPECT_TRUE(WaitUntil(
      [&] {
        const std::string ps = Ps();
        return ps.find("JOB ") != std::string::npos &&
               ps.find("spares:") == std::string::npos;
      },
      seconds(10)))
      << Ps();
  EXPECT_NE(Ps().find("state running"), std::string::npos) << Ps();
  RememberWorkerPids(coord->Stdout());
  coord->Signal(SIGTERM);
  EXPECT_EQ(coord->Wait(seconds(30)), 128 + SIGTERM) << coord->Output();
}

TEST_F(SparesTest, ASpareRefusesAMachineRankAndTheCoordinatorRefusesSpare) {
  Subprocess both({TRL_AGENT_BIN, "--spare", "--machine_rank", "1",
                   "--num_machines", "2", "--num_processes", "2",
                   "--main_process_ip", "127.0.0.1", "--main_process_port",
                   std::to_string(port_), "--use_cpu"});
  EXPECT_EQ(both.Wait(seconds(10)), 2) << both.Output();
  EXPECT_NE(both.Stderr().find("--spare and --machine_rank 1"),
            std::string::npos)
      << both.Stderr();
  auto coord = StartCoordinator(1, 1, Worker(), {"--spare"});
  EXPECT_EQ(coord->Wait(seconds(10)), 2) << coord->Output();
  EXPECT_NE(coord->Stderr().find("--spare is for trl-agent"), std::string::npos)
      << coord->Stderr();
}

TEST_F(SparesTest, ACordonedHostIsShownAndClearedByUncordon) {
  // Every agent here is on this host: one failure cordons it. With no
  // spare and no smaller shape, the job runs there anyway (and says so);
  // `trl-coord uncordon` clears the cordon.
  const std::vector<std::string> flags = {
      "--heartbeat_interval", "0.2", "--max_restarts", "2",
      "--cordon_after",       "1",   "--no_python"};
  const std::vector<std::string> worker = {
      "/bin/sh", "-c",
      "echo start gen $TRL_GENERATION pid $$; "
      "if [ \"$TRL_GENERATION\" = 0 ]; then exit 3; fi; exec sleep 60"};
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  auto coord = StartCoordinator(1, 1, worker, flags);
  ASSERT_TRUE(coord->WaitForOutput("start gen 1 ", seconds(20)))
      << coord->Output();
  RememberPids(coord->Stdout());
  const std::string cordoned = std::string("cordoned: ") + host + " (";
  EXPECT_NE(Ps().find(cordoned), std::string::npos) << Ps();
  EXPECT_NE(coord->Stderr().find(std::string("host ") + host +
                                 " is cordoned (1 failures within 600 s"),
            std::string::npos)
      << coord->Stderr();
  EXPECT_NE(coord->Stderr().find("runs on cordoned host"), std::string::npos)
      << coord->Stderr();

  Subprocess wrong({TRL_COORD_BIN, "uncordon", "no-such-host", "--address",
                    "127.0.0.1:" + std::to_string(port_)});
  EXPECT_EQ(wrong.Wait(seconds(10)), 1) << wrong.Output();
  EXPECT_NE(wrong.Stderr().find(std::string("cordoned: ") + host),
            std::string::npos)
      << wrong.Stderr();
  Subprocess clear({TRL_COORD_BIN, "uncordon", host, "--address",
                    "127.0.0.1:" + std::to_string(port_)});
  EXPECT_EQ(clear.Wait(seconds(10)), 0) << clear.Output();
  EXPECT_EQ(Ps().find(cordoned), std::string::npos) << Ps();
  EXPECT_NE(coord->Stderr().find("is uncordoned"), std::string::npos);
  coord->Signal(SIGTERM);
  EXPECT_EQ(coord->Wait(seconds(30)), 128 + SIGTERM) << coord->Output();
}

}  // namespace
}  // namespace trl::testing

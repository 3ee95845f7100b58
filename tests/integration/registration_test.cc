// Registration is checked: a duplicate machine_rank and a config that
// differs are refused on both sides, and the job goes on without them.
#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

TEST_F(LauncherTest, DuplicateMachineRankIsRefused) {
  auto coord = StartCoordinator(3, 3, Worker());
  auto first = StartAgent(3, 3, 1);
  ASSERT_TRUE(coord->WaitForOutput("machine 1 registered", seconds(20)))
      << coord->Output();
  auto duplicate = StartAgent(3, 3, 1);
  ASSERT_EQ(duplicate->Wait(seconds(20)), 2) << duplicate->Output();
  EXPECT_NE(duplicate->Stderr().find(
                "refused this agent: machine_rank 1 is already registered"),
            std::string::npos)
      << duplicate->Output();
  EXPECT_TRUE(coord->WaitForOutput("refused the agent", seconds(5)))
      << coord->Output();

  // The job still runs once the real machine 2 arrives.
  auto last = StartAgent(3, 3, 2);
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  ASSERT_EQ(first->Wait(seconds(30)), 0) << first->Output();
  ASSERT_EQ(last->Wait(seconds(30)), 0) << last->Output();
  RememberWorkerPids(coord->Stdout() + first->Stdout() + last->Stdout());
  EXPECT_EQ(worker_pids_.size(), 3u);
}

TEST_F(LauncherTest, DifferentConfigIsRefusedNamingTheDifference) {
  auto coord = StartCoordinator(2, 4, Worker());
  // The agent thinks the job has 6 processes and bf16.
  std::vector<std::string> argv = {TRL_AGENT_BIN,
                                   "--machine_rank",
                                   "1",
                                   "--num_machines",
                                   "2",
                                   "--num_processes",
                                   "6",
                                   "--mixed_precision",
                                   "bf16",
                                   "--main_process_ip",
                                   "127.0.0.1",
                                   "--main_process_port",
                                   std::to_string(port_),
                                   "--use_cpu"};
  Subprocess agent(argv);
  ASSERT_EQ(agent.Wait(seconds(20)), 2) << agent.Output();
  const std::string why = agent.Stderr();
  EXPECT_NE(
      why.find("num_processes is 6 on the agent but 4 on the coordinator"),
      std::string::npos)
      << why;
  EXPECT_NE(why.find("mixed_precision is bf16 on the agent but no on the "
                     "coordinator"),
            std::string::npos)
      << why;
  EXPECT_TRUE(coord->WaitForOutput("num_processes is 6", seconds(5)))
      << coord->Output();
  coord->Signal(SIGTERM);
  EXPECT_EQ(coord->Wait(seconds(20)), 128 + SIGTERM) << coord->Output();
}

TEST_F(LauncherTest, OutOfRangeMachineRankIsRefusedBeforeConnecting) {
  // machine_rank >= num_machines is a config error on the agent itself.
  auto agent = StartAgent(2, 4, 2);
  ASSERT_EQ(agent->Wait(seconds(20)), 2);
  EXPECT_NE(agent->Stderr().find("machine_rank 2 must be in 0..num_machines-1"),
            std::string::npos)
      << agent->Output();
}

}  // namespace
}  // namespace trl::testing

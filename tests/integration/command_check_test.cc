// Each machine's interpreter and working directory are its own: before any
// rank starts, every agent checks that the command runs on its machine
// (a script missing there fails the launch with exit 2, naming the machine
// and the path, nothing started anywhere), and an agent's own --python runs
// its machine's workers.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

namespace fs = std::filesystem;

class CommandCheckTest : public LauncherTest {
 protected:
  void SetUp() override {
    LauncherTest::SetUp();
    char dir_template[] = "/tmp/trl-command-check-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    root_ = dir_template;
    fs::create_directories(root_ + "/with_script");
    fs::create_directories(root_ + "/without_script");
    // Run by `--python /bin/sh`: sh -u job.py.
    std::ofstream(root_ + "/with_script/job.py")
        << "echo \"ran rank $RANK with $0\"\n";
  }
  void TearDown() override {
    fs::remove_all(root_);
    LauncherTest::TearDown();
  }

  // `argv` run in `dir` (its working directory).
  static std::vector<std::string> In(const std::string& dir,
                                     std::vector<std::string> argv) {
    std::vector<std::string> wrapped = {"/bin/sh", "-c",
                                        "cd \"$0\" && exec \"$@\"", dir};
    wrapped.insert(wrapped.end(), argv.begin(), argv.end());
    return wrapped;
  }
  std::vector<std::string> Coordinator(const std::string& dir) const {
    std::vector<std::string> argv = {TRL_COORD_BIN, "start"};
    for (auto& flag : ClusterFlags(2, 2)) argv.push_back(flag);
    for (auto flag : {"--python", "/bin/sh", "--max_restarts", "2", "job.py"}) {
      argv.push_back(flag);
    }
    return In(dir, argv);
  }
  std::vector<std::string> Agent(const std::string& dir,
                                 std::vector<std::string> extra = {}) const {
    std::vector<std::string> argv = {TRL_AGENT_BIN, "--machine_rank", "1"};
    for (auto& flag : ClusterFlags(2, 2)) argv.push_back(flag);
    argv.insert(argv.end(), extra.begin(), extra.end());
    return In(dir, argv);
  }

  std::string root_;
};

TEST_F(CommandCheckTest,
       AScriptMissingOnOneMachineFailsTheLaunchWithNothingStarted) {
  Subprocess coord(Coordinator(root_ + "/with_script"));
  Subprocess agent(Agent(root_ + "/without_script"));
  EXPECT_EQ(coord.Wait(seconds(30)), 2) << coord.Output() << agent.Output();
  EXPECT_EQ(agent.Wait(seconds(30)), 2) << agent.Output();
  const std::string said = coord.Output();
  EXPECT_NE(said.find("machine 1 (host "), std::string::npos) << said;
  EXPECT_NE(said.find("the script job.py is not a file in the agent's "
                      "working directory " +
                      root_ + "/without_script"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("nothing was started"), std::string::npos) << said;
  // Not on machine 0 either, where the script is.
  EXPECT_EQ(said.find("ran rank"), std::string::npos) << said;
  EXPECT_EQ(agent.Output().find("ran rank"), std::string::npos);
}

TEST_F(CommandCheckTest, AnAgentsOwnPythonRunsItsMachinesWorkers) {
  const std::string own = root_ + "/own-python";
  std::ofstream(own) << "#!/bin/sh\necho \"own interpreter for rank $RANK\"\n"
                        "exec /bin/sh \"$@\"\n";
  chmod(own.c_str(), 0755);
  Subprocess coord(Coordinator(root_ + "/with_script"));
  Subprocess agent(Agent(root_ + "/with_script", {"--python", own}));
  EXPECT_EQ(coord.Wait(seconds(30)), 0) << coord.Output() << agent.Output();
  EXPECT_EQ(agent.Wait(seconds(30)), 0) << agent.Output();
  EXPECT_NE(agent.Stdout().find("own interpreter for rank 1"),
            std::string::npos)
      << agent.Output();
  EXPECT_NE(agent.Stdout().find("ran rank 1"), std::string::npos)
      << agent.Output();
  // Machine 0 keeps the coordinator's (/bin/sh).
  EXPECT_NE(coord.Stdout().find("ran rank 0"), std::string::npos)
      << coord.Output();
  EXPECT_EQ(coord.Stdout().find("own interpreter"), std::string::npos)
      << coord.Output();
}

}  // namespace
}  // namespace trl::testing

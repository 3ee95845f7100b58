// Workers under a user of their own (--worker_user): they run, train
// through the store, and cannot read the token or the daemons' /proc
// files. The daemons run as root here, as a systemd unit or slurmd would.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

class WorkerUserTest : public LauncherTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "switching users needs root";
    if (getpwnam("nobody") == nullptr) GTEST_SKIP() << "no user nobody";
    LauncherTest::SetUp();
  }
};

TEST_F(WorkerUserTest, WorkersRunAsTheirUserAndCannotReachTheDaemons) {
  // A place the worker user may write its checkpoints.
  std::string output = "/tmp/trl-worker-user-XXXXXX";
  ASSERT_NE(mkdtemp(output.data()), nullptr);
  chmod(output.c_str(), 0777);
  const std::string worker =
      "echo \"uid $(id -u) rank $RANK\"; "
      "if cat \"$HOME/.trl/token\" >/dev/null 2>&1; then echo token READABLE; "
      "else echo token unreadable; fi; "
      "if cat /proc/$PPID/environ >/dev/null 2>&1; then echo environ READABLE; "
      "else echo environ unreadable; fi; "
      "exec " TRL_DEMO_TRAIN_BIN " --max_steps 3 --output_dir " +
      output;
  const std::vector<std::string> flags = {"--worker_user", "nobody",
                                          "--no_python"};
  auto agent = StartAgent(2, 2, 1, flags);
  auto coord = StartCoordinator(2, 2, {"/bin/sh", "-c", worker}, flags);
  ASSERT_EQ(coord->Wait(seconds(60)), 0) << coord->Output() << agent->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
  const std::string out = coord->Output() + agent->Output();
  const std::string uid = std::to_string(getpwnam("nobody")->pw_uid);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(out.find("uid " + uid + " rank " + std::to_string(rank)),
              std::string::npos)
        << out;
  }
  EXPECT_EQ(out.find("READABLE"), std::string::npos) << out;
  EXPECT_NE(out.find("token unreadable"), std::string::npos) << out;
  EXPECT_NE(out.find("step 3/3 loss"), std::string::npos) << out;
  std::filesystem::remove_all(output);
}

TEST_F(WorkerUserTest, RootOrAnUnknownUserIsRefusedBeforeAnythingStarts) {
  for (const std::string& user :
       {std::string("root"), std::string("no-such-user-trl")}) {
    auto coord = StartCoordinator(1, 1, {"/bin/true"},
                                  {"--worker_user", user, "--no_python"});
    EXPECT_EQ(coord->Wait(seconds(10)), 2) << coord->Output();
    EXPECT_NE(coord->Stderr().find("--worker_user " + user), std::string::npos)
        << coord->Output();
    auto agent = StartAgent(1, 1, 0, {"--worker_user", user});
    EXPECT_EQ(agent->Wait(seconds(10)), 2) << agent->Output();
  }
}

TEST_F(WorkerUserTest, ALogDirOthersMayWriteIsRefused) {
  // Root writes rank logs there: a worker could plant links in it.
  std::string log_dir = "/tmp/trl-worker-user-log-XXXXXX";
  ASSERT_NE(mkdtemp(log_dir.data()), nullptr);
  chmod(log_dir.c_str(), 0777);
  auto coord = StartCoordinator(
      1, 1, {"/bin/true"},
      {"--worker_user", "nobody", "--log_dir", log_dir, "--no_python"});
  EXPECT_EQ(coord->Wait(seconds(10)), 2) << coord->Output();
  EXPECT_NE(coord->Stderr().find("--log_dir " + log_dir), std::string::npos)
      << coord->Output();
  auto agent =
      StartAgent(1, 1, 0, {"--worker_user", "nobody", "--log_dir", log_dir});
  EXPECT_EQ(agent->Wait(seconds(10)), 2) << agent->Output();
  std::filesystem::remove_all(log_dir);
}

}  // namespace
}  // namespace trl::testing

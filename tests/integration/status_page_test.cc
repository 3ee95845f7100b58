// The coordinator's status page and /metrics on a real job: what they show
// is what `trl-coord ps --json` shows (checked with Prometheus' own parser
// and a real browser), and they are served on loopback only.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "tests/integration/job_status_probe.h"
#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

const std::string kScripts =
    std::string(TRL_SOURCE_DIR) + "/tests/integration/status/";

class StatusPageTest : public LauncherTest {
 protected:
  void SetUp() override {
    LauncherTest::SetUp();
    status_port_ = FreePort();
  }

  // Two machines of two workers each: the coordinator with machine 0, and
  // machine 1's trl-agent.
  void StartJob(const std::vector<std::string>& command,
                std::vector<std::string> flags = {}) {
    flags.insert(flags.end(), {"--status_port", std::to_string(status_port_)});
    coord_ = StartCoordinator(2, 4, command, flags);
    agent_ = StartAgent(2, 4, 1);
  }

  // Runs one of the Python checks (Debian's interpreter, which has the
  // Prometheus client and websocket packages), bounded; its exit code.
  int RunCheck(std::vector<std::string> args, std::string* output) {
    args.insert(args.begin(), TRL_SYSTEM_PYTHON3);
    Subprocess check(args);
    const std::optional<int> code = check.Wait(seconds(150));
    *output = check.Output();
    return code.value_or(-1);
  }

  void StopJob() {
    coord_->Signal(SIGTERM);
    EXPECT_TRUE(coord_->Wait(seconds(30)).has_value());
    EXPECT_TRUE(agent_->Wait(seconds(30)).has_value());
    RememberWorkerPids(coord_->Output() + agent_->Output());
  }

  int status_port_ = 0;
  std::unique_ptr<Subprocess> coord_;
  std::unique_ptr<Subprocess> agent_;
};

TEST_F(StatusPageTest, MetricsAgreeWithPsOnARunningTwoMachineJob) {
  StartJob(Worker({"--sleep", "60"}));
  const pb::JobStatus running = WaitUntilRunning(port_, 4);
  ASSERT_EQ(running.ranks_size(), 4) << coord_->Output();
  std::string output;
  EXPECT_EQ(RunCheck({kScripts + "metrics_match_ps.py", TRL_COORD_BIN,
                      std::to_string(port_), std::to_string(status_port_)},
                     &output),
            0)
      << output;
  StopJob();
}

// The page is loaded once; a worker is killed; the page shows the next
// generation and the failure by itself. The worker's last line is markup
// an attacker could print: it must show as text.
TEST_F(StatusPageTest, ABrowserSeesTheJobThenTheFailureWithoutAReload) {
  if (!std::filesystem::exists("/usr/bin/chromium")) {
    GTEST_SKIP() << "Chromium is not installed (scripts/setup.sh --tests)";
  }
  StartJob(
      {"/bin/sh", "-c", "echo '<img src=x onerror=alert(1)>'; exec sleep 120"},
      {"--max_restarts", "1", "--restart_backoff", "0.1"});
  ASSERT_EQ(WaitUntilRunning(port_, 4).ranks_size(), 4) << coord_->Output();
  std::string scratch = ::testing::TempDir() + "/browser-XXXXXX";
  ASSERT_NE(mkdtemp(scratch.data()), nullptr);
  std::string output;
  const int code = RunCheck({kScripts + "browser_check.py", "/usr/bin/chromium",
                             std::to_string(status_port_), scratch},
                            &output);
  EXPECT_EQ(code, 0) << output << coord_->Output();
  for (const char* shot : {"/before.png", "/after.png"}) {
    const std::string path = scratch + shot;
    EXPECT_TRUE(std::filesystem::exists(path) &&
                std::filesystem::file_size(path) > 0)
        << path;
  }
  StopJob();
}

TEST_F(StatusPageTest, ANonLoopbackStatusAddressIsRefusedAtStart) {
  for (const char* address : {"0.0.0.0", "10.1.2.3", "::"}) {
    auto coord =
        StartCoordinator(1, 1, {"/bin/true"}, {"--status_address", address});
    EXPECT_EQ(coord->Wait(seconds(30)), 2) << address;
    EXPECT_NE(coord->Stderr().find("--status_address " + std::string(address) +
                                   " is not a loopback address"),
              std::string::npos)
        << coord->Stderr();
    // And says how to see the page from elsewhere.
    EXPECT_NE(coord->Stderr().find("`trl-coord ui --address HOST:PORT`"),
              std::string::npos)
        << coord->Stderr();
  }
}

}  // namespace
}  // namespace trl::testing

// The job's history (`trl-coord events`, kept beside the state file): what
// happened, in order, with the cause of each stop, after the job ended and
// across a restart of the coordinator.
#include <signal.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

class EventsTest : public LauncherTest {
 protected:
  std::string StateFile() const {
    return ::testing::TempDir() + "/trl-events-" + std::to_string(port_) +
           ".state";
  }
  // `trl-coord events` for the job of StateFile(); its output.
  std::string Events(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {TRL_COORD_BIN, "events", "--state_file",
                                     StateFile()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Subprocess events(argv);
    EXPECT_EQ(events.Wait(seconds(10)), 0) << events.Output();
    return events.Stdout();
  }
  // Whether `needles` appear in `text` in this order.
  static bool InOrder(const std::string& text,
                      const std::vector<std::string>& needles) {
    size_t at = 0;
    for (const auto& needle : needles) {
      at = text.find(needle, at);
      if (at == std::string::npos) return false;
      at += needle.size();
    }
    return true;
  }
  void TearDown() override {
    std::filesystem::remove(StateFile() + ".events");
    LauncherTest::TearDown();
  }
};

TEST_F(EventsTest, AFailureAndItsRestartAreTheJobsHistoryAfterItEnds) {
  auto coord = StartCoordinator(
      1, 1,
      {"/bin/sh", "-c",
       "if [ \"$TRL_GENERATION\" = 0 ]; then echo boom; exit 3; fi; exit 0"},
      {"--state_file", StateFile(), "--max_restarts", "1"});
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  const std::string history = Events();
  EXPECT_TRUE(InOrder(
      history,
      {"gen -    registered      machine 0  host",
       "gen 0    generation      job        world size 1",
       "gen 0    stopping        job", "code 3", "gen 1    generation      job",
       "gen 1    finished        job        succeeded "
       "(exit code 0)"}))
      << history;
  // The same as JSON, every event with its time.
  const std::string json = Events({"--json"});
  EXPECT_NE(json.find("\"kind\": \"stopping\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"unix_ms\""), std::string::npos) << json;
}

TEST_F(EventsTest, AMachineWhoseConnectionDroppedIsALostEvent) {
  // Machine 1's agent is killed: its stream ends at once (no silence to
  // wait for). The history says machine 1 was lost, as it does for one
  // that went silent.
  const std::vector<std::string> flags = {"--state_file", StateFile(),
                                          "--max_restarts", "0"};
  auto agent = StartAgent(2, 2, 1);
  auto coord = StartCoordinator(
      2, 2, {"/bin/sh", "-c", "echo up rank $RANK; exec sleep 60"}, flags);
  ASSERT_TRUE(agent->WaitForOutput("up rank 1", seconds(20)))
      << agent->Output() << coord->Output();
  agent->Signal(SIGKILL);
  agent->Wait(seconds(10));
  EXPECT_EQ(coord->Wait(seconds(30)), 1) << coord->Output();
  const std::string history = Events();
  EXPECT_NE(history.find("lost            machine 1"), std::string::npos)
      << history;
}

TEST_F(EventsTest, NoHistoryKeptIsSaidAndIsNotAnEmptyList) {
  Subprocess events({TRL_COORD_BIN, "events", "--state_file",
                     ::testing::TempDir() + "/no-such-job.state"});
  EXPECT_EQ(events.Wait(seconds(10)), 1);
  EXPECT_NE(events.Stderr().find("no job history in"), std::string::npos)
      << events.Stderr();
}

}  // namespace
}  // namespace trl::testing

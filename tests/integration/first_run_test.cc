// A newcomer's first run, as the person sees it (issue 38): nothing waits in
// silence, the token is part of the first run, and the commands that ask
// about a job name it the way `start` does.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

namespace fs = std::filesystem;

class FirstRunTest : public LauncherTest {
 protected:
  void SetUp() override {
    LauncherTest::SetUp();
    dir_ = ::testing::TempDir() + "/trl-first-run-" + std::to_string(port_);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    LauncherTest::TearDown();
    fs::remove_all(dir_);
  }
  // A home directory of its own, as on another machine.
  std::string Home(const std::string& name) {
    const std::string home = dir_ + "/" + name;
    fs::create_directories(home);
    return home;
  }
  static void WriteToken(const std::string& path, const std::string& token) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << token << "\n";
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
  }
  std::vector<std::string> AgentArgv(std::vector<std::string> extra) const {
    std::vector<std::string> argv = {TRL_AGENT_BIN, "--machine_rank", "1"};
    for (auto& flag : ClusterFlags(2, 2)) argv.push_back(flag);
    for (auto& flag : extra) argv.push_back(flag);
    return argv;
  }
  static int Count(const std::string& text, const std::string& needle) {
    int count = 0;
    for (size_t at = text.find(needle); at != std::string::npos;
         at = text.find(needle, at + 1)) {
      ++count;
    }
    return count;
  }
  std::string dir_;
};

// No coordinator on the port: the agent says so, in words that name the
// port and what to check, and says it again every interval.
TEST_F(FirstRunTest, AnAgentSaysAgainAndAgainThatNothingListens) {
  const std::string home = Home("agent");
  WriteToken(home + "/.trl/token", "f00dfeedf00dfeedf00dfeedf00dfeed");
  Subprocess agent(AgentArgv({"--waiting_report_interval", "1"}),
                   {"HOME=" + home});
  ASSERT_TRUE(WaitUntil(
      [&] { return Count(agent.Stderr(), "connection refused") >= 3; },
      seconds(10)))
      << agent.Output();
  const std::string said = agent.Stderr();
  EXPECT_NE(said.find("nothing listens on port " + std::to_string(port_)),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("Is `trl-coord start` running"), std::string::npos);
  EXPECT_NE(said.find("(the wait ends in "), std::string::npos);
}

// `accelerate launch --machine_rank 1 train.py` is what a newcomer types on
// machine 1: the agent says why it takes no command, and a mistyped flag is
// named as one; both exit 2 at once.
TEST_F(FirstRunTest, AnAgentGivenTheScriptSaysTheCoordinatorSendsIt) {
  Subprocess given_script(AgentArgv({"train.py", "--lr", "3e-5"}));
  EXPECT_EQ(given_script.Wait(seconds(10)), 2) << given_script.Output();
  EXPECT_NE(given_script.Stderr().find(
                "trl-agent takes no command (given: train.py --lr 3e-5): the "
                "coordinator sends the one given to `trl-coord start`"),
            std::string::npos)
      << given_script.Output();
  Subprocess typo(AgentArgv({"--machine-rnak", "1"}));
  EXPECT_EQ(typo.Wait(seconds(10)), 2) << typo.Output();
  EXPECT_NE(typo.Stderr().find("not a trl-agent flag: --machine-rnak 1"),
            std::string::npos)
      << typo.Output();
}

// A network with no route to the coordinator (a namespace with no
// interface up) is told apart from a refused port.
TEST_F(FirstRunTest, AnAgentWithNoRouteSaysNoRoute) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for a network namespace";
  const std::string home = Home("agent");
  WriteToken(home + "/.trl/token", "f00dfeedf00dfeedf00dfeedf00dfeed");
  std::vector<std::string> argv = {"/usr/bin/unshare", "--net", TRL_AGENT_BIN,
                                   "--machine_rank", "1"};
  for (auto& flag : std::vector<std::string>{
           "--num_machines", "2", "--num_processes", "2", "--main_process_ip",
           "10.245.0.9", "--main_process_port", "47020", "--use_cpu",
           "--waiting_report_interval", "1"}) {
    argv.push_back(flag);
  }
  Subprocess agent(argv, {"HOME=" + home});
  ASSERT_TRUE(agent.WaitForOutput("no route to 10.245.0.9", seconds(10)))
      << agent.Output();
  EXPECT_NE(agent.Stderr().find("ip route get 10.245.0.9"), std::string::npos);
  EXPECT_EQ(agent.Stderr().find("connection refused"), std::string::npos);
}

// The coordinator says where its token is and that every machine needs it;
// an agent without it says how to get it, again every interval, and joins
// once the file is there.
TEST_F(FirstRunTest, TheTokenIsPartOfTheFirstRun) {
  const std::string coord_home = Home("coord");
  const std::string agent_home = Home("agent");
  std::vector<std::string> argv = {TRL_COORD_BIN, "start"};
  for (auto& flag : ClusterFlags(2, 2)) argv.push_back(flag);
  argv.insert(argv.end(), {"--no_python", "/bin/true"});
  Subprocess coord(argv, {"HOME=" + coord_home});
  // Said after the token and the state file, once machine 0's agent is in.
  ASSERT_TRUE(coord.WaitForOutput("machine 0 registered", seconds(10)))
      << coord.Output();
  const std::string token_file = coord_home + "/.trl/token";
  EXPECT_NE(coord.Stderr().find("auth token: " + token_file + " (created now)"),
            std::string::npos)
      << coord.Output();
  EXPECT_NE(coord.Stderr().find("Every machine of this job needs this same "
                                "file"),
            std::string::npos);
  EXPECT_NE(coord.Stderr().find("the job's state and history are kept in "),
            std::string::npos);
  // `ps` names the machine not there, and what to run on it.
  std::string shown;
  EXPECT_TRUE(WaitUntil(
      [&] {
        Subprocess ps(
            {TRL_COORD_BIN, "ps", "--main_process_port", std::to_string(port_)},
            {"HOME=" + coord_home});
        if (ps.Wait(seconds(10)) != 0) return false;
        shown = ps.Stdout();
        return shown.find(
                   "waiting for: 1 machine not registered (1); on "
                   "each, run: trl-agent ") != std::string::npos;
      },
      seconds(10)))
      << shown;
  EXPECT_NE(shown.find("--machine_rank N"), std::string::npos) << shown;

  Subprocess agent(AgentArgv({"--waiting_report_interval", "1"}),
                   {"HOME=" + agent_home});
  ASSERT_TRUE(WaitUntil(
      [&] {
        return Count(agent.Stderr(),
                     "every machine of the job needs that "
                     "same file") >= 2;
      },
      seconds(10)))
      << agent.Output();
  EXPECT_NE(agent.Stderr().find(agent_home + "/.trl/token does not exist"),
            std::string::npos)
      << agent.Output();
  // The person copies the file over; the agent goes on by itself.
  fs::create_directories(agent_home + "/.trl");
  fs::copy_file(token_file, agent_home + "/.trl/token");
  EXPECT_EQ(agent.Wait(seconds(30)), 0) << agent.Output();
  EXPECT_EQ(coord.Wait(seconds(30)), 0) << coord.Output();
}

// Another token: one message that names this agent's token file, and none
// of gRPC's or OpenSSL's own lines.
TEST_F(FirstRunTest, AWrongTokenIsNamedWithoutGrpcNoise) {
  const std::string coord_home = Home("coord");
  const std::string agent_home = Home("agent");
  WriteToken(agent_home + "/.trl/token", "0123456789abcdef0123456789abcdef");
  std::vector<std::string> argv = {TRL_COORD_BIN, "start"};
  for (auto& flag : ClusterFlags(2, 2)) argv.push_back(flag);
  argv.insert(argv.end(), {"--no_python", "/bin/true"});
  Subprocess coord(argv, {"HOME=" + coord_home});
  ASSERT_TRUE(coord.WaitForOutput("waiting for 2 machine(s)", seconds(10)))
      << coord.Output();
  Subprocess agent(AgentArgv({}), {"HOME=" + agent_home});
  EXPECT_EQ(agent.Wait(seconds(30)), 2) << agent.Output();
  const std::string said = agent.Stderr();
  EXPECT_NE(said.find("cannot authenticate with the coordinator"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("another token than this agent's (" + agent_home +
                      "/.trl/token)"),
            std::string::npos)
      << said;
  EXPECT_EQ(said.find("SSL_ERROR"), std::string::npos) << said;
  EXPECT_EQ(said.find("Handshake failed"), std::string::npos) << said;
}

// `ps`, `events` and `diagnose` name a job as `start` does: the config file
// (TRL's template, placeholder address and all) with the
// --main_process_ip/--main_process_port overrides, or --address; `events`
// asks a running coordinator over the network.
TEST_F(FirstRunTest, PsAndEventsTakeStartsWaysOfNamingTheJob) {
  const std::string config = dir_ + "/multi_node.yaml";
  std::ofstream(config) << "distributed_type: MULTI_CPU\n"
                           "machine_rank: 0\n"
                           "main_process_ip: '1234'\n"
                           "main_process_port: 9999\n"
                           "num_machines: 1\n"
                           "num_processes: 1\n"
                           "use_cpu: true\n";
  const std::string port = std::to_string(port_);
  auto coord =
      StartCoordinator(1, 1, {"/bin/sleep", "30"},
                       {"--no_python", "--state_file", dir_ + "/job.state"});
  ASSERT_TRUE(coord->WaitForOutput("generation 0", seconds(10)))
      << coord->Output();
  const std::vector<std::vector<std::string>> namings = {
      {"--main_process_port", port},
      {"--main_process_ip", "127.0.0.1", "--main_process_port", port},
      {"--config_file", config, "--main_process_ip", "127.0.0.1",
       "--main_process_port", port},
      {"--address", "127.0.0.1:" + port},
  };
  for (const auto& naming : namings) {
    std::vector<std::string> ps = {TRL_COORD_BIN, "ps"};
    ps.insert(ps.end(), naming.begin(), naming.end());
    Subprocess client(ps);
    EXPECT_EQ(client.Wait(seconds(10)), 0) << naming.front() << "\n"
                                           << client.Output();
    EXPECT_NE(client.Stdout().find("running"), std::string::npos)
        << client.Output();
  }
  // Not on this machine's default file (the job keeps another): asked of
  // the coordinator.
  Subprocess events(
      {TRL_COORD_BIN, "events", "--address", "127.0.0.1:" + port});
  EXPECT_EQ(events.Wait(seconds(10)), 0) << events.Output();
  EXPECT_NE(events.Stdout().find("registered"), std::string::npos)
      << events.Output();
  EXPECT_NE(events.Stderr().find("from the coordinator at 127.0.0.1:" + port),
            std::string::npos)
      << events.Output();
  // The config's own address without an override: refused, naming it.
  Subprocess placeholder({TRL_COORD_BIN, "ps", "--config_file", config});
  EXPECT_EQ(placeholder.Wait(seconds(10)), 2) << placeholder.Output();
  EXPECT_NE(placeholder.Stderr().find("1234"), std::string::npos)
      << placeholder.Output();
}

// `ps` about a job that has ended: said in words, with where its history
// is (this machine keeps it), never gRPC's "failed to connect to all
// addresses".
TEST_F(FirstRunTest, AskingAboutAnEndedJobSaysSoAndPointsToItsHistory) {
  auto coord = StartCoordinator(1, 1, {"/bin/true"}, {"--no_python"});
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  Subprocess ps(
      {TRL_COORD_BIN, "ps", "--main_process_port", std::to_string(port_)});
  EXPECT_EQ(ps.Wait(seconds(20)), 1) << ps.Output();
  EXPECT_NE(ps.Stderr().find("no coordinator answers at 127.0.0.1:" +
                             std::to_string(port_) + ": the job on it ended "),
            std::string::npos)
      << ps.Stderr();
  EXPECT_NE(ps.Stderr().find(" ago (succeeded (exit code 0)"),
            std::string::npos)
      << ps.Stderr();
  EXPECT_NE(ps.Stderr().find("its history: trl-coord events --state_file "),
            std::string::npos)
      << ps.Stderr();
  EXPECT_EQ(ps.Stderr().find("failed to connect"), std::string::npos)
      << ps.Stderr();
  // Named by address only, from a machine that keeps no history of it.
  Subprocess far(
      {TRL_COORD_BIN, "ps", "--address", "127.0.0.1:" + std::to_string(port_)});
  EXPECT_EQ(far.Wait(seconds(20)), 1) << far.Output();
  EXPECT_NE(far.Stderr().find("no job runs there now"), std::string::npos)
      << far.Stderr();
}

// Progress in view: while a job runs, `ps` shows each rank's newest line
// (what the script printed last: a step, a loss), and how long ago.
TEST_F(FirstRunTest, PsShowsEachRanksNewestLine) {
  auto agent = StartAgent(2, 2, 1);
  auto coord = StartCoordinator(
      2, 2,
      {"--no_python", "/bin/sh", "-c",
       "echo \"step 1 loss 0.9 of $RANK\"; echo \"step 7 loss 0.5 of "
       "$RANK\"; exec sleep 60"});
  ASSERT_TRUE(coord->WaitForOutput("generation 0", seconds(10)))
      << coord->Output();
  std::string shown;
  const bool both = WaitUntil(
      [&] {
        Subprocess ps({TRL_COORD_BIN, "ps", "--main_process_port",
                       std::to_string(port_)});
        if (ps.Wait(seconds(10)) != 0) return false;
        shown = ps.Stdout();
        return shown.find("step 7 loss 0.5 of 0 (") != std::string::npos &&
               shown.find("step 7 loss 0.5 of 1 (") != std::string::npos;
      },
      seconds(15));
  EXPECT_TRUE(both) << shown << coord->Output();
  EXPECT_NE(shown.find("LAST LINE"), std::string::npos) << shown;
  coord->Signal(SIGTERM);
  EXPECT_TRUE(coord->Wait(seconds(30)).has_value());
  EXPECT_TRUE(agent->Wait(seconds(30)).has_value());
}

}  // namespace
}  // namespace trl::testing

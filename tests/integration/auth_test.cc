// Every RPC is authenticated: an agent or a ps without the coordinator's
// token is refused, nothing starts, and the coordinator's state is
// unchanged.
#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "proto/trl_launch.pb.h"
#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

class AuthTest : public LauncherTest {
 protected:
  void SetUp() override {
    LauncherTest::SetUp();
    token_file_ = ::testing::TempDir() + "/trl-auth-" + std::to_string(port_);
    std::ofstream(token_file_) << kToken << "\n";
    chmod(token_file_.c_str(), 0600);
  }
  void TearDown() override {
    LauncherTest::TearDown();
    std::filesystem::remove(token_file_);
  }

  Subprocess Ps(std::vector<std::string> extra,
                std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {TRL_COORD_BIN, "ps", "--address",
                                     "127.0.0.1:" + std::to_string(port_),
                                     "--json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return Subprocess(argv, env);
  }

  static constexpr const char* kToken = "f00dfeedf00dfeedf00dfeedf00dfeed";
  std::string token_file_;
};

TEST_F(AuthTest, AgentsWithoutTheRightTokenAreRefused) {
  auto coord =
      StartCoordinator(2, 4, Worker(), {"--auth_token_file", token_file_});
  ASSERT_TRUE(coord->WaitForOutput("waiting for 2 machine(s)", seconds(10)))
      << coord->Output();
  const std::string token = kToken;
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"no token", {"--insecure"}},
      {"wrong token", {}},
      {"one byte off", {}},
      {"another length", {}},
  };
  const std::vector<std::string> tokens = {
      "", "0123456789abcdef0123456789abcdef",
      token.substr(0, token.size() - 1) + "e", token + "00"};
  // All at once: each takes 5 s to be sure it is refused.
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<std::string> argv = {TRL_AGENT_BIN, "--machine_rank", "1"};
    for (auto& flag : ClusterFlags(2, 4)) argv.push_back(flag);
    for (auto& flag : cases[i].second) argv.push_back(flag);
    std::vector<std::string> env;
    if (!tokens[i].empty()) env.push_back("TRL_AUTH_TOKEN=" + tokens[i]);
    agents.push_back(std::make_unique<Subprocess>(argv, env));
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    Subprocess& agent = *agents[i];
    EXPECT_EQ(agent.Wait(seconds(20)), 2) << cases[i].first << "\n"
                                          << agent.Output();
    // The TLS handshake with the token's identity fails: the agent sent
    // nothing, and says why.
    EXPECT_NE(agent.Stderr().find("cannot authenticate with the coordinator"),
              std::string::npos)
        << cases[i].first << "\n"
        << agent.Stderr();
    EXPECT_EQ(agent.Stderr().find(kToken), std::string::npos);
  }
  // Nothing registered, nothing started; the right token still works.
  Subprocess ps = Ps({"--auth_token_file", token_file_});
  ASSERT_EQ(ps.Wait(seconds(10)), 0) << ps.Output();
  trl::launch::v1::JobStatus status;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(ps.Stdout(), &status).ok())
      << ps.Stdout();
  // Only machine 0's own agent (in trl-coord, with the token) registered.
  ASSERT_EQ(status.nodes_size(), 1) << ps.Stdout();
  EXPECT_EQ(status.nodes(0).machine_rank(), 0);
  EXPECT_EQ(status.ranks_size(), 0);
  EXPECT_EQ(status.state(), "waiting_for_agents");
  EXPECT_EQ(coord->Output().find(kToken), std::string::npos);
  coord->Signal(SIGTERM);
  EXPECT_EQ(coord->Wait(seconds(20)), 128 + SIGTERM) << coord->Output();
}

// Workers get their generation's store token, never the cluster's token,
// even when the daemons were given it in their environment.
TEST_F(AuthTest, WorkersNeverSeeTheClusterToken) {
  Subprocess coord(
      [&] {
        std::vector<std::string> argv = {TRL_COORD_BIN, "start"};
        for (auto& flag : ClusterFlags(1, 2)) argv.push_back(flag);
        for (auto& arg : Worker({"--print_env"})) argv.push_back(arg);
        return argv;
      }(),
      {std::string("TRL_AUTH_TOKEN=") + kToken});
  ASSERT_EQ(coord.Wait(seconds(30)), 0) << coord.Output();
  RememberWorkerPids(coord.Stdout());
  for (int rank : {0, 1}) {
    const auto env = EnvOfRank(coord.Stdout(), rank);
    ASSERT_FALSE(env.empty()) << coord.Output();
    EXPECT_EQ(env.count("TRL_AUTH_TOKEN"), 0u) << "rank " << rank;
    ASSERT_EQ(env.count("TRL_STORE_TOKEN"), 1u) << "rank " << rank;
    // The bundled worker does not print even the store token.
    EXPECT_EQ(env.at("TRL_STORE_TOKEN"), "<64 characters, not shown>");
  }
  EXPECT_EQ(coord.Output().find(kToken), std::string::npos);
}

TEST_F(AuthTest, PsNeedsTheToken) {
  auto coord = StartCoordinator(1, 1, Worker({"--sleep", "60"}),
                                {"--auth_token_file", token_file_});
  ASSERT_TRUE(coord->WaitForOutput("[rank 0]", seconds(20))) << coord->Output();
  RememberWorkerPids(coord->Stdout());
  Subprocess anonymous = Ps({"--insecure"});
  EXPECT_EQ(anonymous.Wait(seconds(10)), 1);
  EXPECT_NE(anonymous.Stderr().find("TLS handshake failed"), std::string::npos)
      << anonymous.Stderr();
  Subprocess wrong = Ps({}, {"TRL_AUTH_TOKEN=nope"});
  EXPECT_EQ(wrong.Wait(seconds(10)), 1);
  EXPECT_NE(wrong.Stderr().find("TLS handshake failed"), std::string::npos)
      << wrong.Stderr();
  Subprocess right = Ps({"--auth_token_file", token_file_});
  EXPECT_EQ(right.Wait(seconds(10)), 0) << right.Output();
  coord->Signal(SIGTERM);
  EXPECT_EQ(coord->Wait(seconds(20)), 128 + SIGTERM) << coord->Output();
}

TEST_F(AuthTest, InsecureOnLoopbackWorksForEveryone) {
  auto agent = StartAgent(2, 2, 1, {"--insecure"});
  auto coord = StartCoordinator(2, 2, Worker(), {"--insecure"});
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
  RememberWorkerPids(coord->Stdout() + agent->Stdout());
  EXPECT_NE(coord->Stderr().find("no authentication (--insecure)"),
            std::string::npos);
}

}  // namespace
}  // namespace trl::testing

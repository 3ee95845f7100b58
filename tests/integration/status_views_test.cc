// The status views end to end: a real coordinator of 20 machines x 8
// ranks (simulated agents over real gRPC streams), one machine's agent
// killed. `trl-coord ps` (gRPC) and /api/status (HTTP) then give a
// summary with the counts and the lost machine (not 160 rank rows), the
// right page of a list, a filtered one, the whole status to an empty
// request, and 400 naming a bad parameter.
#include <arpa/inet.h>
#include <google/protobuf/util/json_util.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/trl_launch.pb.h"
#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

namespace pb = trl::launch::v1;

struct HttpReply {
  int status = 0;
  std::string body;
};

// One GET to the status server on loopback; every read bounded.
HttpReply HttpGet(int port, const std::string& target) {
  HttpReply reply;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return reply;
  }
  const std::string request = "GET " + target +
                              " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Connection: close\r\n\r\n";
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string raw;
  char buffer[65536];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) raw.append(buffer, n);
  close(fd);
  if (raw.rfind("HTTP/1.1 ", 0) == 0) reply.status = std::atoi(&raw[9]);
  const size_t body = raw.find("\r\n\r\n");
  if (body != std::string::npos) reply.body = raw.substr(body + 4);
  return reply;
}

std::optional<pb::JobStatus> ParseStatus(const std::string& json) {
  pb::JobStatus status;
  if (!google::protobuf::util::JsonStringToMessage(json, &status).ok()) {
    return std::nullopt;
  }
  return status;
}

class StatusViewsTest : public LauncherTest {
 protected:
  static constexpr int kMachines = 20;

  std::vector<std::string> Flags() const {
    std::vector<std::string> flags = ClusterFlags(kMachines, kMachines * 8);
    flags.push_back("--insecure");
    return flags;
  }
  std::unique_ptr<Subprocess> Simulator(int first, int agents) {
    std::vector<std::string> argv = {TRL_AGENT_SIM_BIN,
                                     "--coordinator_pid",
                                     std::to_string(coord_->pid()),
                                     "--first_machine_rank",
                                     std::to_string(first),
                                     "--agents",
                                     std::to_string(agents),
                                     "--no_failures",
                                     "--heartbeat_phase",
                                     "60",
                                     "--timeout",
                                     "60"};
    for (auto& flag : Flags()) argv.push_back(flag);
    return std::make_unique<Subprocess>(argv);
  }
  // `trl-coord ps ARGS...` against the job: its stdout, or nullopt.
  std::optional<std::string> Ps(std::vector<std::string> args) {
    std::vector<std::string> argv = {TRL_COORD_BIN, "ps", "--insecure",
                                     "--address",
                                     "127.0.0.1:" + std::to_string(port_)};
    argv.insert(argv.end(), args.begin(), args.end());
    Subprocess ps(argv);
    if (ps.Wait(seconds(10)) != 0) return std::nullopt;
    return ps.Stdout();
  }
  std::optional<pb::JobStatus> Get(const std::string& query) {
    const HttpReply reply = HttpGet(status_port_, "/api/status" + query);
    if (reply.status != 200) return std::nullopt;
    return ParseStatus(reply.body);
  }

  void SetUp() override {
    LauncherTest::SetUp();
    status_port_ = FreePort();
    std::vector<std::string> argv = {TRL_COORD_BIN,
                                     "start",
                                     "--no_local_agent",
                                     "--max_restarts",
                                     "2",
                                     "--status_port",
                                     std::to_string(status_port_)};
    for (auto& flag : Flags()) argv.push_back(flag);
    argv.push_back("/bin/true");  // never runs: the agents are simulated
    coord_ = std::make_unique<Subprocess>(argv);
    ASSERT_TRUE(coord_->WaitForOutput("waiting for 20 machine(s)", seconds(10)))
        << coord_->Output();
    most_ = Simulator(0, kMachines - 1);
    last_ = Simulator(kMachines - 1, 1);
    // Every rank running, as the whole status (an empty request) says.
    ASSERT_TRUE(WaitUntil(
        [&] {
          auto whole = Get("");
          if (!whole || whole->ranks_size() != kMachines * 8) return false;
          for (const auto& rank : whole->ranks()) {
            if (rank.state() != "running") return false;
          }
          return true;
        },
        seconds(30)))
        << coord_->Output() << most_->Output();
    // Machine 19's agent is gone.
    last_->Signal(SIGKILL);
    last_->Wait(seconds(10));
    ASSERT_TRUE(WaitUntil(
        [&] {
          auto whole = Get("");
          return whole && whole->nodes_size() == kMachines &&
                 whole->nodes(kMachines - 1).state() == "lost";
        },
        seconds(30)))
        << coord_->Output();
  }

  void TearDown() override {
    if (most_) most_->Signal(SIGKILL);
    if (most_) most_->Wait(seconds(10));
    if (coord_) {
      coord_->Signal(SIGTERM);
      coord_->Wait(seconds(20));
    }
    LauncherTest::TearDown();
  }

  int status_port_ = 0;
  std::unique_ptr<Subprocess> coord_;
  std::unique_ptr<Subprocess> most_;
  std::unique_ptr<Subprocess> last_;
};

TEST_F(StatusViewsTest, ASummaryHasTheCountsAndTheLostMachineNotEveryRank) {
  // Over gRPC, as `trl-coord ps --json --summary` asks.
  const auto json = Ps({"--json", "--summary"});
  ASSERT_TRUE(json.has_value());
  const auto status = ParseStatus(*json);
  ASSERT_TRUE(status.has_value()) << *json;
  EXPECT_EQ(status->ranks_size(), 0) << *json;  // not 160 rows
  EXPECT_EQ(status->nodes_size(), 0);
  const pb::JobSummary& summary = status->summary();
  EXPECT_EQ(summary.machines(), kMachines);
  EXPECT_EQ(summary.ranks(), kMachines * 8);
  ASSERT_EQ(summary.attention_nodes_size(), 1) << *json;
  EXPECT_EQ(summary.attention_nodes(0).machine_rank(), kMachines - 1);
  EXPECT_EQ(summary.attention_nodes(0).state(), "lost");
  bool lost_counted = false;
  for (const auto& count : summary.machine_states()) {
    lost_counted |= count.state() == "lost" && count.count() == 1;
  }
  EXPECT_TRUE(lost_counted) << *json;
  EXPECT_LE(summary.attention_ranks_size(), 20);

  // Over HTTP, the same view; and `trl-coord ps` prints it as a summary.
  const auto page = Get("?view=summary");
  ASSERT_TRUE(page.has_value());
  EXPECT_EQ(page->ranks_size(), 0);
  ASSERT_EQ(page->summary().attention_nodes_size(), 1);
  EXPECT_EQ(page->summary().attention_nodes(0).machine_rank(), kMachines - 1);
  const auto text = Ps({});
  ASSERT_TRUE(text.has_value());
  EXPECT_NE(text->find("machines: "), std::string::npos) << *text;
  EXPECT_NE(text->find("(a summary of 20 machines and 160 ranks"),
            std::string::npos)
      << *text;
  EXPECT_EQ(text->find("\n0        "), std::string::npos) << *text;
}

TEST_F(StatusViewsTest, PagesAndFiltersAreServedAndAnEmptyRequestGetsAll) {
  const auto page = Get("?offset=16&limit=8");
  ASSERT_TRUE(page.has_value());
  ASSERT_EQ(page->ranks_size(), 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(page->ranks(i).rank(), 16 + i);
  EXPECT_EQ(page->ranks_matching(), kMachines * 8);
  EXPECT_EQ(page->nodes_size(), 0);
  EXPECT_FALSE(page->has_summary());

  const auto lost = Get("?q=machine+19+&machine_q=LOST&machine_limit=5");
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->ranks_matching(), 8);
  ASSERT_EQ(lost->ranks_size(), 8);
  EXPECT_EQ(lost->ranks(0).rank(), 152);
  ASSERT_EQ(lost->nodes_size(), 1);
  EXPECT_EQ(lost->nodes(0).machine_rank(), kMachines - 1);

  // An empty request (what older clients send) gets everything, over
  // gRPC and HTTP.
  const auto whole = Ps({"--json"});
  ASSERT_TRUE(whole.has_value());
  const auto parsed = ParseStatus(*whole);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->ranks_size(), kMachines * 8);
  EXPECT_EQ(parsed->nodes_size(), kMachines);
  EXPECT_FALSE(parsed->has_summary());
  const auto over_http = Get("");
  ASSERT_TRUE(over_http.has_value());
  EXPECT_EQ(over_http->ranks_size(), kMachines * 8);
  // --ranks lists every one.
  const auto every = Ps({"--ranks"});
  ASSERT_TRUE(every.has_value());
  EXPECT_NE(every->find("\n159    7      19"), std::string::npos) << *every;
}

TEST_F(StatusViewsTest, ABadParameterGets400NamingIt) {
  for (const auto& [query, named] :
       std::vector<std::pair<std::string, std::string>>{
           {"?limit=1001", "'limit'"},
           {"?offset=x", "'offset'"},
           {"?view=all", "'view'"},
           {"?machine_q=%G0", "'machine_q'"},
           {"?page=2", "'page'"}}) {
    const HttpReply reply = HttpGet(status_port_, "/api/status" + query);
    EXPECT_EQ(reply.status, 400) << query << ": " << reply.body;
    EXPECT_NE(reply.body.find(named), std::string::npos) << reply.body;
  }
}

}  // namespace
}  // namespace trl::testing

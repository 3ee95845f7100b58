// `trl-coord ui` on real processes: it reaches a running coordinator with
// the daemons' credentials (as `trl-coord ps`) and serves the same page,
// /api/status, /api/events and /metrics on a loopback port of its own.
// The coordinators here serve no status page of their own (--no_status):
// whatever the ui shows came over gRPC.
#include <arpa/inet.h>
#include <google/protobuf/util/json_util.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>

#include "tests/integration/job_status_probe.h"
#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

const std::string kScripts =
    std::string(TRL_SOURCE_DIR) + "/tests/integration/status/";

struct HttpReply {
  int code = 0;  // 0: no answer
  std::string body;
};

// One GET on 127.0.0.1:port, every read bounded.
HttpReply HttpGet(int port, const std::string& path) {
  HttpReply reply;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval timeout{15, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return reply;
  }
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return reply;
  }
  std::string raw;
  char buffer[8192];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) raw.append(buffer, n);
  close(fd);
  if (raw.rfind("HTTP/1.1 ", 0) != 0) return reply;
  reply.code = std::atoi(raw.c_str() + 9);
  const size_t body = raw.find("\r\n\r\n");
  if (body != std::string::npos) reply.body = raw.substr(body + 4);
  return reply;
}

class UiTest : public LauncherTest {
 protected:
  void SetUp() override {
    LauncherTest::SetUp();
    // For a ui started before any coordinator made ~/.trl/token.
    token_file_ =
        ::testing::TempDir() + "/trl-ui-token-" + std::to_string(port_);
    std::ofstream(token_file_) << "ui-test-token-" << port_ << "\n";
    chmod(token_file_.c_str(), 0600);
  }
  void TearDown() override {
    LauncherTest::TearDown();
    std::filesystem::remove(token_file_);
  }

  // `trl-coord ui` for the coordinator on port_; returns its port, read
  // from its first line of output, or 0.
  int StartUi(std::vector<std::string> extra = {},
              std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {TRL_COORD_BIN, "ui", "--address",
                                     "127.0.0.1:" + std::to_string(port_)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ui_ = std::make_unique<Subprocess>(argv, env);
    if (!ui_->WaitForOutput("http://127.0.0.1:", seconds(15))) return 0;
    static const std::regex url("^http://127\\.0\\.0\\.1:([0-9]+)/\n");
    std::smatch match;
    const std::string out = ui_->Stdout();
    if (!std::regex_search(out, match, url)) return 0;
    return std::stoi(match[1]);
  }

  // Waits until the ui's `path` answers `code`; returns the last answer.
  HttpReply WaitForAnswer(int ui_port, const std::string& path, int code) {
    HttpReply last;
    WaitUntil(
        [&] {
          last = HttpGet(ui_port, path);
          return last.code == code;
        },
        seconds(30));
    return last;
  }

  void StopUi() {
    ASSERT_TRUE(ui_);
    ui_->Signal(SIGTERM);
    EXPECT_EQ(ui_->Wait(seconds(10)), 0) << ui_->Output();
  }

  std::unique_ptr<Subprocess> ui_;
  std::string token_file_;
};

TEST_F(UiTest, ServesWhatPsShowsOfARunningJob) {
  auto coord =
      StartCoordinator(2, 4, Worker({"--sleep", "60"}), {"--no_status"});
  auto agent = StartAgent(2, 4, 1);
  const pb::JobStatus running = WaitUntilRunning(port_, 4);
  ASSERT_EQ(running.ranks_size(), 4) << coord->Output();
  const int ui_port = StartUi();
  ASSERT_NE(ui_port, 0) << ui_->Output();

  // /api/status: the same job as ps --json (ages and uptime aside).
  const HttpReply status_reply = HttpGet(ui_port, "/api/status");
  ASSERT_EQ(status_reply.code, 200) << status_reply.body;
  pb::JobStatus shown;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(status_reply.body, &shown)
          .ok())
      << status_reply.body;
  const auto ps = PsJson(port_);
  ASSERT_TRUE(ps);
  EXPECT_EQ(shown.job_id(), ps->job_id());
  EXPECT_EQ(shown.generation(), ps->generation());
  EXPECT_EQ(shown.state(), ps->state());
  ASSERT_EQ(shown.nodes_size(), 2);
  ASSERT_EQ(shown.nodes_size(), ps->nodes_size());
  for (int i = 0; i < shown.nodes_size(); ++i) {
    EXPECT_EQ(shown.nodes(i).machine_rank(), ps->nodes(i).machine_rank());
    EXPECT_EQ(shown.nodes(i).hostname(), ps->nodes(i).hostname());
    EXPECT_EQ(shown.nodes(i).address(), ps->nodes(i).address());
    EXPECT_EQ(shown.nodes(i).state(), ps->nodes(i).state());
  }
  ASSERT_EQ(shown.ranks_size(), 4);
  for (int i = 0; i < shown.ranks_size(); ++i) {
    EXPECT_EQ(shown.ranks(i).DebugString(), ps->ranks(i).DebugString());
  }
  // A view, as the page asks for it.
  const HttpReply page_of_ranks =
      HttpGet(ui_port, "/api/status?view=summary&offset=2&limit=2");
  EXPECT_EQ(page_of_ranks.code, 200);
  EXPECT_NE(page_of_ranks.body.find("\"ranks_matching\": 4"), std::string::npos)
      << page_of_ranks.body;

  // /api/events: the registrations and the generation, over GetJobEvents.
  const HttpReply events_reply = HttpGet(ui_port, "/api/events");
  ASSERT_EQ(events_reply.code, 200) << events_reply.body;
  pb::JobEvents events;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(events_reply.body, &events)
          .ok())
      << events_reply.body;
  std::set<int> registered;
  bool generation = false;
  for (const auto& event : events.events()) {
    if (event.kind() == "registered") registered.insert(event.machine_rank());
    if (event.kind() == "generation" && event.generation() == 0) {
      generation = true;
    }
  }
  EXPECT_EQ(registered, (std::set<int>{0, 1})) << events_reply.body;
  EXPECT_TRUE(generation) << events_reply.body;

  // The page, and /metrics checked against ps by Prometheus' parser.
  const HttpReply page = HttpGet(ui_port, "/");
  EXPECT_EQ(page.code, 200);
  EXPECT_NE(page.body.find(ps->job_id()), std::string::npos);
  Subprocess metrics({TRL_SYSTEM_PYTHON3, kScripts + "metrics_match_ps.py",
                      TRL_COORD_BIN, std::to_string(port_),
                      std::to_string(ui_port)});
  EXPECT_EQ(metrics.Wait(seconds(60)), 0) << metrics.Output();

  StopUi();
  coord->Signal(SIGTERM);
  EXPECT_TRUE(coord->Wait(seconds(30)).has_value());
  EXPECT_TRUE(agent->Wait(seconds(30)).has_value());
  RememberWorkerPids(coord->Output() + agent->Output());
}

TEST_F(UiTest, AWrongTokenEndsItAtStartWithExitCode1) {
  auto coord =
      StartCoordinator(1, 1, Worker({"--sleep", "60"}), {"--no_status"});
  ASSERT_EQ(WaitUntilRunning(port_, 1).ranks_size(), 1) << coord->Output();
  Subprocess ui(
      {TRL_COORD_BIN, "ui", "--address", "127.0.0.1:" + std::to_string(port_)},
      {"TRL_AUTH_TOKEN=not-the-coordinators"});
  EXPECT_EQ(ui.Wait(seconds(15)), 1) << ui.Output();
  EXPECT_NE(ui.Stderr().find("credentials differ"), std::string::npos)
      << ui.Stderr();
  EXPECT_EQ(ui.Stdout(), "");  // no URL: nothing was served
  coord->Signal(SIGTERM);
  EXPECT_TRUE(coord->Wait(seconds(30)).has_value());
  RememberWorkerPids(coord->Output());
}

TEST_F(UiTest, ANonLoopbackListenAddressIsRefusedWithExitCode2) {
  for (const char* address : {"0.0.0.0", "10.1.2.3", "::"}) {
    Subprocess ui({TRL_COORD_BIN, "ui", "--address", "127.0.0.1:1",
                   "--listen_address", address});
    EXPECT_EQ(ui.Wait(seconds(15)), 2) << address;
    EXPECT_NE(ui.Stderr().find("--listen_address " + std::string(address) +
                               " is not a loopback address"),
              std::string::npos)
        << ui.Stderr();
  }
}

// Started before its coordinator, it serves 503 until one is there; a
// coordinator killed makes it answer 503 again, never exit, and a new
// coordinator on the same address is found again.
TEST_F(UiTest, ACoordinatorThatIsGoneIs503UntilItComesBack) {
  const std::vector<std::string> token = {"--auth_token_file", token_file_};
  const int ui_port = StartUi(token);
  ASSERT_NE(ui_port, 0) << ui_->Output();
  HttpReply reply = HttpGet(ui_port, "/api/status");
  EXPECT_EQ(reply.code, 503) << reply.body;
  EXPECT_NE(reply.body.find("cannot be reached"), std::string::npos)
      << reply.body;

  auto coord = StartCoordinator(1, 1, Worker({"--sleep", "60"}),
                                {"--no_status", token[0], token[1]});
  reply = WaitForAnswer(ui_port, "/api/status", 200);
  ASSERT_EQ(reply.code, 200) << reply.body;

  coord->Signal(SIGKILL);
  ASSERT_TRUE(coord->Wait(seconds(10)).has_value());
  RememberWorkerPids(coord->Output());
  for (const char* path : {"/api/status", "/api/events", "/metrics", "/"}) {
    reply = WaitForAnswer(ui_port, path, 503);
    // (ASSERT: a UI that does not notice waits 30 s on each path.)
    ASSERT_EQ(reply.code, 503) << path << ": " << reply.body;
    EXPECT_NE(reply.body.find("cannot be reached"), std::string::npos)
        << reply.body;
  }
  EXPECT_FALSE(ui_->Wait(milliseconds(1)).has_value()) << ui_->Output();

  auto again = StartCoordinator(1, 1, Worker({"--sleep", "60"}),
                                {"--no_status", token[0], token[1]});
  reply = WaitForAnswer(ui_port, "/api/status", 200);
  EXPECT_EQ(reply.code, 200) << reply.body;
  StopUi();
  again->Signal(SIGTERM);
  EXPECT_TRUE(again->Wait(seconds(30)).has_value());
  RememberWorkerPids(again->Output());
}

}  // namespace
}  // namespace trl::testing

// `trl-coord logs`: any rank's output from anywhere, through the
// coordinator, with bounded memory and without slowing the workers.
#include "coordinator/cli/logs.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "common/auth_token.h"
#include "tests/integration/job_status_probe.h"
#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

namespace fs = std::filesystem;

// Under AddressSanitizer or ThreadSanitizer the daemons' speed and resident
// memory say nothing of the code (see flood_test.cc): the flood test then
// checks only that it runs through with markers of dropped lines.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#elif defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// A worker in Python (the system's python3, run as a command).
std::vector<std::string> Python(const std::string& code) {
  return {"--no_python", "python3", "-c", code};
}

// The workers' lines `logs` printed; the generation marks between them
// (`==== generation N ====`) go to `marks` when given.
std::vector<std::string> Lines(const std::string& text,
                               std::vector<std::string>* marks = nullptr) {
  static const std::regex kMark(R"(^==== generation \d+ ====$)");
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (std::regex_match(line, kMark)) {
      if (marks != nullptr) marks->push_back(line);
    } else {
      lines.push_back(line);
    }
  }
  return lines;
}

class LogsTest : public LauncherTest {
 protected:
  void SetUp() override {
    LauncherTest::SetUp();
    char dir_template[] = "/tmp/trl-logs-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
  }
  void TearDown() override {
    fs::remove_all(dir_);
    LauncherTest::TearDown();
  }
  std::string Address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::unique_ptr<Subprocess> Logs(std::vector<std::string> flags) {
    std::vector<std::string> argv = {TRL_COORD_BIN, "logs", "--address",
                                     Address()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return std::make_unique<Subprocess>(argv);
  }
  std::string dir_;
};

const std::regex kLine(
    R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[rank (\d+)\] (.*)$)");

// A rank on machine 1 (another agent than the coordinator's), followed
// from the coordinator while it prints a line every 100 ms: the client
// shows each line as it is printed, in order, with its prefix, and exits 0
// when the job ends.
TEST_F(LogsTest, FollowShowsARankOfAnotherAgentAsItPrints) {
  auto agent = StartAgent(2, 4, 1);
  auto coord = StartCoordinator(
      2, 4,
      Python("import os, time\n"
             "time.sleep(1)\n"
             "for i in range(40):\n"
             "    print('tick', i, 'of', os.environ['RANK'], flush=True)\n"
             "    time.sleep(0.1)\n"));
  const pb::JobStatus status = WaitUntilRunning(port_, 4);
  ASSERT_EQ(status.ranks_size(), 4) << coord->Output();
  for (const auto& rank : status.ranks()) worker_pids_.insert(rank.pid());
  auto logs = Logs({"-f", "--rank", "3"});
  // Lines arrive while the worker still prints: tick 20 is seen about 2 s
  // before the job ends.
  ASSERT_TRUE(logs->WaitForOutput("] tick 20 of 3", seconds(20)))
      << logs->Output() << coord->Output();
  EXPECT_FALSE(agent->Wait(milliseconds(0)).has_value())
      << "the job ended before its lines were shown";
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
  ASSERT_EQ(logs->Wait(seconds(15)), 0) << logs->Output();
  std::vector<std::string> marks;
  const std::vector<std::string> lines = Lines(logs->Stdout(), &marks);
  EXPECT_EQ(marks, std::vector<std::string>{"==== generation 0 ===="});
  EXPECT_EQ(logs->Stdout().rfind("==== generation 0 ====\n", 0), 0u)
      << logs->Stdout();
  int expected = -1;
  for (const std::string& line : lines) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(line, match, kLine)) << line;
    EXPECT_EQ(match[1], "3") << line;
    int tick = -1;
    ASSERT_EQ(std::sscanf(match[2].str().c_str(), "tick %d of 3", &tick), 1)
        << line;
    if (expected >= 0) {
      EXPECT_EQ(tick, expected) << logs->Stdout();
    }
    expected = tick + 1;
  }
  EXPECT_EQ(expected, 40) << logs->Stdout();
}

// `logs -f --machine 1` while machine 1's agent is frozen (SIGSTOP) until
// the coordinator holds it lost, then comes back: `again` is how (a new
// agent for machine 1 that takes its place, or the same agent let go on
// with SIGCONT, which registers again). Generation 1 then runs, and its
// lines of machine 1 must be shown as they are printed, with no line
// twice (the retained lines sent again are only those after the last the
// client got), and the client exits 0 when the job ends.
class LogsRejoinTest : public LogsTest {
 protected:
  void FollowAcrossARejoin(bool replace) {
    const std::vector<std::string> flags = {"--heartbeat_interval", "0.2",
                                            "--max_restarts", "1"};
    // Generation 0 prints until stopped; generation 1 prints 20 lines.
    const std::vector<std::string> worker = Python(
        "import os, time\n"
        "gen = os.environ['TRL_GENERATION']\n"
        "for i in range(600 if gen == '0' else 20):\n"
        "    print('gen', gen, 'tick', i, 'of', os.environ['RANK'], "
        "flush=True)\n"
        "    time.sleep(0.1)\n");
    auto agent = StartAgent(2, 4, 1, flags);
    auto coord = StartCoordinator(2, 4, worker, flags);
    const pb::JobStatus status = WaitUntilRunning(port_, 4);
    ASSERT_EQ(status.ranks_size(), 4) << coord->Output();
    for (const auto& rank : status.ranks()) worker_pids_.insert(rank.pid());
    auto logs = Logs({"-f", "--machine", "1"});
    ASSERT_TRUE(logs->WaitForOutput("] gen 0 tick 5 of 3", seconds(20)))
        << logs->Output();
    agent->Signal(SIGSTOP);
    ASSERT_TRUE(coord->WaitForOutput("machine 1 is lost", seconds(20)))
        << coord->Output();
    std::unique_ptr<Subprocess> replacement;
    if (replace) {
      replacement = StartAgent(2, 4, 1, flags);
    } else {
      agent->Signal(SIGCONT);
    }
    Subprocess& back = replace ? *replacement : *agent;
    ASSERT_TRUE(back.WaitForOutput("] gen 1 tick 19 of 3", seconds(30)))
        << back.Output() << coord->Output();
    EXPECT_TRUE(logs->WaitForOutput("] gen 1 tick 19 of 3", seconds(10)))
        << "logs -f showed nothing of machine 1's agent since it registered "
           "again:\n"
        << logs->Stdout();
    EXPECT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
    EXPECT_EQ(back.Wait(seconds(30)), 0) << back.Output();
    EXPECT_EQ(logs->Wait(seconds(15)), 0) << logs->Output();
    if (replace) agent->Wait(seconds(10));  // killed by the replacement
    RememberWorkerPids(back.Output());
    std::set<std::string> seen;
    int generation_1 = 0;
    std::vector<std::string> marks;
    const std::vector<std::string> lines = Lines(logs->Stdout(), &marks);
    // Generation 0's lines, then generation 1's, each under its mark.
    EXPECT_EQ(marks, (std::vector<std::string>{"==== generation 0 ====",
                                               "==== generation 1 ===="}))
        << logs->Stdout();
    for (const std::string& line : lines) {
      std::smatch match;
      ASSERT_TRUE(std::regex_match(line, match, kLine)) << line;
      EXPECT_TRUE(match[1] == "2" || match[1] == "3") << line;
      EXPECT_TRUE(seen.insert(match[2].str()).second) << "twice: " << line;
      if (match[2].str().rfind("gen 1 ", 0) == 0) ++generation_1;
    }
    EXPECT_EQ(generation_1, 40) << logs->Stdout();
  }
};

TEST_F(LogsRejoinTest, FollowGoesOnShowingAMachineWhoseAgentWasReplaced) {
  FollowAcrossARejoin(/*replace=*/true);
}

TEST_F(LogsRejoinTest, FollowGoesOnShowingAMachineWhoseAgentRegisteredAgain) {
  FollowAcrossARejoin(/*replace=*/false);
}

// `logs -f` to the end of a job that fails: each generation's lines under
// their mark, and the client says how the job ended and exits with its code
// (it exited 0 whatever the job did).
TEST_F(LogsTest, FollowMarksEachGenerationAndExitsWithTheJobsCode) {
  auto coord = StartCoordinator(
      1, 1,
      Python("import os, time\n"
             "time.sleep(1.5)\n"
             "print('in generation', os.environ['TRL_GENERATION'], "
             "flush=True)\n"
             "time.sleep(0.5)\n"
             "raise SystemExit(3)\n"),
      {"--max_restarts", "1", "--restart_backoff", "0.1"});
  const pb::JobStatus status = WaitUntilRunning(port_, 1);
  ASSERT_EQ(status.ranks_size(), 1) << coord->Output();
  auto logs = Logs({"-f"});
  const std::optional<int> job_code = coord->Wait(seconds(30));
  ASSERT_TRUE(job_code.has_value()) << coord->Output();
  EXPECT_NE(*job_code, 0) << coord->Output();
  EXPECT_EQ(logs->Wait(seconds(15)), job_code) << logs->Output();
  const std::string out = logs->Stdout();
  const size_t mark_0 = out.find("==== generation 0 ====\n");
  const size_t line_0 = out.find("] in generation 0");
  const size_t mark_1 = out.find("==== generation 1 ====\n");
  const size_t line_1 = out.find("] in generation 1");
  ASSERT_NE(mark_0, std::string::npos) << out;
  ASSERT_NE(mark_1, std::string::npos) << out;
  EXPECT_LT(mark_0, line_0) << out;
  EXPECT_LT(line_0, mark_1) << out;
  EXPECT_LT(mark_1, line_1) << out;
  EXPECT_NE(logs->Stderr().find("trl-coord logs: the job failed: "),
            std::string::npos)
      << logs->Stderr();
  EXPECT_NE(
      logs->Stderr().find("(exit code " + std::to_string(*job_code) + ")"),
      std::string::npos)
      << logs->Stderr();
}

// Without -f: the last lines each rank's agent kept (1000 of 1500), in
// order, then exit 0; an unknown rank or machine is refused with exit 2.
TEST_F(LogsTest, ShowsTheRetainedLinesAndRefusesRanksTheJobLacks) {
  auto agent = StartAgent(2, 4, 1);
  auto coord =
      StartCoordinator(2, 4,
                       Python("import os, sys, time\n"
                              "for i in range(1500):\n"
                              "    print('line', i, 'of', os.environ['RANK'])\n"
                              "print('done', flush=True)\n"
                              "time.sleep(120)\n"));
  const pb::JobStatus status = WaitUntilRunning(port_, 4);
  ASSERT_EQ(status.ranks_size(), 4) << coord->Output();
  for (const auto& rank : status.ranks()) worker_pids_.insert(rank.pid());
  ASSERT_TRUE(agent->WaitForOutput("[rank 2] done", seconds(20)));
  ASSERT_TRUE(agent->WaitForOutput("[rank 3] done", seconds(20)));
  ASSERT_TRUE(coord->WaitForOutput("[rank 0] done", seconds(20)));

  auto one = Logs({"--rank", "2"});
  ASSERT_EQ(one->Wait(seconds(20)), 0) << one->Output();
  const auto lines = Lines(one->Stdout());
  ASSERT_EQ(lines.size(), 1000u) << one->Stdout().substr(0, 2000);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(lines[i], match, kLine)) << lines[i];
    EXPECT_EQ(match[1], "2");
    const std::string want = i + 1 == lines.size()
                                 ? "done"
                                 : "line " + std::to_string(501 + i) + " of 2";
    EXPECT_EQ(match[2], want) << lines[i];
  }

  // Every rank, from both machines; and one machine's.
  auto all = Logs({});
  ASSERT_EQ(all->Wait(seconds(20)), 0) << all->Output();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(all->Stdout().find("[rank " + std::to_string(rank) + "] done"),
              std::string::npos)
        << rank;
  }
  auto machine = Logs({"--machine", "1"});
  ASSERT_EQ(machine->Wait(seconds(20)), 0) << machine->Output();
  EXPECT_EQ(machine->Stdout().find("[rank 0]"), std::string::npos);
  EXPECT_EQ(machine->Stdout().find("[rank 1]"), std::string::npos);
  EXPECT_NE(machine->Stdout().find("[rank 3] done"), std::string::npos);

  auto bad_rank = Logs({"--rank", "9"});
  EXPECT_EQ(bad_rank->Wait(seconds(20)), 2) << bad_rank->Output();
  EXPECT_NE(bad_rank->Stderr().find("rank 9 does not exist"), std::string::npos)
      << bad_rank->Stderr();
  auto bad_machine = Logs({"--machine", "5"});
  EXPECT_EQ(bad_machine->Wait(seconds(20)), 2) << bad_machine->Output();
  EXPECT_NE(bad_machine->Stderr().find("machine 5 does not exist"),
            std::string::npos)
      << bad_machine->Stderr();

  // Nothing without the token.
  Subprocess stranger({TRL_COORD_BIN, "logs", "--address", Address()},
                      {"TRL_AUTH_TOKEN=not-the-token"});
  EXPECT_EQ(stranger.Wait(seconds(20)), 1) << stranger.Output();
  EXPECT_EQ(stranger.Stdout(), "");

  coord->Signal(SIGINT);
  EXPECT_EQ(coord->Wait(seconds(30)), 128 + SIGINT) << coord->Output();
  EXPECT_EQ(agent->Wait(seconds(30)), 128 + SIGINT) << agent->Output();
}

// Rank 1 (on machine 1's agent) prints 100 MB/s (as far as it can) for
// 3.5 s, once alone and once with a `logs -f` client attached that reads
// slowly (a batch every 20 ms while the worker prints) and the coordinator
// frozen twice meanwhile (SIGSTOP: a stalled stream to the agent). With
// the client, the worker must keep at least half its throughput, the
// coordinator's memory must stay within 64 MiB of what it held before,
// and the client sees markers of dropped lines.
class LogsFloodTest : public LogsTest {
 protected:
  struct Run {
    double worker_mb_s = 0;
    long coord_rss_before_kib = 0;
    long coord_rss_max_kib = 0;
    long agent_rss_max_kib = 0;  // machine 1's, printed
    uint64_t client_lines = 0;
    uint64_t client_dropped = 0;
  };

  Run Flood(bool with_client) {
    Run run;
    const std::string go = dir_ + (with_client ? "/go-client" : "/go-alone");
    const std::string result = go + ".result";
    const std::string code =
        "import os, sys, time\n"
        "if os.environ['RANK'] != '1': sys.exit(0)\n"
        "print('ready', flush=True)\n"
        "while not os.path.exists('" +
        go +
        "'): time.sleep(0.01)\n"
        "line = b'x' * 199 + b'\\n'\n"
        "chunk = line * 320\n"
        "out = sys.stdout.buffer\n"
        "written = 0\n"
        "start = slot = time.monotonic()\n"
        "while time.monotonic() - start < 3.5:\n"
        "    out.write(chunk)\n"
        "    written += len(chunk)\n"
        // Paced at 100 MB/s with no catching up: time spent blocked on
        // the pipe is lost.
        "    slot = max(slot, time.monotonic()) + len(chunk) / 100e6\n"
        "    ahead = slot - time.monotonic()\n"
        "    if ahead > 0: time.sleep(ahead)\n"
        "out.flush()\n"
        "rate = written / (time.monotonic() - start) / 1e6\n"
        "open('" +
        result + "', 'w').write(str(rate))\n";
    // Machine 1's agent writes its console to /dev/null: the test measures
    // the agent's pump, not the disk.
    std::string agent_command =
        std::string("exec ") + TRL_AGENT_BIN + " --machine_rank 1";
    for (const auto& flag : ClusterFlags(2, 2)) agent_command += " " + flag;
    agent_command += " >/dev/null";
    Subprocess agent({"/bin/sh", "-c", agent_command});
    auto coord = StartCoordinator(2, 2, Python(code));
    WaitUntil(
        [&] {
          auto status = PsJson(port_);
          return status && status->ranks_size() == 2;
        },
        seconds(30));

    std::atomic<bool> stop{false};
    std::thread client;
    if (with_client) {
      LogsFlags flags;
      flags.connection.address = Address();
      auto connection =
          ConnectToCoordinator(flags.connection, kMaxLogBatchBytes);
      EXPECT_TRUE(connection.ok()) << connection.status();
      if (!connection.ok()) return run;
      std::atomic<bool> ready{false};
      client = std::thread([&, connection = std::move(*connection)]() mutable {
        grpc::ClientContext context;
        if (!connection.bearer.empty()) {
          context.AddMetadata(kAuthMetadataKey, connection.bearer);
        }
        pb::LogsRequest request;
        request.set_rank(1);
        request.set_follow(true);
        auto reader = connection.stub->StreamLogs(&context, request);
        pb::LogBatch batch;
        while (!stop && reader->Read(&batch)) {
          for (const auto& line : batch.lines()) {
            if (line.dropped() > 0) {
              run.client_dropped += line.dropped();
            } else {
              ++run.client_lines;
              if (line.text() == "ready") ready = true;
            }
          }
          // A slow reader while the worker prints; then it catches up
          // (the markers are queued behind the lines that fitted).
          if (!fs::exists(result))
            std::this_thread::sleep_for(milliseconds(20));
        }
        context.TryCancel();
        reader->Finish();
      });
      EXPECT_TRUE(WaitUntil([&] { return ready.load(); }, seconds(20)));
    }
    run.coord_rss_before_kib = ResidentKiB(coord->pid());
    std::ofstream(go) << "go";
    if (with_client) {
      // The coordinator frozen twice for 1.2 s (within the agents' 4 s
      // lease): its stream stalls, and machine 1's agent must drop lines
      // rather than stop reading its worker.
      for (int i = 0; i < 2; ++i) {
        std::this_thread::sleep_for(milliseconds(300));
        coord->Signal(SIGSTOP);
        std::this_thread::sleep_for(milliseconds(1200));
        coord->Signal(SIGCONT);
      }
    }
    while (!coord->Wait(milliseconds(100)).has_value()) {
      run.coord_rss_max_kib =
          std::max(run.coord_rss_max_kib, ResidentKiB(coord->pid()));
      run.agent_rss_max_kib =
          std::max(run.agent_rss_max_kib, ResidentKiB(agent.pid()));
      if (run.coord_rss_max_kib > 4 * 1024 * 1024) break;  // runaway
    }
    EXPECT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
    EXPECT_EQ(agent.Wait(seconds(30)), 0) << agent.Output();
    stop = true;
    if (client.joinable()) client.join();
    std::ifstream(result) >> run.worker_mb_s;
    return run;
  }
};

TEST_F(LogsFloodTest, ASlowClientNeitherSlowsTheWorkerNorGrowsTheCoordinator) {
  const Run alone = Flood(false);
  // A fresh port for the second job.
  port_ = FreePort();
  const Run watched = Flood(true);
  std::printf(
      "worker alone: %.1f MB/s; with a slow `logs -f` client: %.1f MB/s "
      "(%.2f); coordinator RSS %ld -> %ld KiB; machine 1's agent RSS at "
      "most %ld KiB alone, %ld KiB watched; client: %llu lines, %llu "
      "dropped\n",
      alone.worker_mb_s, watched.worker_mb_s,
      watched.worker_mb_s / std::max(alone.worker_mb_s, 1e-9),
      watched.coord_rss_before_kib, watched.coord_rss_max_kib,
      alone.agent_rss_max_kib, watched.agent_rss_max_kib,
      static_cast<unsigned long long>(watched.client_lines),
      static_cast<unsigned long long>(watched.client_dropped));
  ASSERT_GT(alone.worker_mb_s, 0);
  if (!kSanitized) {
    EXPECT_GE(watched.worker_mb_s, 0.5 * alone.worker_mb_s);
    EXPECT_LT(watched.coord_rss_max_kib - watched.coord_rss_before_kib,
              64 * 1024);
  }
  EXPECT_GT(watched.client_dropped, 0u);
  EXPECT_GT(watched.client_lines, 0u);
}

}  // namespace
}  // namespace trl::testing

// A worker's output through real pipes: memory stays bounded whatever the
// worker prints (a 5 MiB line, output without newlines), every byte still
// reaches the console, and a log file that cannot be written is reported.
// With the real binaries: a successful job that prints huge lines succeeds.
#include "agent/workers/worker_output.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

// Writes `text` into a pipe from another thread, then closes it; the read
// end goes to WorkerOutput as the worker's stdout.
class Writer {
 public:
  explicit Writer(std::string text) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    read_fd_ = fds[0];
    thread_ = std::thread([fd = fds[1], text = std::move(text)] {
      size_t done = 0;
      while (done < text.size()) {
        const ssize_t n = write(fd, text.data() + done, text.size() - done);
        if (n <= 0) break;
        done += n;
      }
      close(fd);
    });
  }
  ~Writer() { thread_.join(); }
  int read_fd() const { return read_fd_; }

 private:
  int read_fd_ = -1;
  std::thread thread_;
};

// Every line the console got (without the newline).
std::vector<std::string> ConsoleLines(FILE* file) {
  fflush(file);
  rewind(file);
  std::vector<std::string> lines;
  std::string line;
  int c;
  while ((c = fgetc(file)) != EOF) {
    if (c == '\n') {
      lines.push_back(line);
      line.clear();
    } else {
      line.push_back(static_cast<char>(c));
    }
  }
  return lines;
}

int DevNull() { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

struct Pumped {
  std::vector<std::string> console;
  std::vector<std::string> kept;
};

Pumped Pump(const std::string& text, const std::string& log_path = "") {
  FILE* file = tmpfile();
  Console console(file, file);
  Writer writer(text);
  Pumped run;
  {
    WorkerOutput output(3, writer.read_fd(), DevNull(), &console, log_path);
    output.Finish(10000);
    run.kept = output.LastLines();
  }
  run.console = ConsoleLines(file);
  fclose(file);
  return run;
}

constexpr size_t kMiB = 1024 * 1024;
const std::string kPrefix = "[rank 3] ";

TEST(WorkerOutputTest,
     AHugeLineReachesTheConsoleInBoundedPiecesAndIsKeptShort) {
  const Pumped run = Pump(std::string(5 * kMiB, 'x') + "\ndone\n");
  size_t bytes = 0;
  for (const auto& line : run.console) {
    ASSERT_EQ(line.rfind(kPrefix, 0), 0u) << line.substr(0, 40);
    EXPECT_LE(line.size(), kPrefix.size() + WorkerOutput::kMaxLineBytes);
    bytes += line.size() - kPrefix.size();
  }
  EXPECT_EQ(bytes, 5 * kMiB + 4);  // nothing lost
  EXPECT_EQ(run.console.back(), kPrefix + "done");
  ASSERT_FALSE(run.kept.empty());
  size_t kept_bytes = 0;
  for (const auto& line : run.kept) {
    EXPECT_LE(line.size(), WorkerOutput::kKeptLineBytes + 32) << line.size();
    kept_bytes += line.size();
  }
  EXPECT_LE(kept_bytes,
            WorkerOutput::kLinesKept * (WorkerOutput::kKeptLineBytes + 32));
  EXPECT_EQ(run.kept.back(), "done");
}

TEST(WorkerOutputTest, OutputWithoutNewlinesIsPassedOnAsItComes) {
  // 20 MiB and never a newline: the agent holds at most one piece of it.
  const Pumped run = Pump(std::string(20 * kMiB, 'y'));
  ASSERT_GE(run.console.size(), 20 * kMiB / WorkerOutput::kMaxLineBytes);
  size_t bytes = 0;
  for (const auto& line : run.console) {
    EXPECT_LE(line.size(), kPrefix.size() + WorkerOutput::kMaxLineBytes);
    bytes += line.size() - kPrefix.size();
  }
  EXPECT_EQ(bytes, 20 * kMiB);
  EXPECT_LE(run.kept.size(), WorkerOutput::kLinesKept);
}

TEST(WorkerOutputTest, KeptLinesSayHowMuchWasCut) {
  EXPECT_EQ(WorkerOutput::KeptLine("short"), "short");
  const std::string kept = WorkerOutput::KeptLine(std::string(5000, 'z'));
  EXPECT_EQ(kept, std::string(WorkerOutput::kKeptLineBytes, 'z') + "... [" +
                      std::to_string(5000 - WorkerOutput::kKeptLineBytes) +
                      " bytes cut]");
}

TEST(WorkerOutputTest, AFullLogDiskLosesNothingOnTheConsole) {
  // /dev/full fails every write with ENOSPC, as a full disk does.
  const Pumped run = Pump("one\ntwo\n", "/dev/full");
  EXPECT_EQ(run.console,
            (std::vector<std::string>{kPrefix + "one", kPrefix + "two"}));
}

// The real binaries: what the agent and coordinator do with it.
TEST_F(LauncherTest, HugeOutputLinesDoNotFailASuccessfulJob) {
  // 5 MiB on one line, then 20 lines of 256 KiB: together 10 MiB of "last
  // lines", more than one message may carry.
  const std::string script =
      "head -c 5242880 /dev/zero | tr '\\0' a; echo; "
      "for i in $(seq 20); do head -c 262144 /dev/zero | tr '\\0' b; echo; "
      "done; echo done";
  auto agent = StartAgent(2, 2, 1);
  auto coord =
      StartCoordinator(2, 2, {"/bin/sh", "-c", script}, {"--no_python"});
  ASSERT_EQ(coord->Wait(seconds(60)), 0) << coord->Stderr();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Stderr();
  EXPECT_NE(coord->Stdout().find("[rank 0] done"), std::string::npos);
  EXPECT_NE(agent->Stdout().find("[rank 1] done"), std::string::npos);
}

TEST_F(LauncherTest, AFailingJobReportsHugeLastLinesCut) {
  const std::string script =
      "head -c 5242880 /dev/zero | tr '\\0' a; echo; exit 3";
  auto coord =
      StartCoordinator(1, 1, {"/bin/sh", "-c", script}, {"--no_python"});
  ASSERT_EQ(coord->Wait(seconds(60)), 3) << coord->Stderr().substr(0, 4000);
  const std::string log = coord->Stderr();
  EXPECT_NE(log.find("exited with code 3"), std::string::npos);
  EXPECT_NE(log.find(" bytes cut]"), std::string::npos);
  EXPECT_LT(log.size(), 64u * 1024) << "the failure report is not bounded";
}

TEST_F(LauncherTest, AFailingRanksLastLinesThatAreNotUtf8ReachTheCoordinator) {
  // Bytes that are not UTF-8 (Latin-1, binary) in the last lines of a rank
  // on another machine: a proto3 string must be UTF-8, or the message does
  // not parse and the failure (and the agent's stream) is lost.
  const std::string script =
      "if [ \"$RANK\" = 1 ]; then printf 'caf\\351 \\377\\376 end\\n'; "
      "exit 3; fi; sleep 30";
  auto agent = StartAgent(2, 2, 1);
  auto coord =
      StartCoordinator(2, 2, {"/bin/sh", "-c", script}, {"--no_python"});
  ASSERT_EQ(coord->Wait(seconds(40)), 3) << coord->Stderr();
  EXPECT_EQ(agent->Wait(seconds(20)), 3) << agent->Stderr();
  const std::string log = coord->Stderr();
  EXPECT_NE(log.find("rank 1 (local rank 0 on machine 1"), std::string::npos)
      << log;
  EXPECT_NE(log.find(" end"), std::string::npos) << log;
}

TEST_F(LauncherTest, AnUnwritableLogDirIsReportedAndTheJobRuns) {
  // A regular file where the log directory should be.
  char path[] = "/tmp/trl-logdir-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  auto coord =
      StartCoordinator(1, 1, Worker(), {"--log_dir", std::string(path)});
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  unlink(path);
  EXPECT_NE(coord->Stderr().find("cannot open the log file"), std::string::npos)
      << coord->Stderr();
  RememberWorkerPids(coord->Stdout());
}

}  // namespace
}  // namespace trl::testing

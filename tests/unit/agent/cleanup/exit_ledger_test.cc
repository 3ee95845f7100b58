// The exit ledger (agent/cleanup/exit_ledger.h): its records, and real
// workers (forked children) whose exits are kept, read by a zombie's
// /proc entry as the guardian does, and read back by a later agent.
#include "agent/cleanup/exit_ledger.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "agent/procfs/process_facts.h"

namespace trl {
namespace {

namespace fs = std::filesystem;

constexpr char kCoordinator[] = "10.0.0.1:29500";
constexpr char kHost[] = "boot-1/pidns:4026531836";

TEST(ExitLedgerRecordTest, StartsAndExitsReadBackAsWritten) {
  const LedgerStart start{"job-7", 12, 3, 4242, 987654321ULL};
  const auto parsed = ParseStart(FormatStart(start));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->run_id, "job-7");
  EXPECT_EQ(parsed->generation, 12);
  EXPECT_EQ(parsed->local_rank, 3);
  EXPECT_EQ(parsed->pid, 4242);
  EXPECT_EQ(parsed->start_time, 987654321ULL);
  const auto exit = ParseExit(FormatExit(LedgerExit{0, 15}));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 0);
  EXPECT_EQ(exit->signal, 15);
}

TEST(ExitLedgerRecordTest, ARecordThatIsNotOneIsRefused) {
  EXPECT_FALSE(ParseStart("../etc 1 0 5 6\n"));  // not a job id
  EXPECT_FALSE(ParseStart("job 1 0 5\n"));       // a field short
  EXPECT_FALSE(ParseStart("job -1 0 5 6\n"));
  EXPECT_FALSE(ParseStart("job 1 0 0 6\n"));  // no pid
  EXPECT_FALSE(ParseStart("job 1 x 5 6\n"));
  EXPECT_FALSE(ParseExit("256 0\n"));
  EXPECT_FALSE(ParseExit("0 65\n"));
  EXPECT_FALSE(ParseExit("0\n"));
  EXPECT_FALSE(ParseExit(""));
}

TEST(ExitLedgerRecordTest, OnlyAWorkersOwnEndIsOne) {
  auto code = OwnEndFromWaitStatus(3 << 8);  // exit(3)
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(code->exit_code, 3);
  EXPECT_EQ(code->signal, 0);
  auto terminated = OwnEndFromWaitStatus(SIGTERM);
  ASSERT_TRUE(terminated.has_value());
  EXPECT_EQ(terminated->signal, SIGTERM);
  // A SIGKILL is the fence's (or the agent's), and -1 is no status.
  EXPECT_FALSE(OwnEndFromWaitStatus(SIGKILL));
  EXPECT_FALSE(OwnEndFromWaitStatus(-1));
}

TEST(ExitLedgerRecordTest, TheReportIsTheNewestGenerationOfItsJob) {
  std::vector<std::pair<LedgerStart, std::optional<LedgerExit>>> entries = {
      {{"job", 1, 0, 10, 1}, LedgerExit{1, 0}},
      {{"job", 2, 0, 20, 2}, LedgerExit{0, 0}},
      {{"job", 2, 1, 21, 2}, std::nullopt},  // still running, or not kept
      {{"job", 2, 2, 22, 2}, LedgerExit{0, 0}},
  };
  const LedgerReport report = ChooseReport(entries);
  EXPECT_EQ(report.run_id, "job");
  EXPECT_EQ(report.generation, 2);
  ASSERT_EQ(report.exits.size(), 2u);
  EXPECT_TRUE(report.exits.count(0));
  EXPECT_TRUE(report.exits.count(2));
  EXPECT_TRUE(ChooseReport({}).exits.empty());
}

TEST(ExitLedgerRecordTest, EachCoordinatorMachineAndHostHasItsOwnPlace) {
  const std::string name = LedgerDirName("[::1]:29500", 1, kHost);
  EXPECT_EQ(name.find('/'), std::string::npos);
  EXPECT_EQ(name.rfind("___1__29500.m1.", 0), 0u) << name;
  EXPECT_NE(name, LedgerDirName("[::1]:29500", 1, "another-boot/pidns:1"));
  EXPECT_NE(name, LedgerDirName("[::1]:29500", 2, kHost));
  EXPECT_NE(name, LedgerDirName("[::1]:29501", 1, kHost));
  EXPECT_EQ(LedgerDirName("../../x", 0, kHost).find('/'), std::string::npos);
}

// Children that stand for workers: each sleeps until killed, or exits
// with its code when its pipe closes.
class ExitLedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/trl-ledger-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    top_ = pattern;  // as $TMPDIR/trl-launch-<uid>: 0700, ours
    root_ = top_ + "/exits";
  }
  void TearDown() override {
    for (pid_t pid : children_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    std::error_code ignored;
    fs::remove_all(top_, ignored);
  }

  // A child that exits with `code` (or dies of `signal`) at once.
  pid_t ChildThatEnds(int code, int signal = 0) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (signal != 0) raise(signal);
      _exit(code);
    }
    children_.push_back(pid);
    return pid;
  }
  pid_t ChildThatSleeps() {
    const pid_t pid = fork();
    if (pid == 0) {
      pause();
      _exit(0);
    }
    children_.push_back(pid);
    return pid;
  }
  // Waits (without reaping) until `pid` is a zombie; with `whole`, until
  // its every thread is gone too (a zombie leader's other threads may
  // still be ending: under TSan every child has a second thread).
  static ProcessLinks ZombieLinks(pid_t pid, bool whole = true) {
    ProcessLinks links;
    for (int i = 0; i < 500; ++i) {
      if (ReadProcessLinks(pid, &links) && links.state == 'Z' &&
          (!whole || links.threads == 1)) {
        return links;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "pid " << pid << " never became a zombie";
    return links;
  }

  // A child whose main thread ends alone; its other thread exits 3 once
  // `*go_write` is closed.
  pid_t LeaderEndsAloneThenExits3(int* go_write);

  std::string top_;
  std::string root_;
  std::vector<pid_t> children_;
};

TEST_F(ExitLedgerTest, ALaterAgentReadsTheExitsTheAgentKept) {
  const ExitLedger ledger(root_, kCoordinator, 1, kHost);
  const pid_t a = ChildThatSleeps(), b = ChildThatSleeps();
  ledger.BeginGeneration("job", 4, {{0, a}, {1, b}});
  ledger.RecordExit(4, 0, LedgerExit{0, 0});
  ledger.RecordExit(4, 1, LedgerExit{2, 0});
  // An exit of a generation that has no start here is not kept.
  ledger.RecordExit(3, 0, LedgerExit{9, 0});
  const LedgerReport report = ExitLedger(root_, kCoordinator, 1, kHost).Read();
  EXPECT_EQ(report.run_id, "job");
  EXPECT_EQ(report.generation, 4);
  ASSERT_EQ(report.exits.size(), 2u);
  EXPECT_EQ(report.exits.at(1).exit_code, 2);
  // Another host, machine or coordinator reads nothing of it.
  EXPECT_TRUE(ExitLedger(root_, kCoordinator, 1, "other").Read().exits.empty());
  EXPECT_TRUE(ExitLedger(root_, kCoordinator, 0, kHost).Read().exits.empty());
  EXPECT_TRUE(ExitLedger(root_, "x:1", 1, kHost).Read().exits.empty());
  // The directory and its files are the user's alone.
  struct stat info;
  ASSERT_EQ(stat(ledger.dir().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 077, 0u);
}

TEST_F(ExitLedgerTest, ANewGenerationDropsTheLastAndClearDropsAll) {
  const ExitLedger ledger(root_, kCoordinator, 1, kHost);
  const ExitLedger other(root_, kCoordinator, 2, kHost);
  ledger.BeginGeneration("job", 1, {{0, ChildThatSleeps()}});
  ledger.RecordExit(1, 0, LedgerExit{0, 0});
  ledger.BeginGeneration("job", 2, {{0, ChildThatSleeps()}});
  LedgerReport report = ledger.Read();
  EXPECT_EQ(report.generation, 2);
  EXPECT_TRUE(report.exits.empty());
  ledger.Clear();
  EXPECT_FALSE(fs::exists(ledger.dir()));
  EXPECT_EQ(ledger.Read().generation, -1);
  // At an agent's orderly end nothing is left above it either, unless
  // another agent's ledger is there.
  other.BeginGeneration("job", 1, {{0, ChildThatSleeps()}});
  ledger.RemoveIfUnused();
  EXPECT_TRUE(fs::exists(other.dir()));
  other.RemoveIfUnused();
  EXPECT_FALSE(fs::exists(root_));
  EXPECT_FALSE(fs::exists(top_));
}

TEST_F(ExitLedgerTest, APlantedDirectoryIsNeverUsed) {
  // In a shared /tmp another user may make $TMPDIR/trl-launch-<uid> first
  // (or link it somewhere): nothing is written there, nothing removed.
  fs::remove_all(top_);
  ASSERT_EQ(mkdir(top_.c_str(), 0777), 0);
  ASSERT_EQ(chmod(top_.c_str(), 0777), 0);
  const ExitLedger ledger(root_, kCoordinator, 1, kHost);
  ledger.BeginGeneration("job", 1, {{0, ChildThatSleeps()}});
  EXPECT_FALSE(fs::exists(root_));
  ledger.RemoveIfUnused();
  fs::remove_all(top_);
  const std::string elsewhere = top_ + "-elsewhere";
  ASSERT_TRUE(fs::create_directory(elsewhere));
  fs::create_directory_symlink(elsewhere, top_);
  ledger.BeginGeneration("job", 1, {{0, ChildThatSleeps()}});
  EXPECT_TRUE(fs::is_empty(elsewhere));
  ledger.RemoveIfUnused();
  EXPECT_TRUE(fs::is_symlink(top_));
  fs::remove(top_);
  fs::remove_all(elsewhere);
}

TEST_F(ExitLedgerTest, AZombiesOwnEndIsKeptAsTheGuardianSeesIt) {
  const ExitLedger ledger(root_, kCoordinator, 1, kHost);
  const pid_t done = ChildThatEnds(0);
  const pid_t failed = ChildThatEnds(7);
  // Started before they end: the start times are read while they live,
  // as the agent does right after the fork.
  ZombieLinks(done);
  ZombieLinks(failed);
  ledger.BeginGeneration("job", 5, {{0, done}, {1, failed}});
  // Another host's guardian, or the guardian of another parent, writes
  // nothing.
  EXPECT_EQ(LedgerWatch(root_, "other").KeepEndsOfZombiesOf(getpid()), 0);
  EXPECT_EQ(LedgerWatch(root_, kHost).KeepEndsOfZombiesOf(getppid()), 0);
  LedgerWatch watch(root_, kHost);
  EXPECT_EQ(watch.KeepEndsOfZombiesOf(getpid()), 2);
  EXPECT_EQ(watch.KeepEndsOfZombiesOf(getpid()), 0);  // once
  const LedgerReport report = ledger.Read();
  ASSERT_EQ(report.exits.size(), 2u);
  EXPECT_EQ(report.exits.at(0).exit_code, 0);
  EXPECT_EQ(report.exits.at(1).exit_code, 7);
}

TEST_F(ExitLedgerTest, NoEndIsKeptOnceTheAgentBeganToStopItsWorkers) {
  const ExitLedger ledger(root_, kCoordinator, 1, kHost);
  const pid_t stopped = ChildThatEnds(0);
  const pid_t killed = ChildThatEnds(0, SIGKILL);
  ZombieLinks(stopped);
  ZombieLinks(killed);
  ledger.BeginGeneration("job", 6, {{0, stopped}, {1, killed}});
  // A SIGKILL is never a worker's own end (the fence sends it), and a
  // worker that exits 0 on the agent's SIGTERM did not finish.
  ledger.StoppingGeneration(6);
  EXPECT_EQ(LedgerWatch(root_, kHost).KeepEndsOfZombiesOf(getpid()), 0);
  EXPECT_TRUE(ledger.Read().exits.empty());
  // Without the stop, the SIGKILL is still not kept; the exit is.
  ledger.BeginGeneration("job", 7, {{0, stopped}, {1, killed}});
  EXPECT_EQ(LedgerWatch(root_, kHost).KeepEndsOfZombiesOf(getpid()), 1);
  const LedgerReport report = ledger.Read();
  ASSERT_EQ(report.exits.size(), 1u);
  EXPECT_TRUE(report.exits.count(0));
}

// A worker whose main thread ends first (pthread_exit): a zombie with
// exit_code 0 while its other thread runs on; the process's status is the
// last thread's exit (3 here). Linux 5.17 and later show that status once
// every thread has ended; an older kernel never does (the leader's 0).
pid_t ExitLedgerTest::LeaderEndsAloneThenExits3(int* go_write) {
  int go[2];
  if (pipe(go) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(go[1]);
    std::thread([fd = go[0]] {
      char c;
      while (read(fd, &c, 1) < 0) {
      }
      _exit(3);
    }).detach();
    syscall(SYS_exit, 0);  // this thread alone, as pthread_exit does
  }
  close(go[0]);
  children_.push_back(pid);
  *go_write = go[1];
  return pid;
}

TEST_F(ExitLedgerTest, ALeaderThatEndedAloneIsKeptOnlyWhereTheKernelTells) {
  for (const bool kernel_tells : {false, true}) {
    SCOPED_TRACE(kernel_tells ? "Linux 5.17 or later" : "an older kernel");
    if (kernel_tells && !KernelShowsProcessExitCode()) continue;
    int go = -1;
    const pid_t pid = LeaderEndsAloneThenExits3(&go);
    ASSERT_GT(pid, 0);
    const ExitLedger ledger(root_, kCoordinator, 1, kHost);
    ZombieLinks(pid, /*whole=*/false);
    ledger.BeginGeneration("job", 8, {{0, pid}});
    LedgerWatch watch(root_, kHost, kernel_tells);
    EXPECT_EQ(watch.KeepEndsOfZombiesOf(getpid()), 0);  // not while alone
    close(go);  // the last thread exits 3
    siginfo_t info{};
    ASSERT_EQ(waitid(P_PID, pid, &info, WEXITED | WNOWAIT), 0);
    EXPECT_EQ(info.si_status, 3);
    if (kernel_tells) {
      EXPECT_EQ(watch.KeepEndsOfZombiesOf(getpid()), 1);
      ASSERT_EQ(ledger.Read().exits.size(), 1u);
      EXPECT_EQ(ledger.Read().exits.at(0).exit_code, 3);
    } else {
      // Seen alone once, never written: /proc would say 0.
      EXPECT_EQ(watch.KeepEndsOfZombiesOf(getpid()), 0);
      EXPECT_TRUE(ledger.Read().exits.empty());
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
}

TEST_F(ExitLedgerTest, AProcessWhoseThreadsEndWithItsLeaderIsKept) {
  // exit(5) of a worker with threads (torch has dozens): the kernel ends
  // the leader and signals the other threads, which end when next
  // scheduled. Until they have, the leader is a zombie with threads > 1,
  // as after a pthread_exit, but the process is ending: read as often as
  // the guardian can, each such end is kept, with its code, whatever the
  // kernel. (Before, a leader seen so was taken to have ended alone.)
  int caught_ending = 0;
  for (const bool kernel_tells : {false, true}) {
    SCOPED_TRACE(kernel_tells ? "Linux 5.17 or later" : "an older kernel");
    const ExitLedger ledger(root_, kCoordinator, 1, kHost);
    LedgerWatch watch(root_, kHost, kernel_tells);
    for (int round = 0; round < 6; ++round) {
      int go[2];
      ASSERT_EQ(pipe(go), 0);
      const pid_t pid = fork();
      if (pid == 0) {
        close(go[1]);
        for (int i = 0; i < 6; ++i) {
          std::thread([] {
            for (volatile unsigned long spin = 0;; spin = spin + 1) {
            }
          }).detach();
        }
        char c;
        while (read(go[0], &c, 1) < 0) {
        }
        _exit(5);  // exit_group: every thread
      }
      close(go[0]);
      children_.push_back(pid);
      ledger.BeginGeneration("job", 9 + round, {{0, pid}});
      close(go[1]);
      ProcessLinks links;
      for (int i = 0; i < 200000; ++i) {
        watch.KeepEndsOfZombiesOf(getpid());
        if (!ReadProcessLinks(pid, &links) || links.state != 'Z') continue;
        if (links.threads > 1) ++caught_ending;
        if (links.threads == 1) break;
      }
      watch.KeepEndsOfZombiesOf(getpid());
      const LedgerReport report = ledger.Read();
      ASSERT_EQ(report.exits.size(), 1u) << "round " << round;
      EXPECT_EQ(report.exits.at(0).exit_code, 5);
    }
  }
  std::printf("caught %d reads of an ending leader with threads left\n",
              caught_ending);
}

TEST_F(ExitLedgerTest, ARecordOthersMayWriteIsNotRead) {
  const ExitLedger ledger(root_, kCoordinator, 1, kHost);
  ledger.BeginGeneration("job", 1, {{0, ChildThatSleeps()}});
  ledger.RecordExit(1, 0, LedgerExit{0, 0});
  ASSERT_EQ(ledger.Read().exits.size(), 1u);
  ASSERT_EQ(chmod((ledger.dir() + "/1.0.exit").c_str(), 0666), 0);
  EXPECT_TRUE(ledger.Read().exits.empty());
}

TEST_F(ExitLedgerTest, LedgersNothingWroteToForAWeekAreRemoved) {
  const ExitLedger old(root_, kCoordinator, 1, kHost);
  const ExitLedger fresh(root_, kCoordinator, 2, kHost);
  old.BeginGeneration("job", 1, {{0, ChildThatSleeps()}});
  fresh.BeginGeneration("job", 1, {{0, ChildThatSleeps()}});
  const auto week_ago =
      fs::file_time_type::clock::now() - std::chrono::hours(24 * 8);
  for (const auto& entry : fs::directory_iterator(old.dir())) {
    fs::last_write_time(entry.path(), week_ago);
  }
  fs::last_write_time(old.dir(), week_ago);
  EXPECT_EQ(PruneLedgers(root_, std::chrono::hours(24 * 7)), 1);
  EXPECT_FALSE(fs::exists(old.dir()));
  EXPECT_TRUE(fs::exists(fresh.dir()));
}

}  // namespace
}  // namespace trl

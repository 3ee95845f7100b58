// The agent's worker group with real processes: how starts and exits are
// reported, and what a stop sends.
#include "agent/workers/worker_group.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"

namespace trl {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

// What the group reported, in order.
class Recorder {
 public:
  struct Event {
    std::vector<StartedWorker> started;  // set for a start report
    int exited_rank = -1;                // set for an exit report
    WorkerOutcome outcome;
  };

  WorkerGroup::Events Events() {
    WorkerGroup::Events events;
    events.started = [this](const std::vector<StartedWorker>& workers) {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back({workers, -1, {}});
      added_.notify_all();
    };
    events.exited = [this](int local_rank, const WorkerOutcome& outcome) {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back({{}, local_rank, outcome});
      added_.notify_all();
    };
    return events;
  }
  // The same, with hangs reported (and left for a stop) rather than
  // killed at once.
  WorkerGroup::Events EventsWithHangReports() {
    WorkerGroup::Events events = Events();
    events.hung = [this](int local_rank, const std::string& reason) {
      std::lock_guard<std::mutex> lock(mutex_);
      hangs_.emplace_back(local_rank, reason);
      added_.notify_all();
    };
    return events;
  }
  // The hangs reported, once there is one (or after 10 s).
  std::vector<std::pair<int, std::string>> Hangs() {
    std::unique_lock<std::mutex> lock(mutex_);
    added_.wait_for(lock, seconds(10), [&] { return !hangs_.empty(); });
    return hangs_;
  }
  // The events once there are `count` (an exit is reported just after the
  // group counts the worker as exited).
  std::vector<Event> Seen(size_t count) {
    std::unique_lock<std::mutex> lock(mutex_);
    added_.wait_for(lock, seconds(10), [&] { return events_.size() >= count; });
    return events_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable added_;
  std::vector<Event> events_;
  std::vector<std::pair<int, std::string>> hangs_;
};

WorkerLaunch Shell(int local_rank, const std::string& script) {
  WorkerLaunch launch;
  launch.local_rank = local_rank;
  launch.rank = local_rank;
  launch.spec.executable = "/bin/sh";
  launch.spec.argv = {"/bin/sh", "-c", script};
  launch.spec.environment = {{"PATH", "/usr/bin:/bin"}};
  return launch;
}

class WorkerGroupTest : public ::testing::Test {
 protected:
  Console console_{stdout, stderr};
  Recorder recorder_;
};

TEST_F(WorkerGroupTest, StartsAreReportedInOneEventBeforeAnyExit) {
  WorkerGroup group(0, &console_, recorder_.Events(), seconds(5));
  std::vector<WorkerLaunch> launches;
  for (int local = 0; local < 4; ++local) launches.push_back(Shell(local, ""));
  WorkerLaunch missing = Shell(4, "");
  missing.spec.executable = "/nonexistent/worker";
  launches.push_back(missing);
  group.Start(std::move(launches));
  ASSERT_TRUE(group.WaitUntilAllExited(steady_clock::now() + seconds(10)));

  const auto seen = recorder_.Seen(6);
  ASSERT_EQ(seen.size(), 6u);  // one start report, five exits
  ASSERT_EQ(seen[0].started.size(), 4u);
  for (int local = 0; local < 4; ++local) {
    EXPECT_EQ(seen[0].started[local].local_rank, local);
    EXPECT_GT(seen[0].started[local].pid, 0);
  }
  // The worker that could not start comes first among the exits: it is
  // reported right after the starts, the others when they end.
  EXPECT_EQ(seen[1].exited_rank, 4);
  EXPECT_NE(seen[1].outcome.start_error.find("/nonexistent/worker"),
            std::string::npos)
      << seen[1].outcome.start_error;
  for (size_t i = 2; i < seen.size(); ++i) {
    EXPECT_TRUE(seen[i].started.empty());
    EXPECT_EQ(seen[i].outcome.exit.exit_code, 0);
    EXPECT_TRUE(seen[i].outcome.start_error.empty());
  }
}

// Starts a worker that runs `on_usr1` on SIGUSR1 and otherwise sleeps;
// returns once its trap is set.
void StartWorkerTrappingUsr1(WorkerGroup& group, const std::string& on_usr1) {
  const std::string ready =
      ::testing::TempDir() + "/trl-group-ready-" + std::to_string(getpid());
  std::filesystem::remove(ready);
  group.Start({Shell(0, "trap '" + on_usr1 + "' USR1; : > " + ready +
                            "; while true; do sleep 0.05; done")});
  const auto deadline = steady_clock::now() + seconds(10);
  while (!std::filesystem::exists(ready) && steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_TRUE(std::filesystem::exists(ready));
  std::filesystem::remove(ready);
}

void StartWorkerThatExitsOnUsr1(WorkerGroup& group) {
  StartWorkerTrappingUsr1(group, "exit 0");
}

TEST_F(WorkerGroupTest, StopSendsTheSignalThenKillsAfterTheGrace) {
  WorkerGroup group(0, &console_, recorder_.Events(), milliseconds(300));
  StartWorkerThatExitsOnUsr1(group);
  group.Stop(StopSignal{SIGUSR1});
  ASSERT_TRUE(group.WaitUntilAllExited(steady_clock::now() + seconds(10)));
  const auto seen = recorder_.Seen(2);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].outcome.exit.signal, 0);
  EXPECT_EQ(seen[1].outcome.exit.exit_code, 0);
}

TEST_F(WorkerGroupTest, StopOfASignalTheWorkersHaveOnlyKillsAfterTheGrace) {
  // Slurm sent the signal to the workers itself: the group sends nothing
  // more until the grace period ends, then SIGKILL.
  WorkerGroup group(0, &console_, recorder_.Events(), milliseconds(300));
  StartWorkerThatExitsOnUsr1(group);
  group.Stop(StopSignal{SIGUSR1, /*workers_have_it=*/true});
  ASSERT_TRUE(group.WaitUntilAllExited(steady_clock::now() + seconds(10)));
  const auto seen = recorder_.Seen(2);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].outcome.exit.signal, SIGKILL);
}

TEST_F(WorkerGroupTest, AShorterGraceCutsTheRunningOneShort) {
  // An orderly stop gives 60 s; the lease then runs out: the fence's
  // 200 ms grace wins, and the worker (deaf to SIGUSR1) is killed.
  WorkerGroup group(0, &console_, recorder_.Events(), seconds(60));
  StartWorkerTrappingUsr1(group, "");
  group.Stop(StopSignal{SIGUSR1});
  EXPECT_FALSE(
      group.WaitUntilAllExited(steady_clock::now() + milliseconds(500)));
  group.Stop(StopSignal{SIGTERM, /*workers_have_it=*/true}, milliseconds(200));
  ASSERT_TRUE(group.WaitUntilAllExited(steady_clock::now() + seconds(10)));
  const auto seen = recorder_.Seen(2);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].outcome.exit.signal, SIGKILL);
}

TEST_F(WorkerGroupTest, AnExitBeforeTheStopIsTheWorkersOwnEvenIfReadAfter) {
  // The worker exits 0 at once, but a child in a session of its own holds
  // its output open, so the group reads its end only after the stop (as a
  // frozen agent, thawed, reads its workers' exits after the loss): that
  // exit is the worker's own, not the stop's.
  WorkerGroup group(0, &console_, recorder_.Events(), seconds(5));
  group.Start({Shell(0, "setsid sleep 1 & exit 0")});
  recorder_.Seen(1);
  std::this_thread::sleep_for(milliseconds(150));
  group.Stop(StopSignal{SIGTERM});
  ASSERT_TRUE(group.WaitUntilAllExited(steady_clock::now() + seconds(10)));
  const auto seen = recorder_.Seen(2);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].outcome.exit.exit_code, 0);
  EXPECT_TRUE(seen[1].outcome.own_end);

  // One that the stop ended is not.
  WorkerGroup stopped(1, &console_, recorder_.Events(), seconds(5));
  StartWorkerThatExitsOnUsr1(stopped);
  stopped.Stop(StopSignal{SIGUSR1});
  ASSERT_TRUE(stopped.WaitUntilAllExited(steady_clock::now() + seconds(10)));
  const auto later = recorder_.Seen(4);
  ASSERT_EQ(later.size(), 4u);
  EXPECT_FALSE(later[3].outcome.own_end);
}

// The hang watch samples every 5 s with the default timeouts; a group that
// ends (its workers done) must not wait for its next look. It once did,
// whenever the end came while the watch was not yet waiting: a no-op job
// took 5 s instead of 0.07 s in 2 of 5 benchmark runs.
TEST_F(WorkerGroupTest, TheHangWatchDoesNotHoldUpTheGroupsEnd) {
  HangOptions hangs;
  hangs.detect.output_timeout = seconds(900);
  hangs.detect.cpu_timeout = seconds(600);
  ASSERT_EQ(hangs.detect.SamplePeriod(), milliseconds(5000));
  const auto started = steady_clock::now();
  for (int i = 0; i < 5; ++i) {
    WorkerGroup group(i, &console_, recorder_.Events(), seconds(5), hangs);
    group.Start({Shell(0, "exit 0")});
    ASSERT_TRUE(group.WaitUntilAllExited(steady_clock::now() + seconds(10)));
  }
  // Five groups, each ended at once: far less than one 5 s period.
  EXPECT_LT(steady_clock::now() - started, milliseconds(4000));
}

// A worker that touches its heartbeat file with mtimes far in the past (its
// wall clock, or ours, stepped): each touch still proves it alive.
TEST_F(WorkerGroupTest, TouchesCountWhateverTheWallClockSays) {
  const std::string file =
      ::testing::TempDir() + "/trl-hb-past-" + std::to_string(getpid());
  WorkerGroup group(0, &console_, recorder_.Events(), seconds(5),
                    HangOptions::HeartbeatFile(milliseconds(600)));
  WorkerLaunch launch = Shell(
      0, "i=0; while [ $i -lt 20 ]; do i=$((i+1)); touch -d @$((1000000+i)) " +
             file + "; sleep 0.1; done");
  launch.heartbeat_path = file;
  group.Start({launch});
  ASSERT_TRUE(group.WaitUntilAllExited(steady_clock::now() + seconds(20)));
  const auto seen = recorder_.Seen(2);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].outcome.exit.signal, 0) << seen[1].outcome.reason;
  EXPECT_EQ(seen[1].outcome.exit.exit_code, 0);
  EXPECT_TRUE(seen[1].outcome.reason.empty()) << seen[1].outcome.reason;
  std::filesystem::remove(file);
}

// A worker whose one touch carries an mtime an hour ahead, then hangs: it
// is hung all the same, after the timeout.
TEST_F(WorkerGroupTest, AHangIsFoundWhenTheLastTouchIsInTheFuture) {
  const std::string file =
      ::testing::TempDir() + "/trl-hb-future-" + std::to_string(getpid());
  WorkerGroup group(0, &console_, recorder_.Events(), seconds(5),
                    HangOptions::HeartbeatFile(milliseconds(600)));
  WorkerLaunch launch =
      Shell(0, "touch -d @$(( $(date +%s) + 3600 )) " + file + "; sleep 30");
  launch.heartbeat_path = file;
  group.Start({launch});
  ASSERT_TRUE(group.WaitUntilAllExited(steady_clock::now() + seconds(20)));
  const auto seen = recorder_.Seen(2);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].outcome.exit.signal, SIGKILL);
  EXPECT_NE(seen[1].outcome.reason.find("hung"), std::string::npos);
  std::filesystem::remove(file);
}

// A stop for a failure captures before its signal; a py-spy that does not
// answer would hold the capture up to its 5 s. A second stop order (a
// second Ctrl-C) kills that py-spy: the capture ends at once, said so.
TEST_F(WorkerGroupTest, ASecondStopCutsARunningPySpyShort) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("trl-py-spy-cut-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path started = dir / "started";
  const fs::path stacks = dir / "rank0.stacks.txt";
  HangOptions hangs;
  hangs.py_spy = (dir / "py-spy").string();
  std::ofstream(hangs.py_spy)
      << "#!/bin/sh\n: > " << started.string() << "\nexec sleep 30\n";
  fs::permissions(hangs.py_spy, fs::perms::owner_all);
  WorkerLaunch launch = Shell(0, "exec sleep 30");
  launch.stacks_path = stacks.string();
  steady_clock::time_point second_stop;
  {
    WorkerGroup group(0, &console_, recorder_.Events(), seconds(5), hangs);
    group.Start({launch});
    recorder_.Seen(1);
    group.Stop(StopSignal{SIGTERM}, std::nullopt, /*capture_first=*/true);
    const auto deadline = steady_clock::now() + seconds(10);
    while (!fs::exists(started) && steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    ASSERT_TRUE(fs::exists(started));
    second_stop = steady_clock::now();
    group.Stop(StopSignal{SIGKILL});
    ASSERT_TRUE(group.WaitUntilAllExited(second_stop + seconds(10)));
  }  // the group's end waits for its capture thread
  EXPECT_LT(steady_clock::now() - second_stop, milliseconds(2000));
  std::stringstream text;
  text << std::ifstream(stacks).rdbuf();
  EXPECT_NE(text.str().find("py-spy: cut short"), std::string::npos)
      << text.str();
  fs::remove_all(dir);
}

// A failure's stop that arrives while a hang's capture reads the workers
// waits for that capture before it signals: a signal sent meanwhile would
// move the workers the capture is still reading (on another machine, a
// peer's kill wakes a rank from its collective). The worker's exit then
// carries where it stood.
TEST_F(WorkerGroupTest, AStopWaitsForAHangsCaptureUnderWay) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("trl-capture-wait-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path started = dir / "started";
  const fs::path release = dir / "release";
  HangOptions hangs;
  hangs.detect.cpu_timeout = milliseconds(300);
  hangs.detect.output_timeout = seconds(0);
  hangs.py_spy = (dir / "py-spy").string();
  // A py-spy that answers when the test says so.
  std::ofstream(hangs.py_spy)
      << "#!/bin/sh\n: > " << started.string() << "\nwhile [ ! -e "
      << release.string() << " ]; do sleep 0.05; done\n";
  fs::permissions(hangs.py_spy, fs::perms::owner_all);
  WorkerLaunch launch = Shell(0, "exec sleep 30");
  launch.stacks_path = (dir / "rank0.stacks.txt").string();
  {
    WorkerGroup group(0, &console_, recorder_.Events(), seconds(5), hangs);
    group.Start({launch});
    recorder_.Seen(1);
    const auto deadline = steady_clock::now() + seconds(10);
    while (!fs::exists(started) && steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    ASSERT_TRUE(fs::exists(started)) << "the hang's capture never began";
    group.Stop(StopSignal{SIGTERM}, std::nullopt, /*capture_first=*/true);
    std::this_thread::sleep_for(milliseconds(500));
    EXPECT_FALSE(group.WaitUntilAllExited(steady_clock::now()))
        << "the stop signalled while the hang's capture read the worker";
    std::ofstream(release.string()).put('\n');
    ASSERT_TRUE(group.WaitUntilAllExited(steady_clock::now() + seconds(10)));
  }
  const auto events = recorder_.Seen(2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].exited_rank, 0);
  EXPECT_EQ(events[1].outcome.exit.signal, SIGTERM)
      << "killed by the hang (SIGKILL) rather than stopped";
  EXPECT_FALSE(events[1].outcome.where.empty());
  EXPECT_FALSE(events[1].outcome.own_end);
  fs::remove_all(dir);
}

// A hang reported to the coordinator (Events::hung) is not killed: the
// coordinator stops the generation once every machine has read its
// workers. The stop's signal kills the hung worker (SIGKILL: no
// checkpoint to save) and its exit says it was hung.
TEST_F(WorkerGroupTest, AHangReportedIsLeftForTheStopWhichKillsIt) {
  HangOptions hangs;
  hangs.detect.cpu_timeout = milliseconds(300);
  hangs.detect.output_timeout = seconds(0);
  WorkerGroup group(0, &console_, recorder_.EventsWithHangReports(), seconds(5),
                    hangs);
  group.Start({Shell(0, "exec sleep 30")});
  recorder_.Seen(1);
  const auto reported = recorder_.Hangs();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0].first, 0);
  EXPECT_NE(reported[0].second.find("hung: its processes used less than 1%"),
            std::string::npos)
      << reported[0].second;
  EXPECT_NE(reported[0].second.find("state S (sleeping)"), std::string::npos)
      << reported[0].second;
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_FALSE(group.WaitUntilAllExited(steady_clock::now()))
      << "the hung worker was killed before the coordinator's stop";
  group.Stop(StopSignal{SIGTERM}, std::nullopt, /*capture_first=*/true);
  ASSERT_TRUE(group.WaitUntilAllExited(steady_clock::now() + seconds(10)));
  const auto events = recorder_.Seen(2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].outcome.exit.signal, SIGKILL);
  EXPECT_NE(events[1].outcome.reason.find("hung"), std::string::npos);
  EXPECT_TRUE(absl::EndsWith(events[1].outcome.reason, "; killed"))
      << events[1].outcome.reason;
  EXPECT_FALSE(events[1].outcome.where.empty());
}

// No stop comes for a hang reported (a coordinator too old to know the
// report, a cut link): the group kills the hung worker itself after its
// stop_wait.
TEST_F(WorkerGroupTest, AHangWithoutAStopIsKilledAfterTheWait) {
  HangOptions hangs;
  hangs.detect.cpu_timeout = milliseconds(300);
  hangs.detect.output_timeout = seconds(0);
  hangs.stop_wait = milliseconds(700);
  WorkerGroup group(0, &console_, recorder_.EventsWithHangReports(), seconds(5),
                    hangs);
  group.Start({Shell(0, "exec sleep 30")});
  recorder_.Seen(1);
  ASSERT_EQ(recorder_.Hangs().size(), 1u);
  ASSERT_TRUE(group.WaitUntilAllExited(steady_clock::now() + seconds(10)));
  const auto events = recorder_.Seen(2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].outcome.exit.signal, SIGKILL);
  EXPECT_TRUE(absl::EndsWith(events[1].outcome.reason, "; killed"))
      << events[1].outcome.reason;
}

// Waits until process `pid` sleeps (state S in /proc/PID/stat), at most
// `limit`: a worker just started may still be running on its way into its
// sleep (CI once captured "state R (running)" there).
bool WaitUntilAsleep(int pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t name_end = line.rfind(')');
    if (name_end != std::string::npos && name_end + 2 < line.size() &&
        line[name_end + 2] == 'S') {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The first half of a failure's stop: where each worker stands is kept,
// no signal is sent, and the group says when it is done. The stop that
// follows signals at once (nothing left to read), and the exit carries
// where the worker stood.
TEST_F(WorkerGroupTest, ACaptureBeforeTheStopReadsWithoutASignal) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("trl-early-capture-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  WorkerLaunch launch = Shell(0, "exec sleep 30");
  launch.stacks_path = (dir / "rank0.stacks.txt").string();
  WorkerGroup group(0, &console_, recorder_.Events(), seconds(5));
  group.Start({launch});
  const auto started = recorder_.Seen(1);
  ASSERT_EQ(started.size(), 1u);
  ASSERT_EQ(started[0].started.size(), 1u);
  ASSERT_TRUE(WaitUntilAsleep(started[0].started[0].pid, seconds(5)));
  std::mutex mutex;
  std::condition_variable said;
  bool captured = false;
  group.CaptureBeforeTheStop([&] {
    std::lock_guard<std::mutex> lock(mutex);
    captured = true;
    said.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    ASSERT_TRUE(said.wait_for(lock, seconds(10), [&] { return captured; }));
  }
  std::stringstream text;
  text << std::ifstream(launch.stacks_path).rdbuf();
  EXPECT_NE(text.str().find("rank 0: state S (sleeping)"), std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("generation 0 was stopped for a failure"),
            std::string::npos)
      << text.str();
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_FALSE(group.WaitUntilAllExited(steady_clock::now()))
      << "the capture signalled the worker";
  const auto stop_at = steady_clock::now();
  group.Stop(StopSignal{SIGTERM}, std::nullopt, /*capture_first=*/true);
  ASSERT_TRUE(group.WaitUntilAllExited(steady_clock::now() + seconds(10)));
  EXPECT_LT(steady_clock::now() - stop_at, milliseconds(2000));
  const auto events = recorder_.Seen(2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].outcome.exit.signal, SIGTERM);
  EXPECT_NE(events[1].outcome.where.find("state S (sleeping)"),
            std::string::npos)
      << events[1].outcome.where;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trl

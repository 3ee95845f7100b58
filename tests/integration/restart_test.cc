// Failures and restarts with the real binaries on loopback: a worker killed
// with SIGKILL, a hung worker, a killed agent that comes back, a budget that
// runs out, an exit code not worth a restart, a grandchild that ignores
// SIGTERM. Every test also checks the invariants: every rank of a
// generation agreeing on its number, nothing left behind, and (where a job
// restarts across machines) one generation at a time, from the workers'
// own start and end records.
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <thread>

#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

// A worker as a shell script (the command, not a shell of ours): it prints
// "pid P gen G rank R", then runs `gen0` in generation 0 and `later` after.
std::vector<std::string> Script(const std::string& gen0,
                                const std::string& later) {
  return {"/bin/sh", "-c",
          "echo \"pid $$ gen $TORCHELASTIC_RESTART_COUNT rank $RANK\"; "
          "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then " +
              gen0 + "; else " + later + "; fi"};
}

// Seconds since the epoch, the clock of `date +%s.%N` in the workers.
double WallSeconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A worker, as tests/lib/generations.sh's: it appends "start gen G rank R
// pid P at T" and "end gen G rank R pid P at T" lines (T in seconds since
// the epoch) to `records`, and prints "pid P gen G rank R". Generation 0
// runs until stopped and takes 0.5 s to stop after SIGTERM (so that a next
// generation started without waiting for it would overlap it); later
// generations exit 0 after 0.3 s.
std::vector<std::string> RecordingWorker(const std::string& records) {
  const std::string line =
      "gen $g rank $RANK pid $$ at $(date +%s.%N)\" >>'" + records + "'";
  return {"/bin/sh", "-c",
          "g=$TORCHELASTIC_RESTART_COUNT; "
          "echo \"pid $$ gen $g rank $RANK\"; "
          "echo \"start " +
              line + "; trap 'sleep 0.5; echo \"end " + line +
              "; exit 0' TERM; "
              "if [ \"$g\" = 0 ]; then while :; do sleep 0.1; done; fi; "
              "sleep 0.3; echo \"end " +
              line};
}

// One generation at a time: every worker of a generation ended before any
// worker of a later generation started, from the records RecordingWorker
// wrote. A worker killed with SIGKILL cannot record its end: `ended_by`
// gives for its pid a time by which it had ended (when the test killed it,
// or saw it gone). A worker with neither is a failure, and counts as
// running still when any later generation started.
void ExpectOneGenerationAtATime(const std::string& records,
                                const std::map<pid_t, double>& ended_by) {
  struct Life {
    int generation = -1;
    double start = -1, end = -1;
  };
  std::map<pid_t, Life> lives;
  std::ifstream in(records);
  std::string kind, gen_word, rank_word, pid_word, at_word;
  int generation, rank;
  pid_t pid;
  double at;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    if (!(fields >> kind >> gen_word >> generation >> rank_word >> rank >>
          pid_word >> pid >> at_word >> at)) {
      ADD_FAILURE() << "a record that does not parse: " << line;
      continue;
    }
    Life& life = lives[pid];
    life.generation = generation;
    (kind == "start" ? life.start : life.end) = at;
  }
  ASSERT_FALSE(lives.empty()) << "no worker wrote to " << records;
  std::map<int, double> first_start, last_end;
  for (auto& [pid, life] : lives) {
    if (life.end < 0 && ended_by.count(pid)) life.end = ended_by.at(pid);
    EXPECT_GE(life.start, 0) << "pid " << pid << " never started";
    if (life.end < 0) {
      // Never seen to end: it may have outlived every later generation.
      ADD_FAILURE() << "pid " << pid << " of generation " << life.generation
                    << ": no record of its end";
      life.end = std::numeric_limits<double>::infinity();
    }
    const int g = life.generation;
    if (!first_start.count(g)) first_start[g] = life.start;
    first_start[g] = std::min(first_start[g], life.start);
    last_end[g] = std::max(last_end.count(g) ? last_end[g] : -1, life.end);
  }
  for (const auto& [g, ended] : last_end) {
    for (const auto& [h, started] : first_start) {
      if (h > g) {
        EXPECT_LT(ended, started)
            << "generation " << g << " still ran (until " << std::fixed << ended
            << ") when generation " << h << " started (at " << started << ")";
      }
    }
  }
}

// The time of day (seconds) of the last log line "HH:MM:SS.mmm ..." in
// `log` that holds `text`; -1 if none.
double LoggedAt(const std::string& log, const std::string& text) {
  std::istringstream lines(log);
  std::string line;
  double at = -1;
  while (std::getline(lines, line)) {
    int h, m;
    double s;
    if (line.find(text) != std::string::npos &&
        std::sscanf(line.c_str(), "%d:%d:%lf", &h, &m, &s) == 3) {
      at = h * 3600 + m * 60 + s;
    }
  }
  return at;
}

struct Sighting {
  pid_t pid;
  int generation;
  int rank;
};

std::vector<Sighting> Sightings(const std::string& output) {
  static const std::regex pattern("pid ([0-9]+) gen ([0-9]+) rank ([0-9]+)");
  std::vector<Sighting> seen;
  for (std::sregex_iterator it(output.begin(), output.end(), pattern), end;
       it != end; ++it) {
    seen.push_back(
        {std::stoi((*it)[1]), std::stoi((*it)[2]), std::stoi((*it)[3])});
  }
  return seen;
}

class RestartTest : public LauncherTest {
 protected:
  // A fresh file for RecordingWorker's records, removed after the test.
  std::string RecordsFile() {
    records_ = ::testing::TempDir() + "/trl-generations-" +
               std::to_string(getpid()) + "-" + std::to_string(port_) + ".log";
    std::filesystem::remove(records_);
    return records_;
  }
  void TearDown() override {
    LauncherTest::TearDown();
    if (!records_.empty()) std::filesystem::remove(records_);
  }

  // Invariant 2 for every generation seen: ranks 0..world-1 once each.
  // With `all_printed` false, a rank may be missing: one its peer's quick
  // failure stopped before it printed anything.
  void ExpectGenerations(const std::string& output, int generations,
                         int world_size, bool all_printed = true) {
    std::map<int, std::multiset<int>> ranks_by_generation;
    for (const auto& s : Sightings(output)) {
      ranks_by_generation[s.generation].insert(s.rank);
      worker_pids_.insert(s.pid);
    }
    EXPECT_EQ(static_cast<int>(ranks_by_generation.size()), generations)
        << output;
    for (const auto& [generation, ranks] : ranks_by_generation) {
      if (all_printed) {
        EXPECT_EQ(static_cast<int>(ranks.size()), world_size)
            << "generation " << generation << "\n"
            << output;
      }
      for (int rank : ranks) {
        EXPECT_TRUE(rank >= 0 && rank < world_size) << rank;
      }
      for (int rank = 0; rank < world_size; ++rank) {
        EXPECT_LE(ranks.count(rank), 1u)
            << "rank " << rank << " of generation " << generation;
        if (all_printed) {
          EXPECT_EQ(ranks.count(rank), 1u)
              << "rank " << rank << " of generation " << generation;
        }
      }
    }
  }

  // Waits until the first generation has all `world_size` workers printed in
  // `outputs` and returns their sightings.
  std::string records_;

  std::vector<Sighting> WaitForGeneration0(
      const std::vector<Subprocess*>& processes, int world_size) {
    std::vector<Sighting> seen;
    WaitUntil(
        [&] {
          std::string all;
          for (auto* p : processes) all += p->Stdout();
          seen.clear();
          for (const auto& s : Sightings(all)) {
            if (s.generation == 0) seen.push_back(s);
          }
          return static_cast<int>(seen.size()) == world_size;
        },
        seconds(30));
    return seen;
  }
};

TEST_F(RestartTest, KilledWorkerRestartsTheJobWhichThenSucceeds) {
  const std::string records = RecordsFile();
  auto agent = StartAgent(2, 4, 1);
  auto coord =
      StartCoordinator(2, 4, RecordingWorker(records), {"--max_restarts", "2"});
  const auto gen0 = WaitForGeneration0({coord.get(), agent.get()}, 4);
  ASSERT_EQ(gen0.size(), 4u) << coord->Output() << agent->Output();
  std::map<pid_t, double> ended_by;
  for (const auto& s : gen0) {
    if (s.rank == 2) {  // a worker on machine 1
      kill(s.pid, SIGKILL);
      ended_by[s.pid] = WallSeconds();
    }
  }
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
  // Generation 0 and 1, each with ranks 0..3 agreeing on the count.
  ExpectGenerations(coord->Stdout() + agent->Stdout(), 2, 4);
  ExpectOneGenerationAtATime(records, ended_by);
  EXPECT_NE(coord->Stderr().find("rank 2 (local rank 0 on machine 1, host"),
            std::string::npos);
  EXPECT_NE(coord->Stderr().find("was killed by signal 9 (SIGKILL)"),
            std::string::npos);
  EXPECT_NE(coord->Stderr().find("restarts used 1 of 2"), std::string::npos)
      << coord->Stderr();
}

TEST_F(RestartTest, HungWorkerIsNoticedAndRestarted) {
  // Generation 0 never touches its heartbeat file; generation 1 does and
  // exits.
  auto coord = StartCoordinator(
      1, 2, Script("exec sleep 60", "touch \"$TRL_HEARTBEAT_FILE\"; exit 0"),
      {"--max_restarts", "1", "--worker_heartbeat_timeout", "1"});
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  ExpectGenerations(coord->Stdout(), 2, 2);
  EXPECT_NE(coord->Stderr().find("hung: no heartbeat in TRL_HEARTBEAT_FILE"),
            std::string::npos)
      << coord->Stderr();
}

TEST_F(RestartTest, KilledAgentIsNoticedAndTheJobRestartsWhenItIsBack) {
  const std::string records = RecordsFile();
  auto agent = StartAgent(2, 4, 1);
  auto coord =
      StartCoordinator(2, 4, RecordingWorker(records), {"--max_restarts", "1"});
  const auto gen0 = WaitForGeneration0({coord.get(), agent.get()}, 4);
  ASSERT_EQ(gen0.size(), 4u) << coord->Output() << agent->Output();
  for (const auto& s : gen0) worker_pids_.insert(s.pid);
  const auto killed_at = std::chrono::steady_clock::now();
  agent->Signal(SIGKILL);
  ASSERT_TRUE(coord->WaitForOutput("stopping generation 0", seconds(10)))
      << coord->Output();
  // Noticed well within the 3 s bound (the stream breaks at once here).
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, seconds(3));
  ASSERT_TRUE(coord->WaitForOutput("disconnected", seconds(5)));
  // Machine 1's generation-0 workers died with their agent (SIGKILL: no
  // record of their end; they had ended when seen gone).
  std::map<pid_t, double> ended_by;
  for (const auto& s : gen0) {
    if (s.rank >= 2) {
      EXPECT_TRUE(WaitUntil([&] { return !ProcessExists(s.pid); }, seconds(5)));
      ended_by[s.pid] = WallSeconds();
    }
  }
  // Waiting for the machine to rejoin costs the coordinator next to no CPU
  // (it once ticked in a loop after the backoff: 2 cores at 100 %).
  const double cpu_before = CpuSecondsOf(coord->pid());
  std::this_thread::sleep_for(seconds(2));
  const double waiting_cpu = CpuSecondsOf(coord->pid()) - cpu_before;
  EXPECT_LT(waiting_cpu, 0.5) << "CPU seconds while waiting 2 s for a rejoin";
  auto again = StartAgent(2, 4, 1);
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  ASSERT_EQ(again->Wait(seconds(30)), 0) << again->Output();
  const std::string out = coord->Stdout() + agent->Stdout() + again->Stdout();
  ExpectGenerations(out, 2, 4);
  ExpectOneGenerationAtATime(records, ended_by);
}

TEST_F(RestartTest, RestartedCoordinatorResumesTheJob) {
  const std::string state_file =
      ::testing::TempDir() + "/trl-coord-" + std::to_string(port_) + ".state";
  const std::vector<std::string> flags = {"--state_file", state_file};
  auto agent = StartAgent(2, 4, 1);
  auto coord = StartCoordinator(2, 4, Script("exec sleep 60", "exit 0"), flags);
  const auto gen0 = WaitForGeneration0({coord.get(), agent.get()}, 4);
  ASSERT_EQ(gen0.size(), 4u) << coord->Output() << agent->Output();
  for (const auto& s : gen0) worker_pids_.insert(s.pid);
  coord->Signal(SIGKILL);
  ASSERT_EQ(coord->Wait(seconds(10)), 128 + SIGKILL);
  // Every worker of generation 0 stops: machine 0's died with the process,
  // machine 1's agent stops its own within the lease.
  for (const auto& s : gen0) {
    EXPECT_TRUE(WaitUntil([&] { return !ProcessExists(s.pid); }, seconds(8)))
        << "rank " << s.rank << " (pid " << s.pid << ") still runs";
  }
  auto again = StartCoordinator(2, 4, Script("exec sleep 60", "exit 0"), flags);
  ASSERT_EQ(again->Wait(seconds(30)), 0) << again->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
  EXPECT_NE(again->Stderr().find("resuming job"), std::string::npos)
      << again->Stderr();
  ExpectGenerations(coord->Stdout() + again->Stdout() + agent->Stdout(), 2, 4);
  // The job ended: nothing is left to resume.
  EXPECT_FALSE(std::filesystem::exists(state_file));
  // Its history is kept, the first coordinator's included.
  Subprocess events({TRL_COORD_BIN, "events", "--state_file", state_file});
  ASSERT_EQ(events.Wait(seconds(10)), 0) << events.Output();
  const std::string history = events.Stdout();
  const std::vector<std::string> expected = {
      "gen 0    generation", "resumes the job after generation 0",
      "gen 1    generation", "finished        job        succeeded"};
  size_t at = 0;
  for (const auto& line : expected) {
    at = history.find(line, at);
    ASSERT_NE(at, std::string::npos) << "no '" << line << "' in order in\n"
                                     << history;
  }
  std::filesystem::remove(state_file + ".events");
}

// gRPC's reconnect backoff sleeps in absl's timed wait, whose deadline is
// on the wall clock (tests/integration/monotonic_wait_test.cc): an agent
// whose wall clock ran 30 s ahead of the kernel's (as after a backward step
// of the clock by NTP, for waits begun before it) waited 28 s to rejoin a
// coordinator that was back after 1 s (here 12 s ahead: 10 s) (nemesis, CI,
// seed 1: the agent gave up after 30 s and exited 1 although its job
// succeeded).
TEST_F(RestartTest,
       AnAgentWhoseWallClockRunsAheadRejoinsARestartedCoordinator) {
  const std::string state_file =
      ::testing::TempDir() + "/trl-coord-" + std::to_string(port_) + ".state";
  const std::vector<std::string> flags = {"--state_file", state_file, "--lease",
                                          "1.5"};
  const std::string shift_file =
      ::testing::TempDir() + "/clock-shift-" + std::to_string(port_);
  std::ofstream(shift_file) << "12\n";
  std::vector<std::string> argv = {TRL_AGENT_BIN, "--machine_rank", "1",
                                   "--lease", "1.5"};
  for (auto& flag : ClusterFlags(2, 4)) argv.push_back(flag);
  Subprocess agent(argv, {std::string("LD_PRELOAD=") + TRL_CLOCK_SHIFT_LIB,
                          "TRL_CLOCK_SHIFT_FILE=" + shift_file});
  const auto job = Script("exec sleep 60", "exit 0");
  auto coord = StartCoordinator(2, 4, job, flags);
  const auto gen0 = WaitForGeneration0({coord.get(), &agent}, 4);
  ASSERT_EQ(gen0.size(), 4u) << coord->Output() << agent.Output();
  for (const auto& s : gen0) worker_pids_.insert(s.pid);
  // Frozen past the agent's lease: the agent reconnects to a port that
  // answers (the kernel accepts for a stopped process) and its handshake
  // hangs; then the coordinator dies, and the connection fails.
  coord->Signal(SIGSTOP);
  ASSERT_TRUE(
      agent.WaitForOutput("reconnecting to the coordinator", seconds(10)))
      << agent.Output();
  std::this_thread::sleep_for(milliseconds(500));
  coord->Signal(SIGKILL);
  ASSERT_EQ(coord->Wait(seconds(10)), 128 + SIGKILL);
  std::this_thread::sleep_for(seconds(1));
  auto again = StartCoordinator(2, 4, job, flags);
  const auto back_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(again->WaitForOutput("machine 1 registered", seconds(15)))
      << again->Output() << agent.Output();
  // On the true clock: under 2 s.
  EXPECT_LT(std::chrono::steady_clock::now() - back_at, seconds(5))
      << agent.Output();
  ASSERT_EQ(again->Wait(seconds(30)), 0) << again->Output();
  ASSERT_EQ(agent.Wait(seconds(30)), 0) << agent.Output();
  // The shim was in place: the agent logged its registration 12 s after
  // the coordinator did.
  const double ahead = LoggedAt(agent.Stderr(), "machine 1 registered") -
                       LoggedAt(again->Stderr(), "machine 1 registered");
  EXPECT_NEAR(std::fmod(ahead + 86400, 86400), 12, 2)
      << "the clock shim is not in place";
  std::filesystem::remove(shift_file);
  std::filesystem::remove(state_file + ".events");
}

TEST_F(RestartTest, DaemonizedGrandchildIsGoneAfterTheJob) {
  // The worker starts a grandchild in a session of its own (outside its
  // process group) that ignores SIGTERM, and exits 0 at once. (One process
  // of distributed_type NO is a plain process, without RANK.)
  auto coord = StartCoordinator(
      1, 1,
      {"/bin/sh", "-c",
       "setsid sh -c 'trap \"\" TERM; echo \"pid $$ gen 9 rank ${RANK:-0}\"; "
       "exec sleep 60' </dev/null & sleep 0.3; exit 0"});
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  const auto seen = Sightings(coord->Stdout());
  ASSERT_EQ(seen.size(), 1u) << coord->Output();
  worker_pids_.insert(seen[0].pid);  // TearDown: it must be gone
}

TEST_F(RestartTest, ExhaustedBudgetFailsWithTheReason) {
  auto coord = StartCoordinator(1, 2, Script("exit 3", "exit 3"),
                                {"--max_restarts", "2"});
  ASSERT_EQ(coord->Wait(seconds(30)), 3) << coord->Output();
  ExpectGenerations(coord->Stdout(), 3, 2, /*all_printed=*/false);
  EXPECT_NE(coord->Stderr().find("(all 2 restarts used)"), std::string::npos)
      << coord->Stderr();
}

TEST_F(RestartTest, NoRestartExitCodeEndsTheJobAtOnce) {
  auto coord = StartCoordinator(
      1, 2, Script("[ \"$RANK\" = 1 ] && exit 2; exec sleep 60", "exit 0"),
      {"--max_restarts", "5", "--no_restart_exit_codes", "2,64"});
  ASSERT_EQ(coord->Wait(seconds(30)), 2) << coord->Output();
  ExpectGenerations(coord->Stdout(), 1, 2, /*all_printed=*/false);
  EXPECT_NE(
      coord->Stderr().find("exit code 2 is marked as not worth a restart"),
      std::string::npos)
      << coord->Stderr();
}

TEST_F(RestartTest, GrandchildIgnoringSigtermIsGoneAfterTheStop) {
  // Each worker forks a grandchild that ignores SIGTERM and prints its pid;
  // rank 0 then fails, and the job stops.
  auto coord = StartCoordinator(
      1, 2,
      {"/bin/sh", "-c",
       "sh -c 'trap \"\" TERM; echo \"pid $$ gen 9 rank $RANK\"; "
       "exec sleep 60' & "
       "sleep 0.3; [ \"$RANK\" = 0 ] && exit 1; wait"},
      {"--stop_grace", "1"});
  ASSERT_EQ(coord->Wait(seconds(30)), 1) << coord->Output();
  const auto seen = Sightings(coord->Stdout());
  ASSERT_EQ(seen.size(), 2u) << coord->Output();
  for (const auto& s : seen) worker_pids_.insert(s.pid);  // TearDown checks
}

}  // namespace
}  // namespace trl::testing

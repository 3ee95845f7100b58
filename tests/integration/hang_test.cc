// Hangs seen without the script's help (issue 33), with the real daemons on
// loopback: a worker whose processes use no CPU, a machine whose ranks
// print nothing. Before the kill, what each worker was doing is kept in
// its generation's run directory and named in the failure; the job
// restarts and finishes.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

#include "agent/workers/flight_recorder.h"
#include "agent/workers/stack_capture.h"
#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

class HangTest : public LauncherTest {
 protected:
  void TearDown() override {
    if (!log_dir_.empty()) std::filesystem::remove_all(log_dir_);
    LauncherTest::TearDown();
  }

  std::string LogDir() {
    log_dir_ = ::testing::TempDir() + "/trl-hang-" + std::to_string(port_);
    std::filesystem::remove_all(log_dir_);
    return log_dir_;
  }

  // The stacks file of `rank` in generation 0 of the one job in log_dir_.
  std::string Stacks(int rank) const {
    for (const auto& job : std::filesystem::directory_iterator(log_dir_)) {
      std::ifstream in(job.path() / "gen0" /
                       ("rank" + std::to_string(rank) + ".stacks.txt"));
      std::ostringstream text;
      text << in.rdbuf();
      return text.str();
    }
    return "";
  }

  // Generation 0 runs `gen0`, later ones exit 0.
  static std::vector<std::string> Script(const std::string& gen0) {
    return {"/bin/sh", "-c",
            "echo gen $TRL_GENERATION rank $RANK pid $$; if [ "
            "\"$TRL_GENERATION\" = 0 ]; then " +
                gen0 + "; fi"};
  }

  // Every worker's pid, for TearDown's check that none is left.
  void RememberPids(const std::string& out) {
    static const std::regex pid(" pid ([0-9]+)");
    for (std::sregex_iterator it(out.begin(), out.end(), pid), end; it != end;
         ++it) {
      worker_pids_.insert(std::stoi((*it)[1]));
    }
  }

  std::string log_dir_;
};

TEST_F(HangTest, AWorkerAsleepIsFoundByItsIdleCpuAndSaysWhereItWas) {
  // Rank 0 computes (and says nothing); rank 1 sleeps: only rank 1 is
  // hung, and the failure names the detector and where it slept.
  auto coord = StartCoordinator(
      1, 2,
      Script("if [ $RANK = 1 ]; then exec sleep 60; fi; while :; do :; done"),
      {"--max_restarts", "1", "--hang_cpu_timeout", "1",
       "--hang_output_timeout", "0", "--log_dir", LogDir()});
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  const std::string err = coord->Stderr();
  EXPECT_NE(err.find("rank 1 (local rank 1 on machine 0"), std::string::npos)
      << err;
  EXPECT_NE(err.find("hung: its processes used less than 1% of a core for"),
            std::string::npos)
      << err;
  // The coordinator's line names where the hung rank was (the agent's own
  // line, in the same output here, says it too).
  const size_t stopping = err.find("[coord] stopping generation 0: rank 1");
  ASSERT_NE(stopping, std::string::npos) << err;
  const std::string line =
      err.substr(stopping, err.find('\n', stopping) - stopping);
  EXPECT_NE(
      line.find("; state S (sleeping) in the kernel at hrtimer_nanosleep"),
      std::string::npos)
      << line;
  EXPECT_EQ(err.find("rank 0 (local rank 0 on machine 0, host"),
            std::string::npos)
      << "the busy rank was called hung\n"
      << err;
  // Both ranks' stacks were kept before the kill: the sleeper's and the
  // busy one's.
  const std::string sleeper = Stacks(1);
  EXPECT_NE(sleeper.find("rank 1: state S (sleeping) in the kernel at "
                         "hrtimer_nanosleep"),
            std::string::npos)
      << sleeper;
  EXPECT_NE(sleeper.find("(the worker): sleep\n"), std::string::npos)
      << sleeper;
  EXPECT_NE(Stacks(0).find("rank 0: state R (running)"), std::string::npos)
      << Stacks(0);
  RememberPids(coord->Stdout());
}

TEST_F(HangTest, AMachineWhoseRanksPrintNothingIsHung) {
  // Both ranks compute in silence: the CPU detector cannot see it, the
  // output detector does.
  auto coord =
      StartCoordinator(1, 2, Script("while :; do :; done"),
                       {"--max_restarts", "1", "--hang_output_timeout", "1",
                        "--hang_cpu_timeout", "0", "--log_dir", LogDir()});
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  EXPECT_NE(coord->Stderr().find("hung: no output from any rank of this "
                                 "machine for"),
            std::string::npos)
      << coord->Stderr();
  RememberPids(coord->Stdout());
}

TEST_F(HangTest, AWorkerThatPrintsOrComputesIsNotHung) {
  // With both detectors at 1 s: rank 0 computes for 3 to 4 s without a
  // word, rank 1 sleeps and prints a tick every 0.1 s for 5 s. Each has a
  // sign of life (CPU, output), and the machine prints: nothing is hung.
  auto coord = StartCoordinator(
      1, 2,
      Script("if [ $RANK = 1 ]; then i=0; while [ $i -lt 50 ]; do echo "
             "tick; sleep 0.1; i=$((i+1)); done; exit 0; fi; end=$(( $(date "
             "+%s) + 4 )); while [ $(date +%s) -lt $end ]; do :; done"),
      {"--max_restarts", "0", "--hang_output_timeout", "1",
       "--hang_cpu_timeout", "1"});
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  EXPECT_EQ(coord->Stderr().find("hung"), std::string::npos) << coord->Stderr();
  RememberPids(coord->Stdout());
}

TEST_F(HangTest, AFailureStopsEveryMachineOnlyOnceWhereItsRanksStoodIsKept) {
  // Two machines of two: rank 3 fails, ranks 0 to 2 sleep. Before any of
  // them gets a signal, each agent keeps where its ranks stood; the
  // coordinator says it for the job, grouped.
  const std::vector<std::string> command = {
      "/bin/sh", "-c",
      "echo gen $TRL_GENERATION rank $RANK pid $$; if [ $RANK = 3 ]; then "
      "sleep 0.5; exit 1; fi; exec sleep 60"};
  const std::string log_dir = LogDir();
  auto coord = StartCoordinator(2, 4, command,
                                {"--max_restarts", "0", "--log_dir", log_dir});
  auto agent = StartAgent(2, 4, 1, {"--log_dir", log_dir});
  EXPECT_EQ(coord->Wait(seconds(30)), 1) << coord->Output();
  EXPECT_EQ(agent->Wait(seconds(10)), 1) << agent->Output();
  const std::string err = coord->Stderr();
  EXPECT_NE(err.find("[coord] generation 0: where its ranks stood when it was "
                     "stopped: ranks 0-2 state S (sleeping) in the kernel "
                     "at hrtimer_nanosleep"),
            std::string::npos)
      << err;
  for (int rank : {0, 1, 2}) {
    EXPECT_NE(Stacks(rank).find("(captured when generation 0 was stopped for "
                                "a failure)"),
              std::string::npos)
        << "rank " << rank << ": " << Stacks(rank);
  }
  RememberPids(coord->Stdout());
  RememberPids(agent->Stdout());
}

TEST_F(HangTest, EveryMachineReadsItsRanksBeforeTheHungOneIsKilled) {
  // Two machines of one: rank 1 (machine 1) sleeps and is found hung; rank
  // 0 (machine 0, whose detectors are off) waits for it in a read of a
  // pipe rank 1 holds open, as a rank blocked on it in a collective would,
  // and spins once rank 1 is gone (its peer's socket closed). Machine 1
  // reports the hang before any kill, and the coordinator's stop comes in
  // two phases: every machine reads its ranks before any is signalled, so
  // rank 0 is read still waiting. (Killed at once, or signalled with the
  // stop while machine 0 was still reading, rank 1 woke rank 0 first:
  // "state R (running)".)
  const std::string dir = LogDir();
  std::filesystem::create_directories(dir);
  const std::string pipe = dir + "/collective";
  ASSERT_EQ(mkfifo(pipe.c_str(), 0600), 0);
  const std::vector<std::string> command = {
      "/bin/sh", "-c",
      "echo gen $TRL_GENERATION rank $RANK pid $$; if [ $RANK = 1 ]; then "
      "exec 3>" +
          pipe + "; exec sleep 60; fi; exec 3<" + pipe +
          "; read x <&3; while :; do :; done"};
  auto coord = StartCoordinator(
      2, 2, command,
      {"--max_restarts", "0", "--log_dir", dir, "--hang_cpu_timeout", "0",
       "--hang_output_timeout", "0"});
  auto agent = StartAgent(2, 2, 1,
                          {"--log_dir", dir, "--hang_cpu_timeout", "1",
                           "--hang_output_timeout", "0"});
  EXPECT_EQ(coord->Wait(seconds(30)), 128 + SIGKILL) << coord->Output();
  EXPECT_EQ(agent->Wait(seconds(10)), 128 + SIGKILL) << agent->Output();
  const std::string err = coord->Stderr();
  EXPECT_NE(err.find("[coord] stopping generation 0: rank 1 (local rank 0 on "
                     "machine 1"),
            std::string::npos)
      << err;
  const size_t at = err.find("[coord] generation 0: where its ranks stood");
  ASSERT_NE(at, std::string::npos) << err;
  const std::string stood = err.substr(at, err.find('\n', at) - at);
  EXPECT_TRUE(std::regex_search(
      stood, std::regex("rank 0 (on machine 0 \\(host [^)]*\\) )?state S "
                        "\\(sleeping\\) in the kernel at [a-z_]*pipe_read")))
      << "rank 0 was read after rank 1's kill woke it: " << stood;
  EXPECT_TRUE(std::regex_search(
      stood, std::regex("rank 1 (on machine 1 \\(host [^)]*\\) )?state S "
                        "\\(sleeping\\) in the kernel at [a-z_]*nanosleep")))
      << stood;
  RememberPids(coord->Stdout());
  RememberPids(agent->Stdout());
}

TEST_F(HangTest, DiagnoseSaysWhyAGenerationStoppedAndWhereTheOddRankStood) {
  // Two machines of two, generation 0: rank 3 (machine 1) sleeps, ranks 0
  // to 2 compute in silence until rank 2 fails after 3 s; generation 1
  // runs on. `trl-coord diagnose` asks the running coordinator, then reads
  // the job's file after the coordinator has gone.
  const std::vector<std::string> command = {
      "/bin/sh", "-c",
      "echo gen $TRL_GENERATION rank $RANK pid $$; if [ $TRL_GENERATION != 0 "
      "]; then exec sleep 60; fi; if [ $RANK = 3 ]; then exec sleep 60; fi; "
      "if [ $RANK = 2 ]; then sleep 3; exit 7; fi; exec sleep 60"};
  const std::string log_dir = LogDir();
  const std::string state = log_dir + ".state";
  auto coord = StartCoordinator(
      2, 4, command,
      {"--max_restarts", "1", "--log_dir", log_dir, "--state_file", state});
  auto agent = StartAgent(2, 4, 1, {"--log_dir", log_dir});
  ASSERT_TRUE(coord->WaitForOutput("generation 1: world size 4", seconds(30)))
      << coord->Output();
  Subprocess live({TRL_COORD_BIN, "diagnose", "--address",
                   "127.0.0.1:" + std::to_string(port_), "--generation", "0"});
  ASSERT_EQ(live.Wait(seconds(10)), 0) << live.Output();
  const std::string said = live.Stdout();
  EXPECT_NE(said.find("generation 0 (world size 4, restarts used 0 of 1), "
                      "started "),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("  stopped "), std::string::npos) << said;
  EXPECT_NE(said.find("rank 2 (local rank 0 on machine 1"), std::string::npos)
      << said;
  EXPECT_NE(said.find("  where its ranks stood:\n    ranks 0, 1, 3 state S "
                      "(sleeping) in the kernel at hrtimer_nanosleep\n"),
            std::string::npos)
      << said;
  EXPECT_EQ(said.find("generation 1"), std::string::npos) << said;
  // `ps` says the same under its table.
  Subprocess ps(
      {TRL_COORD_BIN, "ps", "--address", "127.0.0.1:" + std::to_string(port_)});
  ASSERT_EQ(ps.Wait(seconds(10)), 0) << ps.Output();
  EXPECT_NE(ps.Stdout().find("\nLAST STOP (trl-coord diagnose says every "
                             "one)\n" +
                             said),
            std::string::npos)
      << ps.Stdout();
  coord->Signal(SIGINT);
  coord->Wait(seconds(30));
  agent->Wait(seconds(30));
  Subprocess after({TRL_COORD_BIN, "diagnose", "--state_file", state});
  ASSERT_EQ(after.Wait(seconds(10)), 0) << after.Output();
  EXPECT_NE(after.Stdout().find(said), std::string::npos) << after.Stdout();
  EXPECT_NE(after.Stdout().find("generation 1 (world size 4, restarts used 1 "
                                "of 1)"),
            std::string::npos)
      << after.Stdout();
  EXPECT_NE(after.Stdout().find("  stop asked "), std::string::npos)
      << after.Stdout();
  std::filesystem::remove(state + ".events");
  RememberPids(coord->Stdout());
  RememberPids(agent->Stdout());
}

TEST_F(HangTest, TheFlightRecorderIsAskedForItsDumpBeforeTheKill) {
  // Rank 0 does what PyTorch's NCCL watchdog does with the variables the
  // agent set: it makes the pipe STEM0.pipe, and writes its dump to STEM0
  // once a byte arrives there. Rank 1 makes no pipe (a Gloo job's rank).
  // Both sleep, and are captured before the kill.
  auto coord = StartCoordinator(
      1, 2,
      Script("if [ $RANK = 0 ]; then "
             "p=\"${TORCH_NCCL_DEBUG_INFO_PIPE_FILE}0.pipe\"; mkfifo \"$p\"; "
             "( read -r x < \"$p\"; echo \"{\\\"entries\\\": "
             "[\\\"all_reduce\\\"], \\\"asked\\\": \\\"$x\\\"}\" > "
             "\"${TORCH_FR_DUMP_TEMP_FILE}0\" ) & fi; exec sleep 60"),
      {"--max_restarts", "1", "--hang_cpu_timeout", "1",
       "--hang_output_timeout", "0", "--log_dir", LogDir()});
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  const std::string asked = Stacks(0);
  const std::regex dumped(
      "NCCL flight recorder: dumped to (/[^ ]*/gen0/"
      "nccl_flight_recorder\\.rank0) \\([0-9]+ bytes\\)");
  std::smatch match;
  ASSERT_TRUE(std::regex_search(asked, match, dumped)) << asked;
  std::ifstream in(match[1].str());
  std::string dump((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  EXPECT_NE(dump.find("\"entries\": [\"all_reduce\"], \"asked\": \"1\""),
            std::string::npos)
      << dump;
  EXPECT_NE(
      Stacks(1).find("no NCCL flight recorder: the rank made no pipe at "),
      std::string::npos)
      << Stacks(1);
  RememberPids(coord->Stdout());
}

// The agent may run as root and its workers as another user, with a
// virtual environment of theirs: a py-spy that user could replace is not
// run.
TEST(FindPySpyTest, APySpyAnotherUserCouldReplaceIsNotRun) {
  const std::filesystem::path dir =
      ::testing::TempDir() + "/trl-venv-" + std::to_string(getpid());
  std::filesystem::create_directories(dir / "bin");
  const std::filesystem::path python = dir / "bin" / "python";
  for (const auto& file : {python, dir / "bin" / "py-spy"}) {
    std::ofstream(file) << "#!/bin/sh\n";
    std::filesystem::permissions(file, std::filesystem::perms::owner_all);
  }
  // A directory anyone may write to (as /tmp is): found, and refused.
  std::filesystem::permissions(dir, std::filesystem::perms::all);
  std::string refused;
  EXPECT_EQ(FindPySpy(python.string(), "", &refused), "");
  EXPECT_EQ(refused, (dir / "bin" / "py-spy").string());
  EXPECT_FALSE(TrustedToRun((dir / "bin" / "py-spy").string()));
  // The system's own programs are trusted.
  EXPECT_TRUE(TrustedToRun("/bin/sh"));
  std::filesystem::remove_all(dir);
}

// A dump that was there before the request is not the one asked for: only
// a file that changed since counts, whatever its clock says.
TEST(FlightRecorderTest, OnlyADumpWrittenAfterTheRequestCounts) {
  const std::string dir =
      ::testing::TempDir() + "/trl-fr-dump-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const FlightRecorderPaths paths =
      FlightRecorderPathsOf({{"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", dir + "/fr."},
                             {"TORCH_FR_DUMP_TEMP_FILE", dir + "/dump."}},
                            0);
  ASSERT_EQ(mkfifo(paths.pipe.c_str(), 0600), 0);
  const int reader = open(paths.pipe.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  {
    std::ofstream old(paths.dump);
    old << "an older dump, of a watchdog's timeout";
  }
  const FlightRecorderRequest request = AskForFlightRecorderDump(paths);
  ASSERT_TRUE(request.asked) << request.note;
  char byte = 0;
  EXPECT_EQ(read(reader, &byte, 1), 1);
  EXPECT_EQ(byte, '1');
  const auto soon = [] {
    return std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  };
  EXPECT_NE(AwaitFlightRecorderDump(paths, request, soon())
                .find("no dump at " + paths.dump),
            std::string::npos);
  {
    std::ofstream fresh(paths.dump, std::ios::trunc);
    fresh << "the dump asked for";
  }
  EXPECT_EQ(AwaitFlightRecorderDump(paths, request, soon()),
            "NCCL flight recorder: dumped to " + paths.dump + " (18 bytes)");
  close(reader);
  std::filesystem::remove_all(dir);
}

// The run directory is the worker's: what it leaves at its pipe's path is
// looked at, never written unless it is a FIFO someone reads.
TEST(FlightRecorderTest, OnlyAFifoThatIsReadIsWritten) {
  const std::string dir =
      ::testing::TempDir() + "/trl-fr-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const FlightRecorderPaths paths = FlightRecorderPathsOf(
      {{"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", dir + "/fr."}}, 3);
  EXPECT_EQ(paths.pipe, dir + "/fr.3.pipe");
  EXPECT_EQ(paths.dump, "/tmp/nccl_trace_rank_3");  // PyTorch's default

  FlightRecorderRequest request = AskForFlightRecorderDump(paths);
  EXPECT_FALSE(request.asked);
  EXPECT_NE(request.note.find("the rank made no pipe at " + paths.pipe),
            std::string::npos)
      << request.note;

  {
    std::ofstream planted(paths.pipe);
    planted << "the operator's file";
  }
  request = AskForFlightRecorderDump(paths);
  EXPECT_FALSE(request.asked);
  EXPECT_NE(request.note.find("is not a pipe: not written"), std::string::npos)
      << request.note;
  std::ifstream in(paths.pipe);
  std::string kept((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "the operator's file");

  std::filesystem::remove(paths.pipe);
  ASSERT_EQ(mkfifo((dir + "/elsewhere").c_str(), 0600), 0);
  // Someone reads the FIFO the link points at: followed, it would be
  // written.
  const int elsewhere =
      open((dir + "/elsewhere").c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(elsewhere, 0);
  std::filesystem::create_symlink(dir + "/elsewhere", paths.pipe);
  request = AskForFlightRecorderDump(paths);
  EXPECT_FALSE(request.asked) << "a link was followed";
  char byte;
  EXPECT_LE(read(elsewhere, &byte, 1), 0) << "a link was followed";
  close(elsewhere);

  std::filesystem::remove(paths.pipe);
  ASSERT_EQ(mkfifo(paths.pipe.c_str(), 0600), 0);
  request = AskForFlightRecorderDump(paths);
  EXPECT_FALSE(request.asked);
  EXPECT_NE(request.note.find("no process reads it"), std::string::npos)
      << request.note;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trl::testing

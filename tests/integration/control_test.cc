// Driving a job like a user: `trl-coord ps` while it runs, Ctrl-C, and bad
// input that must be refused before anything starts.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "proto/trl_launch.pb.h"
#include "tests/integration/job_status_probe.h"
#include "tests/integration/launcher_fixture.h"
#include "tests/integration/process_state.h"

namespace trl::testing {
namespace {

namespace pb = trl::launch::v1;

// `process` must exit 2 with `expected` in its error output.
void ExpectExit2Naming(Subprocess& process, const std::string& expected) {
  EXPECT_EQ(process.Wait(seconds(10)), 2) << expected << "\n"
                                          << process.Output();
  EXPECT_NE(process.Stderr().find(expected), std::string::npos)
      << "expected '" << expected << "' in:\n"
      << process.Stderr();
}

TEST_F(LauncherTest, PsShowsTheRunningJob) {
  auto agent = StartAgent(2, 4, 1);
  auto coord = StartCoordinator(2, 4, Worker({"--sleep", "2"}));
  const pb::JobStatus status = WaitUntilRunning(port_, 4);
  ASSERT_EQ(status.ranks_size(), 4) << coord->Output();
  EXPECT_EQ(status.world_size(), 4);
  EXPECT_EQ(status.num_machines(), 2);
  EXPECT_EQ(status.generation(), 0);
  EXPECT_EQ(status.command(0), TRL_ENV_WORKER_BIN);
  ASSERT_EQ(status.nodes_size(), 2);
  for (const auto& node : status.nodes()) {
    EXPECT_EQ(node.address(), "127.0.0.1");
    EXPECT_EQ(node.workers(), 2);
    EXPECT_LT(node.last_heartbeat_age_s(), 5.0);
  }
  for (const auto& rank : status.ranks()) {
    EXPECT_TRUE(ProcessExists(rank.pid())) << rank.pid();
    worker_pids_.insert(rank.pid());
  }
  // The table form names the job and every rank.
  Subprocess table(
      {TRL_COORD_BIN, "ps", "--address", "127.0.0.1:" + std::to_string(port_)});
  ASSERT_EQ(table.Wait(seconds(10)), 0) << table.Output();
  EXPECT_NE(table.Stdout().find("JOB " + status.job_id()), std::string::npos)
      << table.Stdout();
  EXPECT_NE(table.Stdout().find("RANK"), std::string::npos);

  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
}

TEST_F(LauncherTest, PsWithoutACoordinatorSaysSo) {
  // A token of its own: this test's HOME is fresh (tests/hermetic.cmake),
  // without the ~/.trl/token a coordinator would have created.
  Subprocess ps({TRL_COORD_BIN, "ps", "--address",
                 "127.0.0.1:" + std::to_string(port_), "--timeout", "1"},
                {"TRL_AUTH_TOKEN=no-coordinator-checks-it"});
  EXPECT_EQ(ps.Wait(seconds(10)), 1);
  EXPECT_NE(ps.Stderr().find("no coordinator answers at 127.0.0.1:" +
                             std::to_string(port_)),
            std::string::npos)
      << ps.Output();
  EXPECT_EQ(ps.Stderr().find("failed to connect to all addresses"),
            std::string::npos)
      << ps.Output();
}

TEST_F(LauncherTest, InterruptStopsEveryWorkerOnEveryMachine) {
  auto agent = StartAgent(2, 4, 1);
  auto coord = StartCoordinator(2, 4, Worker({"--sleep", "120"}));
  const pb::JobStatus status = WaitUntilRunning(port_, 4);
  ASSERT_EQ(status.ranks_size(), 4) << coord->Output();
  for (const auto& rank : status.ranks()) worker_pids_.insert(rank.pid());
  coord->Signal(SIGINT);
  EXPECT_EQ(coord->Wait(seconds(20)), 128 + SIGINT) << coord->Output();
  EXPECT_EQ(agent->Wait(seconds(20)), 128 + SIGINT) << agent->Output();
  EXPECT_NE(coord->Stderr().find("trl-coord received SIGINT"),
            std::string::npos);
}

// A worker that reports every SIGUSR1 it gets and exits 0.5 s after the
// first, so that a second delivery would show.
std::vector<std::string> Usr1Counter() {
  return {"/bin/sh", "-c",
          "got=0; trap 'echo \"rank $RANK got USR1\"; got=1' USR1; "
          "echo \"pid $$: up\"; "
          "while [ $got = 0 ]; do sleep 0.05; done; sleep 0.5; exit 0"};
}

class PreemptionTest : public LauncherTest {
 protected:
  // Starts a 2-machine job of Usr1Counter workers; returns their pids.
  std::vector<pid_t> StartJob() {
    agent_ = StartAgent(2, 4, 1);
    coord_ = StartCoordinator(2, 4, Usr1Counter());
    static const std::regex pid_pattern("pid ([0-9]+): up");
    std::vector<pid_t> pids;
    WaitUntil(
        [&] {
          const std::string out = coord_->Stdout() + agent_->Stdout();
          pids.clear();
          for (std::sregex_iterator it(out.begin(), out.end(), pid_pattern),
               end;
               it != end; ++it) {
            pids.push_back(std::stoi((*it)[1]));
          }
          return pids.size() == 4;
        },
        seconds(20));
    worker_pids_.insert(pids.begin(), pids.end());
    return pids;
  }

  // Both daemons end on the signal; every rank got it exactly once.
  void ExpectEachRankGotUsr1Once() {
    EXPECT_EQ(coord_->Wait(seconds(20)), 128 + SIGUSR1) << coord_->Output();
    EXPECT_EQ(agent_->Wait(seconds(20)), 128 + SIGUSR1) << agent_->Output();
    const std::string out = coord_->Stdout() + agent_->Stdout();
    for (int rank = 0; rank < 4; ++rank) {
      const std::regex got("rank " + std::to_string(rank) + " got USR1");
      EXPECT_EQ(std::distance(std::sregex_iterator(out.begin(), out.end(), got),
                              std::sregex_iterator()),
                1)
          << "rank " << rank << "\n"
          << out;
    }
  }

  std::unique_ptr<Subprocess> agent_;
  std::unique_ptr<Subprocess> coord_;
};

TEST_F(PreemptionTest, SignalToTheCoordinatorReachesEveryWorkerOnce) {
  // Slurm warns of pre-emption with SIGUSR1: every worker on every machine
  // sees it (and may checkpoint within the grace period), then the job
  // stops.
  ASSERT_EQ(StartJob().size(), 4u) << coord_->Output() << agent_->Output();
  coord_->Signal(SIGUSR1);
  ExpectEachRankGotUsr1Once();
}

TEST_F(PreemptionTest, SignalFromSlurmsStepDaemonIsNotSentToWorkersAgain) {
  // slurmstepd signals every process of the step itself (scancel --signal,
  // sbatch --signal): daemons and workers alike. A shell run under that
  // name does the same here; the daemons must not send it a second time.
  const std::vector<pid_t> workers = StartJob();
  ASSERT_EQ(workers.size(), 4u) << coord_->Output() << agent_->Output();
  const std::string dir =
      ::testing::TempDir() + "/trl-stepd-" + std::to_string(port_);
  std::filesystem::create_directories(dir);
  const std::string stepd = dir + "/slurmstepd";
  std::filesystem::remove(stepd);
  ASSERT_EQ(symlink("/bin/sh", stepd.c_str()), 0);
  std::string pids =
      std::to_string(coord_->pid()) + " " + std::to_string(agent_->pid());
  for (pid_t pid : workers) pids += " " + std::to_string(pid);
  // The sender stays alive, as slurmstepd does for the whole step: the
  // daemons name a signal's sender by reading its /proc entry, which is gone
  // once a sender that exited at once has been reaped (a race seen under
  // TSan). The trailing ':' keeps the shell from exec'ing `sleep`, which
  // would rename it.
  Subprocess slurmstepd(
      {stepd, "-c", "kill -USR1 " + pids + " || exit 3; sleep 60; :"});
  ExpectEachRankGotUsr1Once();
  EXPECT_NE(coord_->Stderr().find("(Slurm sent it to the workers)"),
            std::string::npos)
      << coord_->Stderr();
  EXPECT_EQ(slurmstepd.Wait(std::chrono::milliseconds(0)), std::nullopt)
      << "the kill failed: " << slurmstepd.Output();
  slurmstepd.Signal(SIGTERM);
  slurmstepd.Wait(seconds(10));
  std::filesystem::remove_all(dir);
}

TEST_F(LauncherTest, TerminatingAnAgentStopsTheWholeJob) {
  auto agent = StartAgent(2, 4, 1);
  auto coord = StartCoordinator(2, 4, Worker({"--sleep", "120"}));
  const pb::JobStatus status = WaitUntilRunning(port_, 4);
  ASSERT_EQ(status.ranks_size(), 4) << coord->Output();
  for (const auto& rank : status.ranks()) worker_pids_.insert(rank.pid());
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(seconds(20)), 128 + SIGTERM) << agent->Output();
  EXPECT_EQ(coord->Wait(seconds(20)), 128 + SIGTERM) << coord->Output();
  EXPECT_NE(coord->Stderr().find("the agent of machine 1 is stopping: "
                                 "received SIGTERM"),
            std::string::npos)
      << coord->Stderr();
}

TEST_F(LauncherTest, KilledAgentFailsTheJobAndItsWorkersDie) {
  auto agent = StartAgent(2, 4, 1);
  auto coord = StartCoordinator(2, 4, Worker({"--sleep", "120"}));
  const pb::JobStatus status = WaitUntilRunning(port_, 4);
  ASSERT_EQ(status.ranks_size(), 4) << coord->Output();
  for (const auto& rank : status.ranks()) worker_pids_.insert(rank.pid());
  // Its guardian is killed first, as the OOM killer or a kill of the whole
  // session could: the workers die by PR_SET_PDEATHSIG alone (the guardian
  // notes them within 0.1 s of their start and would kill them too).
  const std::vector<pid_t> guardians =
      ChildrenNamed(agent->pid(), "trl-guardian");
  ASSERT_EQ(guardians.size(), 1u);
  kill(guardians[0], SIGKILL);
  agent->Signal(SIGKILL);
  // At once (the kernel's SIGKILL as the agent dies), not by a later sweep
  // of machine 0's agent or the test's own clean-up.
  for (const auto& rank : status.ranks()) {
    if (rank.machine_rank() != 1) continue;
    EXPECT_TRUE(
        WaitUntil([&] { return !ProcessExists(rank.pid()); }, seconds(2)))
        << "worker " << rank.pid() << " outlived its killed agent";
  }
  EXPECT_EQ(coord->Wait(seconds(20)), 1) << coord->Output();
  EXPECT_NE(coord->Stderr().find("the agent of machine 1 (host"),
            std::string::npos)
      << coord->Stderr();
}

struct BadInput {
  std::vector<std::string> flags;
  std::string expected;
};

TEST_F(LauncherTest, BadInputExitsWithCode2BeforeAnythingStarts) {
  const std::string port = std::to_string(port_);
  const std::vector<BadInput> cases = {
      {{"--config_file", "/nonexistent.yaml", "/bin/true"},
       "'/nonexistent.yaml' cannot be read"},
      {{"--num_machines", "2", "--num_processes", "3", "--main_process_ip",
        "127.0.0.1", "/bin/true"},
       "not divisible"},
      {{"--main_process_port", "70000", "/bin/true"}, "outside 1..65535"},
      {{"--main_process_ip", "no-such-host.invalid", "--main_process_port",
        port, "/bin/true"},
       "cannot resolve host 'no-such-host.invalid'"},
      {{"--main_process_ip", "127.0.0.1", "--main_process_port", port},
       "no training script given"},
      {{"-m", "--no_python", "--main_process_port", port, "x"},
       "--module and --no_python cannot be used together"},
      {{"--machine_rank", "1", "--num_machines", "2", "--num_processes", "2",
        "--main_process_ip", "127.0.0.1", "/bin/true"},
       "runs machine 0"},
      {{"--num_processes", "two", "/bin/true"}, "num_processes"},
      {{"--insecure", "--main_process_ip", "10.255.255.254",
        "--main_process_port", port, "/bin/true"},
       "--insecure is refused on 10.255.255.254"},
      {{"--no_restart_exit_codes", "2,x", "/bin/true"},
       "'x' is not an exit code"},
      {{"--main_process_ip", "10.255.255.254", "--main_process_port", port,
        "/bin/true"},
       "is not an address of this machine"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {TRL_COORD_BIN, "start"};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    Subprocess coord(argv);
    ExpectExit2Naming(coord, c.expected);
    EXPECT_EQ(coord.Stdout().find("[rank"), std::string::npos);
  }
}

TEST_F(LauncherTest, MissingMachineFailsTheJobAfterTheRendezvousTimeout) {
  auto coord = StartCoordinator(2, 4, Worker(), {"--rdzv_timeout", "1"});
  ASSERT_EQ(coord->Wait(seconds(20)), 1) << coord->Output();
  EXPECT_NE(coord->Stderr().find("machine(s) 1 did not register within 1 s"),
            std::string::npos)
      << coord->Stderr();
}

TEST_F(LauncherTest, AWaitingCoordinatorSaysWhichMachineAndWhatToRunThere) {
  // Machine 1 never comes: the coordinator says so every interval, with
  // the command that would start it, until the wait ends.
  auto coord = StartCoordinator(
      2, 4, Worker(),
      {"--rdzv_timeout", "3", "--waiting_report_interval", "1"});
  ASSERT_EQ(coord->Wait(seconds(20)), 1) << coord->Output();
  const std::string said = coord->Stderr();
  // The owner ticks about every second: "after 1 s" or 2 s.
  const std::regex line(
      "still waiting for machine 1 of 2 after [12] s; the wait ends in [0-9]+ "
      "s \\(--rdzv_timeout\\)\\. On its host, run: trl-agent --num_machines 2 "
      "--num_processes 4 --main_process_ip 127\\.0\\.0\\.1 "
      "--main_process_port " +
      std::to_string(port_) + " --machine_rank 1\n");
  EXPECT_TRUE(std::regex_search(said, line)) << said;
  const std::string again = "still waiting for machine 1 of 2 after";
  EXPECT_NE(said.find(again), said.rfind(again))
      << "said once only, not every interval\n"
      << said;
}

TEST_F(LauncherTest, SecondCoordinatorOnTheSamePortFails) {
  auto first = StartCoordinator(2, 4, Worker());
  ASSERT_TRUE(first->WaitForOutput("waiting for 2 machine(s)", seconds(10)))
      << first->Output();
  auto second = StartCoordinator(2, 4, Worker());
  EXPECT_EQ(second->Wait(seconds(10)), 2) << second->Output();
  EXPECT_NE(second->Stderr().find("already in use"), std::string::npos)
      << second->Stderr();
  first->Signal(SIGTERM);
  EXPECT_EQ(first->Wait(seconds(20)), 128 + SIGTERM) << first->Output();
}

TEST_F(LauncherTest, AccelerateFlagsRefusedOrUnknownExit2NamingTheFlag) {
  const std::string port = std::to_string(port_);
  const std::vector<std::string> common = {"--main_process_ip", "127.0.0.1",
                                           "--main_process_port", port};
  const std::vector<BadInput> coordinator_cases = {
      {{"--zero_stage", "2", "/bin/true"},
       "--zero_stage (a flag of `accelerate launch`) is refused"},
      {{"--tee", "3", "/bin/true"}, "--tee (a flag of `accelerate launch`)"},
      {{"--mpirun_hostfile", "hosts", "/bin/true"}, "no mpirun"},
      {{"--use_deepspeed", "/bin/true"}, "--use_deepspeed is refused"},
      {{"--multi_gpu", "--num_processes", "1", "/bin/true"},
       "--multi_gpu needs at least 2 processes"},
      {{"--not_a_flag_anywhere", "/bin/true"},
       "unknown flag '--not_a_flag_anywhere'"},
      {{"-x", "/bin/true"}, "unknown flag '-x'"},
  };
  for (const auto& c : coordinator_cases) {
    std::vector<std::string> argv = {TRL_COORD_BIN, "start"};
    argv.insert(argv.end(), common.begin(), common.end());
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    Subprocess coord(argv);
    ExpectExit2Naming(coord, c.expected);
    EXPECT_EQ(coord.Stderr().find("was not found on PATH"), std::string::npos);
    EXPECT_EQ(coord.Stderr().find("waiting for"), std::string::npos);
    EXPECT_TRUE(PortIsFree(port_));
  }
  const std::vector<BadInput> agent_cases = {
      {{"--main_process_port", port, "--zero_stage", "2"},
       "--zero_stage (a flag of `accelerate launch`) is refused"},
      {{"--main_process_port", port, "--not_a_flag_anywhere"},
       "--not_a_flag_anywhere"},
      {{"--main_process_port", "0"}, "cannot learn which port"},
  };
  for (const auto& c : agent_cases) {
    std::vector<std::string> argv = {TRL_AGENT_BIN,
                                     "--machine_rank",
                                     "1",
                                     "--num_machines",
                                     "2",
                                     "--num_processes",
                                     "2",
                                     "--use_cpu",
                                     "--main_process_ip",
                                     "127.0.0.1"};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    Subprocess agent(argv);
    ExpectExit2Naming(agent, c.expected);
  }
}

TEST_F(LauncherTest, DoubleDashStartsTheCommandAndLaterFlagsAreItsOwn) {
  // `--` ends the launcher's flags; after the command's first word, a `--`
  // and flags belong to the command (here: trl-env-worker's --exit_code).
  auto coord = StartCoordinator(
      1, 2,
      {"--", "/bin/sh", "-c",
       "[ \"$1\" = -- ] && [ \"$2\" = --multi_gpu ] && exit 0; exit 9", "sh",
       "--", "--multi_gpu"});
  EXPECT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  auto failing = StartCoordinator(1, 2, Worker({"--exit_code", "7"}),
                                  {"--quiet", "--same_network"});
  EXPECT_EQ(failing->Wait(seconds(30)), 7) << failing->Output();
  RememberWorkerPids(failing->Output());
}

TEST_F(LauncherTest, PortZeroPicksAFreePortAndSaysWhich) {
  std::vector<std::string> argv = {TRL_COORD_BIN,
                                   "start",
                                   "--num_processes",
                                   "2",
                                   "--use_cpu",
                                   "--main_process_ip",
                                   "127.0.0.1",
                                   "--main_process_port",
                                   "0",
                                   TRL_ENV_WORKER_BIN};
  Subprocess coord(argv);
  EXPECT_EQ(coord.Wait(seconds(30)), 0) << coord.Output();
  RememberWorkerPids(coord.Output());
  EXPECT_NE(coord.Stderr().find("main_process_port 0: the coordinator listens "
                                "on free port"),
            std::string::npos)
      << coord.Stderr();
}

}  // namespace
}  // namespace trl::testing

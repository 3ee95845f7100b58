// What the real daemons do when the world around them misbehaves: a
// console that closes, a second stop signal while they wait for workers
// that ignore the first, a coordinator that never comes back.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "agent/workers/worker_cgroup.h"
#include "common/kernel_files.h"
#include "tests/integration/job_status_probe.h"
#include "tests/integration/launcher_fixture.h"
#include "tests/integration/process_state.h"
#include "tests/integration/tcp_relay.h"

namespace trl::testing {
namespace {

// The SIGPIPE bit of the "SigIgn:" mask a worker printed, or -1.
int SigpipeIgnoredIn(const std::string& output) {
  static const std::regex pattern("SigIgn:\\s*([0-9a-f]+)");
  std::smatch match;
  if (!std::regex_search(output, match, pattern)) return -1;
  const unsigned long long mask = std::stoull(match[1], nullptr, 16);
  return (mask >> (SIGPIPE - 1)) & 1;
}

TEST_F(LauncherTest, AConsoleThatClosesDoesNotKillTheCoordinator) {
  // `trl-coord start ... | head -n 2`: after head exits, every write to the
  // console fails. The job must go on and report its own result.
  const std::string worker =
      "for i in $(seq 300); do echo line $i; done; "
      "grep SigIgn /proc/self/status >&2; sleep 0.3; "
      "for i in $(seq 300); do echo more $i; done";
  std::vector<std::string> argv = {
      "/bin/bash",
      "-c",
      "\"$@\" | head -n 2 >/dev/null; exit ${PIPESTATUS[0]}",
      "pipeline",
      TRL_COORD_BIN,
      "start"};
  for (auto& flag : ClusterFlags(1, 1)) argv.push_back(flag);
  for (auto arg : {"/bin/sh", "-c", worker.c_str()}) argv.push_back(arg);
  Subprocess coord(argv);
  ASSERT_EQ(coord.Wait(seconds(30)), 0) << coord.Output();
  EXPECT_NE(coord.Stderr().find("succeeded"), std::string::npos)
      << coord.Stderr();
  // Workers get SIGPIPE's default action back (a worker piping into head
  // must end as it would outside the launcher).
  EXPECT_EQ(SigpipeIgnoredIn(coord.Stderr()), 0) << coord.Stderr();
}

// The pid a worker printed as "ready pid N", or -1.
pid_t ReadyPid(const std::string& output) {
  static const std::regex pattern("ready pid ([0-9]+)");
  std::smatch match;
  if (!std::regex_search(output, match, pattern)) return -1;
  return std::stoi(match[1]);
}

TEST_F(LauncherTest, ASecondSignalCutsTheGraceShortAfterTheCoordinatorIsLost) {
  // Workers that ignore SIGTERM, a grace of 60 s: after the coordinator is
  // killed, the agent stops its workers and waits out the grace, unless a
  // second signal tells it to kill them now.
  const std::vector<std::string> flags = {
      "--stop_grace",        "60", "--heartbeat_interval", "0.2",
      "--reconnect_timeout", "60", "--no_python"};
  const std::vector<std::string> worker = {
      "/bin/sh", "-c",
      "trap '' TERM; echo ready pid $$; while true; do sleep 0.1; done"};
  auto agent = StartAgent(2, 2, 1, flags);
  auto coord = StartCoordinator(2, 2, worker, flags);
  ASSERT_TRUE(agent->WaitForOutput("ready pid", seconds(20)))
      << agent->Output();
  const pid_t worker_pid = ReadyPid(agent->Stdout());
  ASSERT_GT(worker_pid, 0);
  worker_pids_.insert(worker_pid);
  coord->Signal(SIGKILL);
  coord->Wait(seconds(10));
  ASSERT_TRUE(agent->WaitForOutput("lost the connection to the coordinator",
                                   seconds(10)))
      << agent->Output();
  agent->Signal(SIGTERM);
  ASSERT_TRUE(agent->WaitForOutput("received SIGTERM", seconds(10)))
      << agent->Output();
  agent->Signal(SIGTERM);
  // Well within the 60 s grace.
  EXPECT_EQ(agent->Wait(seconds(20)), 128 + SIGTERM) << agent->Output();
  EXPECT_FALSE(ProcessExists(worker_pid));
}

TEST_F(LauncherTest, AnAgentLeavesWhenItsCoordinatorDoesNotComeBack) {
  const std::vector<std::string> flags = {"--heartbeat_interval", "0.2",
                                          "--reconnect_timeout", "1.5",
                                          "--no_python"};
  auto agent = StartAgent(2, 2, 1, flags);
  auto coord = StartCoordinator(
      2, 2, {"/bin/sh", "-c", "echo ready pid $$; sleep 60"}, flags);
  ASSERT_TRUE(agent->WaitForOutput("ready pid", seconds(20)))
      << agent->Output();
  worker_pids_.insert(ReadyPid(agent->Stdout()));
  coord->Signal(SIGKILL);
  coord->Wait(seconds(10));
  // Not the 900 s of the rendezvous timeout: the reconnect timeout.
  EXPECT_EQ(agent->Wait(seconds(20)), 1) << agent->Output();
  EXPECT_NE(agent->Stderr().find("did not answer within 1.5 s"),
            std::string::npos)
      << agent->Stderr();
}

TEST_F(LauncherTest, AnAgentWithOtherHeartbeatSettingsIsRefused) {
  // It would be declared lost again and again: refused by name instead.
  auto coord = StartCoordinator(2, 2, Worker());
  auto agent = StartAgent(2, 2, 1, {"--heartbeat_interval", "2"});
  EXPECT_EQ(agent->Wait(seconds(20)), 2) << agent->Output();
  EXPECT_NE(agent->Stderr().find(
                "heartbeat_interval_ms is 2000 on the agent but 1000 on the "
                "coordinator"),
            std::string::npos)
      << agent->Stderr();
  coord->Signal(SIGTERM);
  coord->Wait(seconds(20));
}

TEST_F(LauncherTest, AWhitespaceTokenIsRefusedBeforeAnythingStarts) {
  std::vector<std::string> argv = {TRL_COORD_BIN, "start"};
  for (auto& flag : ClusterFlags(1, 1)) argv.push_back(flag);
  argv.push_back("/bin/true");
  Subprocess coord(argv, {"TRL_AUTH_TOKEN= "});
  EXPECT_EQ(coord.Wait(seconds(20)), 2) << coord.Output();
  EXPECT_NE(coord.Stderr().find("TRL_AUTH_TOKEN is set but empty"),
            std::string::npos)
      << coord.Stderr();
}

// The "Max open files" soft limit in /proc/PID/limits, or -1.
long SoftOpenFileLimit(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Max open files", 0) == 0) {
      return std::stol(line.substr(std::string("Max open files").size()));
    }
  }
  return -1;
}

TEST_F(LauncherTest, DaemonsRaiseTheirDescriptorLimitAndWorkersKeepTheirs) {
  // A flood of connections must not run the coordinator out of
  // descriptors at the usual soft limit of 1024; user code keeps 1024.
  std::vector<std::string> argv = {"/usr/bin/prlimit", "--nofile=1024:8192",
                                   TRL_COORD_BIN, "start"};
  for (auto& flag : ClusterFlags(1, 1)) argv.push_back(flag);
  for (auto arg : {"--no_python", "/bin/sh", "-c",
                   "echo worker nofile $(ulimit -n); sleep 30"}) {
    argv.push_back(arg);
  }
  Subprocess coord(argv);
  ASSERT_TRUE(coord.WaitForOutput("worker nofile", seconds(20)))
      << coord.Output();
  EXPECT_NE(coord.Stdout().find("worker nofile 1024"), std::string::npos)
      << coord.Stdout();
  EXPECT_EQ(SoftOpenFileLimit(coord.pid()), 8192);
  coord.Signal(SIGTERM);
  coord.Wait(seconds(40));
}

TEST_F(LauncherTest, AReplacementAgentEndsWhatAFrozenOneLeftBeforeItsRanksRun) {
  // Machine 1's agent is frozen (SIGSTOP): its workers run on, and it can
  // enforce nothing. A new agent for machine 1 on the same host kills them
  // (and the frozen agent) before it registers, so generation 1's ranks 2
  // and 3 never run beside generation 0's (invariant 1).
  const std::vector<std::string> flags = {"--heartbeat_interval", "0.2",
                                          "--max_restarts", "1", "--no_python"};
  const std::vector<std::string> worker = {
      "/bin/sh", "-c",
      "echo start gen $TRL_GENERATION rank $RANK pid $$; "
      "if [ \"$TRL_GENERATION\" = 0 ]; then exec sleep 60; fi"};
  auto frozen = StartAgent(2, 4, 1, flags);
  auto coord = StartCoordinator(2, 4, worker, flags);
  ASSERT_TRUE(PrintedGenerationZeroStarts(*frozen, {2, 3}))
      << frozen->Output() << coord->Output();
  std::vector<pid_t> old_workers;
  static const std::regex started("start gen 0 rank [23] pid ([0-9]+)");
  const std::string out = frozen->Stdout();
  for (std::sregex_iterator it(out.begin(), out.end(), started), end; it != end;
       ++it) {
    old_workers.push_back(std::stoi((*it)[1]));
  }
  ASSERT_EQ(old_workers.size(), 2u);
  for (pid_t pid : old_workers) worker_pids_.insert(pid);
  frozen->Signal(SIGSTOP);
  ASSERT_TRUE(coord->WaitForOutput("machine 1 is lost", seconds(20)))
      << coord->Output();
  for (pid_t pid : old_workers) ASSERT_TRUE(ProcessRuns(pid));

  auto replacement = StartAgent(2, 4, 1, flags);
  // The moment generation 1 is assigned, generation 0's workers of
  // machine 1 are gone.
  bool checked = false;
  ASSERT_TRUE(WaitUntil(
      [&] {
        if (coord->Stderr().find("generation 1:") == std::string::npos) {
          return false;
        }
        for (pid_t pid : old_workers) {
          EXPECT_FALSE(ProcessRuns(pid))
              << "generation 0's worker " << pid << " runs beside generation 1";
        }
        checked = true;
        return true;
      },
      seconds(30)))
      << coord->Output() << replacement->Output();
  EXPECT_TRUE(checked);
  EXPECT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  EXPECT_EQ(replacement->Wait(seconds(30)), 0) << replacement->Output();
  EXPECT_NE(replacement->Stderr().find("killed 2 worker process(es) and 1 "
                                       "agent(s)"),
            std::string::npos)
      << replacement->Stderr();
  frozen->Wait(seconds(10));
}

TEST_F(LauncherTest, AMachineCutOffInTheLastSecondStillSucceeds) {
  // Machine 1 reaches the coordinator through a relay. Its workers exit 0
  // while the relay holds every byte, then the relay cuts the connection:
  // the coordinator never heard of their exits until the agent rejoins
  // and reports them. Every rank exited 0: the job succeeded (exit 0), it
  // is neither failed nor run again.
  TcpRelay relay(port_);
  const std::string worker =
      "if [ \"$GROUP_RANK\" = 1 ]; then echo about to exit; sleep 1; fi";
  std::vector<std::string> agent_argv = {TRL_AGENT_BIN, "--machine_rank", "1"};
  for (auto& flag : ClusterFlagsOn(2, 4, relay.port())) {
    agent_argv.push_back(flag);
  }
  Subprocess agent(agent_argv, {"TRL_LOG_LEVEL=debug"});
  auto coord = StartCoordinator(2, 4, {"/bin/sh", "-c", worker},
                                {"--no_python", "--max_restarts", "0"});
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string out = agent.Stdout();
        return out.find("[rank 2] about to exit") != std::string::npos &&
               out.find("[rank 3] about to exit") != std::string::npos;
      },
      seconds(20)))
      << agent.Output() << coord->Output();
  relay.Hold();
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string log = agent.Stderr();
        return log.find("local rank 0 exited (code 0") != std::string::npos &&
               log.find("local rank 1 exited (code 0") != std::string::npos;
      },
      seconds(20)))
      << agent.Output();
  relay.CutAndResume();
  EXPECT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  EXPECT_EQ(agent.Wait(seconds(30)), 0) << agent.Output() << coord->Output();
  EXPECT_EQ(coord->Stderr().find("generation 1"), std::string::npos)
      << "the job ran again";
}

TEST_F(LauncherTest, AnAgentThatMissedTheEndHearsItWhenItRegistersAgain) {
  // The news that the job ended is lost on machine 1's way: the relay
  // holds it, then cuts the connection. Its agent registers again, hears
  // how the job ended, and leaves with its code (0), instead of finding
  // no coordinator and exiting 1 after its reconnect timeout (nemesis).
  TcpRelay relay(port_);
  char dir_template[] = "/tmp/trl-farewell-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string go = std::string(dir_template) + "/go";
  const std::string worker = "if [ \"$GROUP_RANK\" = 0 ]; then while [ ! -e " +
                             go + " ]; do sleep 0.05; done; fi; echo done";
  std::vector<std::string> agent_argv = {TRL_AGENT_BIN, "--machine_rank", "1",
                                         "--reconnect_timeout", "8"};
  for (auto& flag : ClusterFlagsOn(2, 2, relay.port())) {
    agent_argv.push_back(flag);
  }
  Subprocess agent(agent_argv);
  auto coord = StartCoordinator(2, 2, {"/bin/sh", "-c", worker},
                                {"--no_python", "--max_restarts", "0"});
  ASSERT_TRUE(agent.WaitForOutput("[rank 1] done", seconds(20)))
      << agent.Output() << coord->Output();
  // Once the coordinator has rank 1's exit, machine 1 hears nothing more
  // until the cut.
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto status = PsJson(port_);
        if (!status || status->ranks_size() != 2) return false;
        return status->ranks(1).state() == "succeeded";
      },
      seconds(20)))
      << coord->Output();
  relay.Hold();
  std::ofstream(go).put('1');
  ASSERT_TRUE(coord->WaitForOutput("job succeeded", seconds(20)))
      << coord->Output();
  relay.CutAndResume();
  EXPECT_EQ(agent.Wait(seconds(30)), 0) << agent.Output();
  EXPECT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  std::filesystem::remove_all(dir_template);
}

TEST_F(LauncherTest, AFrozenCoordinatorDoesNotBlameTheAgentsForItsStall) {
  // The coordinator is frozen (SIGSTOP) for 2 s, over three times the
  // heartbeat timeout (0.6 s) and within the agents' lease (10 s). When it
  // runs again it reads the heartbeats queued meanwhile, and loses no one:
  // generation 0 runs to its end.
  const std::vector<std::string> flags = {
      "--heartbeat_interval", "0.2", "--lease",    "10",
      "--max_restarts",       "1",   "--no_python"};
  const std::string worker =
      "echo start gen $TRL_GENERATION; sleep 5; echo end gen $TRL_GENERATION";
  auto agent = StartAgent(2, 2, 1, flags);
  auto coord = StartCoordinator(2, 2, {"/bin/sh", "-c", worker}, flags);
  ASSERT_TRUE(agent->WaitForOutput("start gen 0", seconds(20)))
      << agent->Output() << coord->Output();
  coord->Signal(SIGSTOP);
  std::this_thread::sleep_for(seconds(2));  // the fault is a duration
  coord->Signal(SIGCONT);
  EXPECT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  EXPECT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
  EXPECT_EQ(coord->Stderr().find("sent no heartbeat"), std::string::npos)
      << coord->Output();
  EXPECT_EQ(coord->Stdout().find("start gen 1"), std::string::npos)
      << coord->Output();
  EXPECT_NE(coord->Stderr().find("the coordinator did not run for"),
            std::string::npos)
      << coord->Output();
}

// The guardian process of a daemon (its child named trl-guardian), or 0.
pid_t GuardianOf(pid_t daemon) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string text = ReadKernelFile(entry.path() / "stat");
    const size_t open = text.find('('), close = text.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 2));
    char state;
    pid_t parent = 0;
    rest >> state >> parent;
    if (parent == daemon &&
        text.substr(open + 1, close - open - 1) == "trl-guardian") {
      return std::stoi(name);
    }
  }
  return 0;
}

TEST_F(LauncherTest, AnAgentsSweepLeavesAnotherHostsProcessesAlone) {
  // A process of machine 1 for this coordinator, started before machine
  // 1's agent, in another network namespace: another host's, as test hosts
  // are (they share this pid namespace, so a spare that took machine 1 on
  // another test host was swept, its agent with it, in CI). The agent's
  // sweep leaves it alone.
  // In a session of its own: a sweep that took it would kill its process
  // group, which is not ours then.
  Subprocess other(
      {"/usr/bin/setsid", "/usr/bin/unshare", "--net", "sleep", "60"},
      {"TRL_LAUNCH_COORDINATOR=127.0.0.1:" + std::to_string(port_),
       "TRL_MACHINE_RANK=1"});
  std::this_thread::sleep_for(milliseconds(300));
  if (other.pid() <= 0 || !ProcessExists(other.pid()) ||
      std::filesystem::read_symlink("/proc/" + std::to_string(other.pid()) +
                                    "/ns/net") ==
          std::filesystem::read_symlink("/proc/self/ns/net")) {
    GTEST_SKIP() << "no network namespace of its own here: " << other.Output();
  }
  auto coord = StartCoordinator(2, 4, {"/bin/sh", "-c", "exit 0"});
  auto agent = StartAgent(2, 4, 1);
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  EXPECT_EQ(agent->Wait(seconds(10)), 0) << agent->Output();
  EXPECT_TRUE(ProcessExists(other.pid()))
      << "another host's process was swept\n"
      << agent->Output();
  other.Signal(SIGKILL);
}

TEST_F(LauncherTest, WhatAKilledAgentsWorkersLeftIsEndedByTheNextAgent) {
  // A worker starts a daemon that leaves its session and clears its
  // environment; then its agent is killed (SIGKILL: nothing of it runs to
  // clean up). The workers die with it (PR_SET_PDEATHSIG), the daemon does
  // not. With the agent's guardian killed too, the next agent on the host
  // ends it: it is in the dead agent's cgroup.
  if (Cgroup2MountPoint().empty()) GTEST_SKIP() << "no cgroup2 here";
  const std::vector<std::string> flags = {"--max_restarts", "1", "--no_python"};
  const std::string worker =
      "if [ \"$GROUP_RANK\" = 1 ] && [ \"$TRL_GENERATION\" = 0 ]; then "
      "env -i setsid sleep 300 </dev/null >/dev/null 2>&1 & "
      "echo escaped pid $!; fi; "
      "if [ \"$TRL_GENERATION\" = 0 ]; then exec sleep 60; fi";
  auto first = StartAgent(2, 2, 1, flags);
  auto coord = StartCoordinator(2, 2, {"/bin/sh", "-c", worker}, flags);
  ASSERT_TRUE(first->WaitForOutput("escaped pid", seconds(20)))
      << first->Output() << coord->Output();
  static const std::regex pattern("escaped pid ([0-9]+)");
  std::smatch match;
  const std::string out = first->Stdout();
  ASSERT_TRUE(std::regex_search(out, match, pattern));
  const pid_t escaped = std::stoi(match[1]);
  worker_pids_.insert(escaped);
  // Not a cgroup agent (inside `ip netns exec`, say): nothing to show.
  const std::string cgroup = [&] {
    std::ifstream in("/proc/" + std::to_string(escaped) + "/cgroup");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("0::", 0) == 0) return line;  // the cgroup2 line
    }
    return std::string("no cgroup2 line");
  }();
  if (cgroup.find("trl-agent-") == std::string::npos) {
    first->Signal(SIGKILL);
    coord->Signal(SIGKILL);
    kill(escaped, SIGKILL);
    GTEST_SKIP() << "workers run without a cgroup here: " << cgroup;
  }
  // Its guardian (job_guardian.h) would end the daemon with the agent:
  // killed first, it leaves the next agent to do that.
  const pid_t guardian = GuardianOf(first->pid());
  ASSERT_GT(guardian, 0) << "the agent has no guardian";
  kill(guardian, SIGKILL);
  first->Signal(SIGKILL);
  first->Wait(seconds(10));
  ASSERT_TRUE(coord->WaitForOutput("disconnected", seconds(20)))
      << coord->Output();
  ASSERT_TRUE(ProcessRuns(escaped)) << "the daemon died with its agent anyway";
  auto second = StartAgent(2, 2, 1, flags);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessRuns(escaped); }, seconds(10)))
      << "the escaped daemon outlived its agent and the next one";
  EXPECT_EQ(coord->Wait(seconds(40)), 0) << coord->Output();
  EXPECT_EQ(second->Wait(seconds(40)), 0) << second->Output();
}

// Where workers get no cgroup (inside `ip netns exec`, a fresh /sys), a
// daemon that left its session and cleared its environment is found by the
// agent's guardian, which noted it as the agent's descendant: killed with
// SIGKILL and never replaced, the agent still leaves nothing behind
// (invariant 3).
TEST_F(LauncherTest, WhatAKilledAgentsWorkersLeftEndsWithItWithoutACgroup) {
  if (geteuid() != 0) GTEST_SKIP() << "hiding the cgroups needs root";
  const std::vector<std::string> flags = {"--max_restarts", "0", "--no_python"};
  const std::string worker =
      "if [ \"$GROUP_RANK\" = 1 ]; then "
      "env -i setsid sleep 300 </dev/null >/dev/null 2>&1 & "
      "echo escaped pid $!; fi; exec sleep 60";
  std::vector<std::string> argv = {
      "/usr/bin/unshare",
      "--mount",
      "--propagation",
      "private",
      "/bin/sh",
      "-c",
      "mount -t tmpfs none /sys/fs/cgroup && exec \"$@\"",
      "sh",
      TRL_AGENT_BIN,
      "--machine_rank",
      "1"};
  for (auto& flag : ClusterFlags(2, 2)) argv.push_back(flag);
  for (auto& flag : flags) argv.push_back(flag);
  Subprocess agent(argv);
  auto coord = StartCoordinator(2, 2, {"/bin/sh", "-c", worker}, flags);
  ASSERT_TRUE(agent.WaitForOutput("escaped pid", seconds(20)))
      << agent.Output() << coord->Output();
  static const std::regex pattern("escaped pid ([0-9]+)");
  std::smatch match;
  const std::string out = agent.Stdout();
  ASSERT_TRUE(std::regex_search(out, match, pattern));
  const pid_t escaped = std::stoi(match[1]);
  worker_pids_.insert(escaped);
  std::ifstream cgroup_file("/proc/" + std::to_string(escaped) + "/cgroup");
  const std::string cgroup((std::istreambuf_iterator<char>(cgroup_file)),
                           std::istreambuf_iterator<char>());
  ASSERT_EQ(cgroup.find("trl-agent-"), std::string::npos)
      << "the workers got a cgroup after all: " << cgroup;
  // Noted by the guardian (every second), then the agent is killed.
  std::this_thread::sleep_for(seconds(2));
  agent.Signal(SIGKILL);
  agent.Wait(seconds(10));
  EXPECT_TRUE(WaitUntil([&] { return !ProcessRuns(escaped); }, seconds(5)))
      << "the escaped daemon outlived its agent";
  coord->Signal(SIGTERM);
  coord->Wait(seconds(40));
}

}  // namespace
}  // namespace trl::testing

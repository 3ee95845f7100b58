// A job end to end with the real binaries on loopback: success, the
// environment every rank sees, a failure's exit code.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/kernel_files.h"
#include "common/listen_port_range.h"
#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

TEST_F(LauncherTest, SingleMachineJobSucceeds) {
  auto coord = StartCoordinator(1, 2, Worker());
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  const std::string out = coord->Stdout();
  RememberWorkerPids(out);
  EXPECT_NE(out.find("[rank 0] rank 0 of 2"), std::string::npos) << out;
  EXPECT_NE(out.find("[rank 1] rank 1 of 2"), std::string::npos) << out;
  EXPECT_NE(coord->Stderr().find("succeeded"), std::string::npos);
  EXPECT_EQ(worker_pids_.size(), 2u);
}

TEST_F(LauncherTest, TwoMachinesGetContiguousRanksAndOneRendezvous) {
  // The agent starts first and waits for the coordinator: in this test's
  // fresh HOME, first for the ~/.trl/token that `trl-coord start` creates.
  auto agent = StartAgent(2, 4, 1);
  ASSERT_TRUE(agent->WaitForOutput("waiting for the auth token", seconds(10)))
      << agent->Output();
  auto coord = StartCoordinator(2, 4, Worker({"--print_env"}));
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
  const std::string out = coord->Stdout() + agent->Stdout();
  RememberWorkerPids(out);

  // Invariant 2: ranks 0..3 once each, agreeing on world size and rendezvous.
  std::string master_port;
  for (int rank = 0; rank < 4; ++rank) {
    const auto env = EnvOfRank(out, rank);
    ASSERT_FALSE(env.empty()) << "rank " << rank << " missing:\n" << out;
    EXPECT_EQ(env.at("RANK"), std::to_string(rank));
    EXPECT_EQ(env.at("LOCAL_RANK"), std::to_string(rank % 2));
    EXPECT_EQ(env.at("GROUP_RANK"), std::to_string(rank / 2));
    EXPECT_EQ(env.at("WORLD_SIZE"), "4");
    EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "2");
    EXPECT_EQ(env.at("GROUP_WORLD_SIZE"), "2");
    EXPECT_EQ(env.at("MASTER_ADDR"), "127.0.0.1");
    EXPECT_EQ(env.at("TORCHELASTIC_RESTART_COUNT"), "0");
    EXPECT_EQ(env.at("ACCELERATE_USE_CPU"), "True");
    EXPECT_EQ(env.at("GLOO_SOCKET_IFNAME"), "lo");
    // The workers' store: a port of its own, TLS that they verify with
    // the token's identity (public certificate, name trl-launch).
    EXPECT_EQ(env.at("TRL_COORDINATOR_ADDR").rfind("127.0.0.1:", 0), 0u);
    EXPECT_NE(env.at("TRL_COORDINATOR_ADDR"),
              "127.0.0.1:" + std::to_string(port_));
    EXPECT_EQ(env.at("TRL_TLS_SERVER_NAME"), "trl-launch");
    EXPECT_EQ(env.count("TRL_TLS_CERT"), 0u);
    EXPECT_EQ(env.count("TRL_TLS_KEY"), 0u);
    if (rank == 0) master_port = env.at("MASTER_PORT");
    EXPECT_EQ(env.at("MASTER_PORT"), master_port);
    EXPECT_NE(env.at("MASTER_PORT"), std::to_string(port_));
  }
  EXPECT_EQ(EnvOfRank(out, 4).size(), 0u);
  EXPECT_EQ(worker_pids_.size(), 4u);
  // Machine 1's output is on machine 1's console, not on machine 0's.
  EXPECT_EQ(coord->Stdout().find("[rank 2]"), std::string::npos);
  EXPECT_NE(agent->Stdout().find("[rank 2]"), std::string::npos);
}

TEST_F(LauncherTest, FailingWorkerEndsTheJobWithItsExitCode) {
  auto agent = StartAgent(2, 4, 1);
  auto coord = StartCoordinator(
      2, 4, Worker({"--exit_rank", "3", "--exit_code", "7", "--sleep", "0.3"}));
  ASSERT_EQ(coord->Wait(seconds(30)), 7) << coord->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 7) << agent->Output();
  RememberWorkerPids(coord->Stdout() + agent->Stdout());
  const std::string log = coord->Stderr();
  EXPECT_NE(log.find("failed: rank 3 (local rank 1 on machine 1, host"),
            std::string::npos)
      << log;
  // It names the program that ran, as machine 1's agent resolved it.
  EXPECT_NE(log.find(std::string("exited with code 7 (program ") +
                     TRL_ENV_WORKER_BIN + ")"),
            std::string::npos)
      << log;
  // The failing rank's last output is shown.
  EXPECT_NE(log.find("| rank 3 of 4"), std::string::npos) << log;
}

TEST_F(LauncherTest, WorkersStillRunningAreStoppedWhenAPeerFails) {
  // Every rank announces itself in a shared directory; rank 0 fails once all
  // four are up, and the others would sleep for a minute.
  const std::string marks =
      ::testing::TempDir() + "/trl-marks-" + std::to_string(port_);
  std::filesystem::create_directories(marks);
  const std::string script =
      "echo \"pid $$: up\"; touch \"$0/$RANK\"; "
      "if [ \"$RANK\" = 0 ]; then "
      "  for i in $(seq 1 500); do "
      "    [ $(ls \"$0\" | wc -l) = 4 ] && exit 4; sleep 0.02; "
      "  done; exit 5; "
      "fi; exec sleep 60";
  auto agent = StartAgent(2, 4, 1);
  auto coord = StartCoordinator(2, 4, {"/bin/sh", "-c", script, marks});
  ASSERT_EQ(coord->Wait(seconds(30)), 4) << coord->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 4) << agent->Output();
  const std::string out = coord->Stdout() + agent->Stdout();
  static const std::regex pid_pattern("pid ([0-9]+): up");
  for (std::sregex_iterator it(out.begin(), out.end(), pid_pattern), end;
       it != end; ++it) {
    worker_pids_.insert(std::stoi((*it)[1]));
  }
  EXPECT_EQ(worker_pids_.size(), 4u) << out;
  std::filesystem::remove_all(marks);
}

TEST_F(LauncherTest, GpuConfigStartsWithoutGpusAndGetsAnNcclId) {
  std::vector<std::string> argv = {
      TRL_COORD_BIN,
      "start",
      "--config_file",
      std::string(TRL_SOURCE_DIR) +
          "/tests/data/accelerate_configs/multi_gpu.yaml",
      "--num_processes",
      "2",
      "--main_process_port",
      std::to_string(port_),
      TRL_ENV_WORKER_BIN,
      "--print_env"};
  Subprocess coord(argv);
  ASSERT_EQ(coord.Wait(seconds(30)), 0) << coord.Output();
  const std::string out = coord.Stdout();
  RememberWorkerPids(out);
  const auto rank0 = EnvOfRank(out, 0);
  const auto rank1 = EnvOfRank(out, 1);
  EXPECT_EQ(rank0.at("ACCELERATE_MIXED_PRECISION"), "bf16");
  EXPECT_EQ(rank0.count("ACCELERATE_USE_CPU"), 0u);
  if (access("/dev/nvidia0", F_OK) != 0) {
    EXPECT_NE(coord.Stderr().find("asks for GPUs (distributed_type MULTI_GPU) "
                                  "but this machine has none"),
              std::string::npos)
        << coord.Stderr();
    EXPECT_NE(coord.Stderr().find("to run on CPUs, pass --cpu"),
              std::string::npos)
        << coord.Stderr();
  }
#ifdef TRL_HAVE_NCCL
  // One fresh id for the generation, the same on every rank.
  ASSERT_EQ(rank0.count("TRL_NCCL_UNIQUE_ID"), 1u) << coord.Output();
  EXPECT_EQ(rank0.at("TRL_NCCL_UNIQUE_ID").size(), 256u);
  EXPECT_EQ(rank0.at("TRL_NCCL_UNIQUE_ID"), rank1.at("TRL_NCCL_UNIQUE_ID"));
#endif
}

TEST_F(LauncherTest, MissingProgramIsAClearFailure) {
  // Found missing by the agent's check, before any rank starts: exit 2
  // (a usage error), not the 127 of a worker that could not start.
  auto coord = StartCoordinator(1, 1, {"no-such-program-xyz"});
  ASSERT_EQ(coord->Wait(seconds(30)), 2) << coord->Output();
  EXPECT_NE(coord->Stderr().find("machine 0 (host "), std::string::npos)
      << coord->Output();
  EXPECT_NE(coord->Stderr().find("'no-such-program-xyz' was not found on PATH"),
            std::string::npos)
      << coord->Output();
  EXPECT_NE(coord->Stderr().find("nothing was started"), std::string::npos)
      << coord->Output();
}

// `start --log_dir` covers every machine: the agent of machine 1, given no
// --log_dir of its own, keeps its ranks' logs in the coordinator's (one tree
// on a shared file system; here both machines share this one).
TEST_F(LauncherTest, PerRankLogFilesOfEveryMachine) {
  const std::string log_dir =
      ::testing::TempDir() + "/trl-logs-" + std::to_string(port_);
  auto agent = StartAgent(2, 4, 1);
  auto coord = StartCoordinator(2, 4, Worker(), {"--log_dir", log_dir});
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
  RememberWorkerPids(coord->Stdout());
  RememberWorkerPids(agent->Stdout());
  EXPECT_NE(agent->Stderr().find("(the coordinator's --log_dir)"),
            std::string::npos)
      << agent->Output();
  // One directory per job; gen0/rank<R>.log inside.
  int found = 0;
  for (const auto& job : std::filesystem::directory_iterator(log_dir)) {
    for (int rank = 0; rank < 4; ++rank) {
      std::ifstream log(job.path() / "gen0" /
                        ("rank" + std::to_string(rank) + ".log"));
      std::string line;
      std::getline(log, line);
      EXPECT_NE(line.find("rank " + std::to_string(rank) + " of 4"),
                std::string::npos)
          << "rank " << rank << ": " << line;
      ++found;
    }
  }
  EXPECT_EQ(found, 4);
  std::filesystem::remove_all(log_dir);
}

// FreePort's port is this process's until it exits: another test process
// cannot take its reservation (an abstract socket named after the port),
// and it lies below the kernel's ephemeral ports, which outgoing
// connections take, and below the span coordinators pick MASTER_PORT from.
TEST(FreePortTest, APortIsReservedAndOutsideTheEphemeralRange) {
  std::set<int> ports;
  for (int i = 0; i < 20; ++i) {
    const int port = FreePort();
    ASSERT_GE(port, 16384);
    ASSERT_LE(port, 24574);
    EXPECT_TRUE(ports.insert(port).second) << "port " << port << " twice";
    // What another process's FreePort would try for the same port.
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    const std::string name = "trl-test-port-" + std::to_string(port);
    std::memcpy(addr.sun_path + 1, name.data(), name.size());
    const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) +
                                               1 + name.size());
    EXPECT_NE(bind(fd, reinterpret_cast<sockaddr*>(&addr), length), 0)
        << "port " << port << " was not reserved";
    close(fd);
  }
  const auto ephemeral = ParsePortRange(
      ReadKernelFile("/proc/sys/net/ipv4/ip_local_port_range", 64));
  ASSERT_TRUE(ephemeral.has_value());
  const auto master_ports = ListenPortsBelow(*ephemeral);
  ASSERT_TRUE(master_ports.has_value());
  EXPECT_GT(master_ports->first, 24575)
      << "ephemeral ports start at " << ephemeral->first
      << ": coordinators pick MASTER_PORT from " << master_ports->first;
}

}  // namespace
}  // namespace trl::testing

// Shared pieces of the integration tests: the real binaries, run on
// loopback with a fresh port, and the checks every test ends with.
#ifndef TRL_TESTS_INTEGRATION_LAUNCHER_FIXTURE_H_
#define TRL_TESTS_INTEGRATION_LAUNCHER_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/integration/subprocess.h"

namespace trl::testing {

using std::chrono::milliseconds;
using std::chrono::seconds;

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override { port_ = FreePort(); }

  // Invariant 3: nothing is left behind. Every worker pid a test saw is
  // gone and the coordinator's port is free again.
  void TearDown() override {
    for (pid_t pid : worker_pids_) {
      EXPECT_TRUE(WaitUntil([pid] { return !ProcessExists(pid); }, seconds(5)))
          << "worker " << pid << " survived the job";
    }
    EXPECT_TRUE(WaitUntil([this] { return PortIsFree(port_); }, seconds(5)))
        << "port " << port_ << " is still bound";
  }

  std::vector<std::string> ClusterFlags(int machines, int processes) const {
    return ClusterFlagsOn(machines, processes, port_);
  }
  // The same flags for a coordinator reached on `port` (a relay's).
  static std::vector<std::string> ClusterFlagsOn(int machines, int processes,
                                                 int port) {
    return {
        "--num_machines",          std::to_string(machines), "--num_processes",
        std::to_string(processes), "--main_process_ip",      "127.0.0.1",
        "--main_process_port",     std::to_string(port),     "--use_cpu"};
  }

  std::unique_ptr<Subprocess> StartCoordinator(
      int machines, int processes, std::vector<std::string> command,
      std::vector<std::string> extra_flags = {}) {
    std::vector<std::string> argv = {TRL_COORD_BIN, "start"};
    for (auto& flag : ClusterFlags(machines, processes)) argv.push_back(flag);
    for (auto& flag : extra_flags) argv.push_back(flag);
    for (auto& arg : command) argv.push_back(arg);
    return std::make_unique<Subprocess>(argv);
  }

  std::unique_ptr<Subprocess> StartAgent(int machines, int processes,
                                         int machine_rank,
                                         std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {TRL_AGENT_BIN, "--machine_rank",
                                     std::to_string(machine_rank)};
    for (auto& flag : ClusterFlags(machines, processes)) argv.push_back(flag);
    for (auto& flag : extra) argv.push_back(flag);
    return std::make_unique<Subprocess>(argv);
  }

  // A hot spare (trl-agent --spare) for the job.
  std::unique_ptr<Subprocess> StartSpare(int machines, int processes,
                                         std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {TRL_AGENT_BIN, "--spare"};
    for (auto& flag : ClusterFlags(machines, processes)) argv.push_back(flag);
    for (auto& flag : extra) argv.push_back(flag);
    return std::make_unique<Subprocess>(argv);
  }

  // Whether `process` printed "start gen 0 rank R" for each of `ranks`
  // within 20 s.
  static bool PrintedGenerationZeroStarts(const Subprocess& process,
                                          const std::vector<int>& ranks) {
    return WaitUntil(
        [&] {
          const std::string out = process.Stdout();
          for (int rank : ranks) {
            if (out.find("start gen 0 rank " + std::to_string(rank)) ==
                std::string::npos) {
              return false;
            }
          }
          return true;
        },
        seconds(20));
  }

  // The bundled worker with extra arguments.
  static std::vector<std::string> Worker(std::vector<std::string> args = {}) {
    std::vector<std::string> command = {TRL_ENV_WORKER_BIN};
    command.insert(command.end(), args.begin(), args.end());
    return command;
  }

  // Records the pids that trl-env-worker printed, for TearDown's check.
  void RememberWorkerPids(const std::string& output) {
    static const std::regex pid_pattern(", pid ([0-9]+):");
    for (std::sregex_iterator it(output.begin(), output.end(), pid_pattern),
         end;
         it != end; ++it) {
      worker_pids_.insert(std::stoi((*it)[1]));
    }
  }

  // Lines "ENV NAME=value" that rank `rank` printed.
  static std::map<std::string, std::string> EnvOfRank(const std::string& output,
                                                      int rank) {
    std::map<std::string, std::string> env;
    const std::string prefix = "[rank " + std::to_string(rank) + "] ENV ";
    size_t at = 0;
    while ((at = output.find(prefix, at)) != std::string::npos) {
      const size_t start = at + prefix.size();
      const size_t end = output.find('\n', start);
      const std::string entry = output.substr(start, end - start);
      const size_t equals = entry.find('=');
      env[entry.substr(0, equals)] = entry.substr(equals + 1);
      at = end;
    }
    return env;
  }

  int port_ = 0;
  std::set<pid_t> worker_pids_;
};

}  // namespace trl::testing

#endif  // TRL_TESTS_INTEGRATION_LAUNCHER_FIXTURE_H_

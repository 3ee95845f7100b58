// trl-agent: runs on every machine but machine 0 (where `trl-coord start`
// runs its agent itself). Parses flags, builds the agent and wires signals.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "agent/agent.h"
#include "agent/orphans.h"
#include "common/cli_errors.h"
#include "common/launch_options.h"
#include "common/local_machine.h"
#include "common/logging.h"
#include "common/network.h"
#include "common/stop_signals.h"

int main(int argc, char** argv) {
  trl::BlockStopSignals();
  trl::BecomeChildSubreaper();
  CLI::App app{
      "trl-agent: joins a trl-launch job and runs this machine's workers",
      "trl-agent"};
  trl::LaunchOptions options;
  trl::AddLaunchFlags(app, options);
  if (auto exit_code = trl::ParseCommandLine(app, argc, argv)) {
    return *exit_code;
  }
  auto log = trl::ComponentLogger("agent");
  const trl::LocalMachine machine = trl::ReadLocalMachine();
  auto config = trl::ResolveLaunchConfig(options, machine);
  if (!config.ok()) {
    std::fprintf(stderr, "trl-agent: error: %s\n",
                 std::string(config.status().message()).c_str());
    return 2;
  }
  auto coordinator = trl::ResolveHost(config->main_process_ip);
  if (!coordinator.ok()) {
    std::fprintf(stderr, "trl-agent: error: main_process_ip: %s\n",
                 std::string(coordinator.status().message()).c_str());
    return 2;
  }
  if (config->UsesGpus() && machine.gpu_count == 0) {
    log->warn(
        "the config asks for GPUs (distributed_type {}) but this "
        "machine has none; starting anyway",
        config->distributed_type);
  }

  trl::AgentOptions agent_options;
  agent_options.config = *config;
  agent_options.coordinator_host = *coordinator;
  agent_options.coordinator_port = config->main_process_port;
  agent_options.advertise_addr = options.advertise_addr;
  agent_options.log_dir = options.log_dir;
  auto millis = [](double seconds) {
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  };
  agent_options.heartbeat_interval = millis(options.heartbeat_interval_s);
  agent_options.lease = millis(options.LeaseSeconds());
  agent_options.worker_heartbeat_timeout =
      millis(options.worker_heartbeat_timeout_s);
  agent_options.connect_timeout = std::chrono::milliseconds(
      static_cast<int64_t>(options.rdzv_timeout_s * 1000));
  agent_options.local_gpu_count = machine.gpu_count;
  agent_options.inherited_environment = trl::CurrentEnvironment();
  agent_options.working_directory = std::filesystem::current_path().string();

  trl::Console console(stdout, stderr);
  trl::Agent agent(agent_options, &console);
  trl::StopSignalWatcher watcher(
      [&agent](int signal) { agent.RequestStop(signal); });
  return agent.Run();
}

// trl-agent: runs on every machine but machine 0 (where `trl-coord start`
// runs its agent itself). Parses flags, builds the agent and wires signals.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

#include "absl/strings/str_join.h"
#include "agent/cleanup/job_guardian.h"
#include "agent/cleanup/orphans.h"
#include "agent/session/agent.h"
#include "agent/workers/worker_cgroup.h"
#include "common/auth_token.h"
#include "common/cli_errors.h"
#include "common/daemon_process.h"
#include "common/derived_identity.h"
#include "common/grpc_logging.h"
#include "common/launch_options.h"
#include "common/local_machine.h"
#include "common/logging.h"
#include "common/network.h"
#include "common/stop_signals.h"

int main(int argc, char** argv) {
  trl::PrepareDaemonProcess();
  trl::RouteGrpcLogs();
  trl::BlockStopSignals();
  trl::IgnoreBrokenPipes();
  trl::BecomeChildSubreaper();
  trl::RemoveStaleWorkerCgroups();
  CLI::App app{
      "trl-agent: joins a trl-launch job and runs this machine's workers",
      "trl-agent"};
  trl::LaunchOptions options;
  trl::AddLaunchFlags(app, options);
  // `accelerate launch --machine_rank 1 train.py` on every machine is what
  // a newcomer knows: a command after the flags is explained, not merely
  // "not expected".
  app.allow_extras();
  if (auto exit_code = trl::ParseCommandLine(app, argc, argv)) {
    return *exit_code;
  }
  std::vector<std::string> extras = app.remaining();
  // `-- train.py`: the marker is not part of what was given.
  if (!extras.empty() && extras.front() == "--") extras.erase(extras.begin());
  if (!extras.empty()) {
    const std::string joined = absl::StrJoin(extras, " ");
    if (extras.front().rfind("-", 0) == 0) {
      std::fprintf(stderr,
                   "trl-agent: error: not a trl-agent flag: %s\nRun with "
                   "--help for the flags.\n",
                   joined.c_str());
    } else {
      std::fprintf(
          stderr,
          "trl-agent: error: trl-agent takes no command (given: %s): the "
          "coordinator sends the one given to `trl-coord start` to every "
          "machine. Run trl-agent with its flags only, e.g. trl-agent "
          "--config_file multi_node.yaml --machine_rank 1\n",
          joined.c_str());
    }
    return 2;
  }
  // Before any thread starts, and before the token is read.
  trl::StartJobGuardian();
  auto log = trl::ComponentLogger("agent");
  const trl::LocalMachine machine = trl::ReadLocalMachine();
  std::vector<std::string> notes;
  auto config = trl::ResolveLaunchConfig(options, machine, &notes);
  if (!config.ok()) {
    std::fprintf(stderr, "trl-agent: error: %s\n",
                 std::string(config.status().message()).c_str());
    return 2;
  }
  for (const auto& note : notes) log->info("{}", note);
  if (options.spare && options.machine_rank_flag != nullptr &&
      options.machine_rank_flag->count() > 0) {
    std::fprintf(stderr,
                 "trl-agent: error: --spare and --machine_rank %d: a spare "
                 "has no machine rank until it takes a lost machine's place; "
                 "give one or the other\n",
                 options.machine_rank);
    return 2;
  }
  std::optional<trl::WorkerUser> worker_user;
  if (!options.worker_user.empty()) {
    auto user = trl::ResolveWorkerUser(options.worker_user);
    if (!user.ok()) {
      std::fprintf(stderr, "trl-agent: error: %s\n",
                   std::string(user.status().message()).c_str());
      return 2;
    }
    worker_user = *std::move(user);
    if (absl::Status log_dir = trl::CheckLogDirForWorkerUser(options.log_dir);
        !log_dir.ok()) {
      std::fprintf(stderr, "trl-agent: error: %s\n",
                   std::string(log_dir.message()).c_str());
      return 2;
    }
  }
  auto coordinator = trl::ResolveHost(config->main_process_ip);
  if (!coordinator.ok()) {
    std::fprintf(stderr, "trl-agent: error: main_process_ip: %s\n",
                 std::string(coordinator.status().message()).c_str());
    return 2;
  }
  if (const std::string warning = trl::MissingGpuWarning(*config, machine);
      !warning.empty()) {
    log->warn("{}", warning);
  }

  auto auth_token =
      trl::ResolveAuthToken(options.auth_token_file, options.insecure,
                            /*create_if_missing=*/false);
  // Agents may start before the coordinator has created ~/.trl/token: wait
  // for it as for the coordinator itself.
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(
                           static_cast<int64_t>(options.rdzv_timeout_s * 1000));
  // Said at once, then every --waiting_report_interval (0: once).
  const auto token_wait_started = std::chrono::steady_clock::now();
  const auto report_every = std::chrono::milliseconds(
      static_cast<int64_t>(options.waiting_report_interval_s * 1000));
  std::optional<std::chrono::steady_clock::time_point> told_at;
  while (absl::IsNotFound(auth_token.status()) &&
         std::chrono::steady_clock::now() < give_up) {
    if (const int signal = trl::PendingStopSignal()) return 128 + signal;
    const auto now = std::chrono::steady_clock::now();
    if (!told_at ||
        (report_every.count() > 0 && now - *told_at >= report_every)) {
      log->warn(
          "waiting for the auth token for {} s (the wait ends in {} s, "
          "--rdzv_timeout): {}",
          std::chrono::duration_cast<std::chrono::seconds>(now -
                                                           token_wait_started)
              .count(),
          std::chrono::duration_cast<std::chrono::seconds>(give_up - now)
              .count(),
          std::string(auth_token.status().message()));
      told_at = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auth_token =
        trl::ResolveAuthToken(options.auth_token_file, options.insecure, false);
  }
  if (!auth_token.ok()) {
    std::fprintf(stderr, "trl-agent: error: %s\n",
                 std::string(auth_token.status().message()).c_str());
    return 2;
  }
  const std::string token_origin = trl::TokenOrigin(options.auth_token_file);
  trl::ForgetTokenFromEnvironment();
  trl::AgentOptions agent_options =
      trl::AgentOptionsFromFlags(*config, options, machine, *coordinator);
  agent_options.token_origin = token_origin;
  agent_options.worker_user = worker_user;
  // The default: TLS with the identity derived from the token (never sent);
  // with certificates given, the token as a bearer over their TLS.
  if (!options.insecure && options.tls_cert.empty() &&
      options.tls_key.empty() && options.tls_ca.empty()) {
    auto identity = trl::DeriveIdentity(*auth_token);
    if (!identity.ok()) {
      std::fprintf(stderr, "trl-agent: error: %s\n",
                   std::string(identity.status().message()).c_str());
      return 2;
    }
    agent_options.identity = *std::move(identity);
  } else {
    agent_options.auth_token = *auth_token;
  }

  trl::Console console(stdout, stderr);
  trl::Agent agent(agent_options, &console);
  trl::StopSignalWatcher watcher(
      [&agent](const trl::StopSignal& signal) { agent.RequestStop(signal); });
  return agent.Run();
}

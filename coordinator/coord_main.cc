// trl-coord: `start` runs the coordinator (and machine 0's agent) for one
// job; `ps` shows a running job. Parses flags, builds objects, wires them.
#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "agent/cleanup/job_guardian.h"
#include "agent/cleanup/orphans.h"
#include "agent/session/agent.h"
#include "agent/workers/worker_cgroup.h"
#include "agent/workers/worker_user.h"
#include "common/auth_token.h"
#include "common/cli_errors.h"
#include "common/daemon_process.h"
#include "common/grpc_logging.h"
#include "common/launch_options.h"
#include "common/local_machine.h"
#include "common/logging.h"
#include "common/network.h"
#include "common/private_files.h"
#include "common/stop_signals.h"
#include "common/tls_credentials.h"
#include "common/trl_arguments.h"
#include "common/worker_command.h"
#include "coordinator/access/call_authenticator.h"
#include "coordinator/access/connection_limits.h"
#include "coordinator/access/daemon_credentials.h"
#include "coordinator/access/refused_calls.h"
#include "coordinator/cli/diagnose.h"
#include "coordinator/cli/events.h"
#include "coordinator/cli/logs.h"
#include "coordinator/cli/ps.h"
#include "coordinator/cli/ui.h"
#include "coordinator/cli/uncordon.h"
#include "coordinator/owner/coordinator.h"
#include "coordinator/owner/job_options.h"
#include "coordinator/ports/grpc_service.h"
#include "coordinator/ports/log_relay.h"
#include "coordinator/ports/udp_heartbeat_server.h"
#include "coordinator/record/state_file.h"
#include "coordinator/rendezvous/generation_rendezvous.h"
#include "coordinator/rendezvous/store_service.h"
#include "coordinator/status/http_server.h"
#include "coordinator/status/page.h"
#include "coordinator/status/routes.h"
#include "coordinator/status/status_service.h"

namespace {

using std::chrono::steady_clock;

int Fail(const std::string& message) {
  std::fprintf(stderr, "trl-coord: error: %s\n", message.c_str());
  return 2;
}

struct StartFlags {
  trl::LaunchOptions launch;
  bool no_local_agent = false;
  std::string state_file;
  trl::StatusServiceFlags status;  // the status page and /metrics
  // Connections one address may hold before its unproven ones are cut
  // (connection_limits.h).
  int connections_per_address = 64;
};

// What `start` settles before anything listens: the config as this machine
// resolves it, the address to serve on, the workers' user, the
// credentials, and the coordinator's options (the job resumed from the
// state file, if it is the same job).
struct JobPlan {
  trl::LocalMachine machine;
  trl::AccelerateConfig config;
  std::string host;  // main_process_ip, resolved
  std::optional<trl::WorkerUser> worker_user;
  trl::DaemonCredentials credentials;
  trl::CoordinatorOptions options;
};

// The flags' checks, in the order they were always made; each refusal is
// what `start` prints (exit 2).
absl::StatusOr<JobPlan> PlanJob(const StartFlags& flags,
                                const std::vector<std::string>& command) {
  auto log = trl::ComponentLogger("coord");
  JobPlan plan;
  plan.machine = trl::ReadLocalMachine();
  std::vector<std::string> notes;
  auto config = trl::ResolveLaunchConfig(flags.launch, plan.machine, &notes);
  if (!config.ok()) return config.status();
  if (absl::Status status = trl::CheckStatusAddress(flags.status);
      !status.ok()) {
    return status;
  }
  for (const auto& note : notes) log->info("{}", note);
  if (flags.launch.spare) {
    return absl::InvalidArgumentError(
        "--spare is for trl-agent (a machine waiting to take a lost one's "
        "place); trl-coord start runs the coordinator and machine 0");
  }
  if (!flags.no_local_agent && config->machine_rank != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trl-coord start runs machine 0, but machine_rank is ",
        config->machine_rank, "; run `trl-agent` on the other machines"));
  }
  const auto& o = flags.launch;
  if (!o.worker_user.empty()) {
    auto user = trl::ResolveWorkerUser(o.worker_user);
    if (!user.ok()) return user.status();
    plan.worker_user = *std::move(user);
    if (absl::Status log_dir = trl::CheckLogDirForWorkerUser(o.log_dir);
        !log_dir.ok()) {
      return log_dir;
    }
  }
  auto worker_argv =
      trl::BuildWorkerArgv(command, o.module, o.no_python, o.python);
  if (!worker_argv.ok()) return worker_argv.status();
  auto host = trl::ResolveHost(config->main_process_ip);
  if (!host.ok()) {
    return absl::Status(
        host.status().code(),
        absl::StrCat("main_process_ip: ", host.status().message()));
  }
  plan.host = *host;
  if (config->main_process_port == 0) {  // as Accelerate: a free port
    auto port = trl::PickFreePort(*host);
    if (!port.ok()) return port.status();
    config->main_process_port = *port;
    log->info(
        "main_process_port 0: the coordinator listens on free port {} (give "
        "trl-agent on the other machines --main_process_port {})",
        *port, *port);
  }
  if (const std::string warning = trl::MissingGpuWarning(*config, plan.machine);
      !warning.empty()) {
    log->warn("{}", warning);
  }
  if (config->num_machines > 1 && trl::IsLoopbackAddress(*host) &&
      config->main_process_ip != *host) {
    log->warn(
        "main_process_ip {} is {} on this machine, a loopback address: only "
        "agents on this machine can reach it (Debian maps a host's own name "
        "to 127.0.1.1 in /etc/hosts; give machine 0's network address)",
        config->main_process_ip, *host);
  }
  auto credentials = trl::ResolveDaemonCredentials(o, *host);
  if (!credentials.ok()) return credentials.status();
  plan.credentials = *std::move(credentials);

  trl::CoordinatorOptions& options = plan.options;
  options.config = *config;
  options.launcher_fingerprint = trl::LauncherFingerprint(o);
  // BuildWorkerArgv puts the interpreter (and -u) before a .py script or
  // a module: an agent's own --python may take its place.
  options.worker_argv_runs_python = worker_argv->size() > command.size();
  options.worker_argv = *worker_argv;
  if (!o.log_dir.empty()) {
    // Sent to the agents: a path relative to this shell's directory means
    // nothing on another machine ("../logs" included).
    std::error_code absolute_error;
    const std::filesystem::path absolute =
        std::filesystem::absolute(o.log_dir, absolute_error);
    if (absolute_error) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--log_dir ", o.log_dir, ": ", absolute_error.message()));
    }
    options.log_dir = absolute.lexically_normal().string();
  }
  auto job_id = trl::NewJobId();
  if (!job_id.ok()) return job_id.status();
  options.job_id = *job_id;
  options.run_id = trl::NewRunId();  // kept instead when the job resumes
  options.identity = trl::JobIdentity(*worker_argv, *config);
  trl::ChooseStateFile(flags.state_file, *host, config->main_process_port,
                       &options);
  options.coordinator_address =
      trl::JoinHostPort(*host, config->main_process_port);
  auto policy = trl::JobPolicyFromFlags(o);
  if (!policy.ok()) return policy.status();
  options.policy = *std::move(policy);
  options.waiting_report_interval = std::chrono::milliseconds(
      static_cast<int64_t>(o.waiting_report_interval_s * 1000));
  options.agent_command = trl::AgentCommandFor(o, *config);
  plan.config = *std::move(config);
  return plan;
}

// Everything that serves the job, in the order it starts (and the reverse
// of the order it ends): the NCCL id source, the workers' store and its
// port, the coordinator (the owner), `trl-coord logs`' relay, the main
// port, the connection governor, the status page and the UDP heartbeats.
struct JobServers {
  std::unique_ptr<trl::NcclIdSource> nccl;
  trl::StoreService store;
  std::unique_ptr<trl::CoordinatorServer> store_server;
  std::unique_ptr<trl::Coordinator> core;
  std::unique_ptr<trl::LogRelay> log_relay;
  std::unique_ptr<trl::CoordinatorServer> server;
  std::unique_ptr<trl::ConnectionGovernor> governor;
  std::unique_ptr<trl::StatusHttpServer> status;
  std::unique_ptr<trl::UdpHeartbeatServer> udp_heartbeats;
};

// Starts them into `s`, which the caller holds: on a refusal, what started
// ends after the refusal is said, as it always did.
absl::Status StartServers(const StartFlags& flags, JobPlan& plan,
                          JobServers* s) {
  auto log = trl::ComponentLogger("coord");
  const auto& o = flags.launch;
  const trl::AccelerateConfig& config = plan.config;
  const std::string& host = plan.host;
  const trl::DaemonCredentials& credentials = plan.credentials;
  const std::optional<trl::DerivedIdentity>& identity = credentials.identity;
  trl::CoordinatorOptions& options = plan.options;
  // GPU jobs get a fresh NCCL unique id per generation, from a helper
  // process beside this binary (built when NCCL was found).
  if (const std::string helper = trl::FindNcclRootHelper();
      !helper.empty() && !config.use_cpu) {
    s->nccl = std::make_unique<trl::NcclIdSource>(helper);
  }
  // The workers' rendezvous store (Gloo jobs): on the coordinator's port,
  // or, where that port requires the token's identity (which workers must
  // not hold), on a port of its own with TLS that workers verify with the
  // identity's certificate alone. Either way its calls carry a credential
  // per job and generation.
  const int idle_connection_ms = static_cast<int>(
      trl::SecondsToMillis(o.connection_idle_timeout_s).count());
  if (absl::Status can = trl::CheckCanListen(host, config.main_process_port);
      !can.ok()) {
    return can;
  }
  // Credentials checked on each call's headers, before its body is read
  // (call_authenticator.h): the store's by the current generation's token.
  auto store_token_ok = [s](const std::string& token) {
    return s->store.IsCurrentToken(token);
  };
  if (identity) {
    auto store_credentials = trl::DerivedServerCredentials(*identity, false);
    store_credentials->SetAuthMetadataProcessor(
        std::make_shared<trl::CallAuthenticator>("", store_token_ok));
    auto started =
        trl::CoordinatorServer::Start(host, 0, nullptr, "", store_credentials,
                                      s->store.service(), idle_connection_ms);
    if (!started.ok()) return started.status();
    s->store_server = *std::move(started);
    options.coordinator_address =
        trl::JoinHostPort(host, s->store_server->port());
  }
  options.open_store_generation = [s](const std::string& job_id,
                                      int64_t generation) {
    return s->store.OpenGeneration(job_id, generation);
  };
  s->core = std::make_unique<trl::Coordinator>(
      options,
      [s](const std::string& master_addr) {
        return trl::PrepareRendezvous(master_addr, s->nccl.get());
      },
      [] { return steady_clock::now(); });
  trl::Coordinator& core = *s->core;
  if (!identity && credentials.user_tls.enabled() &&
      !credentials.auth_token.empty()) {
    credentials.server->SetAuthMetadataProcessor(
        std::make_shared<trl::CallAuthenticator>(
            trl::BearerValue(credentials.auth_token), store_token_ok));
  }
  s->log_relay = std::make_unique<trl::LogRelay>(&core);  // `trl-coord logs`
  auto server = trl::CoordinatorServer::Start(
      host, config.main_process_port, &core,
      identity ? "" : credentials.auth_token, credentials.server,
      identity ? nullptr : s->store.service(), idle_connection_ms,
      /*peer_identity=*/identity.has_value(), s->log_relay.get());
  if (!server.ok()) return server.status();
  s->server = *std::move(server);
  // At most 64 connections from one address and a share of the
  // descriptors unproven, on each port (connection_limits.h); registered
  // agents and workers that made an authenticated store call are kept.
  std::vector<int> governed_ports = {s->server->port()};
  if (s->store_server) governed_ports.push_back(s->store_server->port());
  rlimit open_files{};
  getrlimit(RLIMIT_NOFILE, &open_files);
  const uint64_t descriptors = open_files.rlim_cur == RLIM_INFINITY
                                   ? uint64_t{1} << 30
                                   : static_cast<uint64_t>(open_files.rlim_cur);
  if (const auto warning = trl::DescriptorLimitWarning(
          descriptors, config.num_machines,
          static_cast<int>(governed_ports.size()))) {
    log->warn("{}", *warning);
  }
  // Unproven connections: half of what the proven ones leave of the
  // descriptors, shared between the ports (connection_limits.h).
  s->governor = std::make_unique<trl::ConnectionGovernor>(
      governed_ports, flags.connections_per_address, descriptors,
      [s] {
        std::set<std::string> proven = s->core->AgentPeers();
        proven.merge(s->store.AuthenticatedPeers());
        return proven;
      },
      std::chrono::milliseconds(200));
  core.ReportDefences([s] {
    return trl::Coordinator::DefenceCounts{
        trl::RefusedCalls::InProcess(),
        static_cast<uint64_t>(s->governor->cut())};
  });
  trl::StatusSources sources;
  sources.snapshot = [&core] { return core.Status(); };
  sources.status = [&core](const trl::launch::v1::JobStatusRequest& request) {
    return core.Status(request);
  };
  sources.events = [&core] { return core.Events(); };
  s->status = trl::StartStatusService(flags.status, config.main_process_port,
                                      std::move(sources));
  // Heartbeats as UDP datagrams on the same port, if it can be bound.
  if (!o.no_udp_heartbeats) {
    auto udp =
        trl::UdpHeartbeatServer::Start(host, config.main_process_port, &core);
    if (udp.ok()) {
      s->udp_heartbeats = *std::move(udp);
      core.OfferUdpHeartbeats(
          config.main_process_port,
          [](size_t count) {
            auto bytes = trl::RandomBytes(count);
            return bytes.ok() ? *bytes : std::string();
          },
          /*encrypted=*/identity.has_value() || credentials.user_tls.enabled());
    } else {
      log->warn("{}; heartbeats stay on the gRPC stream",
                std::string(udp.status().message()));
    }
  }
  log->info(
      "job {}: coordinator on {} ({}), waiting for {} machine(s), {} "
      "process(es) in all",
      options.job_id, trl::JoinHostPort(host, config.main_process_port),
      identity ? absl::StrCat("TLS with the token's identity; workers' store "
                              "on ",
                              options.coordinator_address)
      : credentials.user_tls.enabled()
          ? std::string("TLS with the given certificates")
          : std::string("plaintext"),
      config.num_machines, config.num_processes);
  if (!credentials.token_origin.empty()) {
    log->info("{}", trl::TokenAdvice(credentials.token_origin,
                                     credentials.token_created));
  }
  if (!options.state_file.empty()) {
    log->info(
        "the job's state and history are kept in {} (after the job: "
        "trl-coord events --state_file {})",
        options.state_file, options.state_file);
  }
  if (auto batch = trl::EffectiveBatchFromArguments(options.worker_argv,
                                                    config.num_processes)) {
    log->info("{}", batch->Describe());
  }
  return absl::OkStatus();
}

// Machine 0's agent, in this process (null with --no_local_agent).
std::unique_ptr<trl::Agent> LocalAgent(const StartFlags& flags,
                                       const JobPlan& plan,
                                       trl::Console* console) {
  if (flags.no_local_agent) return nullptr;
  const auto& o = flags.launch;
  trl::AgentOptions agent_options =
      trl::AgentOptionsFromFlags(plan.config, o, plan.machine, plan.host);
  if (plan.credentials.identity) {
    agent_options.identity = plan.credentials.identity;
  } else {
    agent_options.auth_token = plan.credentials.auth_token;
    // One-way TLS (a certificate, no --tls_ca): machine 0's agent and
    // its workers trust the coordinator's own certificate (self-signed,
    // or a file with its chain up to the root).
    if (!o.tls_cert.empty() && o.tls_ca.empty()) {
      agent_options.tls_ca = o.tls_cert;
    }
  }
  agent_options.worker_user = plan.worker_user;
  // The coordinator is in this very process: no need to wait long.
  agent_options.connect_timeout = std::chrono::seconds(30);
  return std::make_unique<trl::Agent>(agent_options, console);
}

// Serves the job planned until it ends: the servers, machine 0's agent and
// the stop signals; then the end, said. Returns the job's exit code.
int RunJob(const StartFlags& flags, JobPlan plan) {
  auto log = trl::ComponentLogger("coord");
  log->debug("job {} planned (config, token, identity): starting servers",
             plan.options.job_id);
  // Held here, on the heap: the servers' callbacks hold its address.
  const auto servers = std::make_unique<JobServers>();
  if (absl::Status started = StartServers(flags, plan, servers.get());
      !started.ok()) {
    return Fail(std::string(started.message()));
  }
  trl::Coordinator& core = *servers->core;

  trl::Console console(stdout, stderr);
  std::unique_ptr<trl::Agent> local_agent = LocalAgent(flags, plan, &console);
  std::thread agent_thread;
  // A stop signal stops the job everywhere, and reaches the workers as the
  // signal itself (Slurm's SIGUSR1/SIGUSR2 pre-emption notices).
  trl::StopSignalWatcher watcher([&core](const trl::StopSignal& signal) {
    // Every worker on every machine gets the signal itself first, once.
    core.RequestStop(
        absl::StrCat(
            "trl-coord received ", trl::SignalName(signal.number),
            signal.workers_have_it ? " (Slurm sent it to the workers)" : ""),
        128 + signal.number, signal);
  });
  if (local_agent) {
    agent_thread = std::thread([&core, &local_agent] {
      const int exit_code = local_agent->Run();
      // If the local agent ended before the job did (refused, lost), the
      // job cannot run: stop it.
      core.RequestStop(
          absl::StrCat("machine 0's agent ended with exit code ", exit_code),
          exit_code == 0 ? 1 : exit_code);
    });
  }

  std::optional<trl::JobOutcome> outcome;
  while (!outcome) {
    outcome =
        core.WaitForOutcome(steady_clock::now() + std::chrono::seconds(1));
  }
  log->debug("job {} ended ({}): waiting for every agent's farewell",
             plan.options.job_id, trl::JobPhaseName(outcome->phase));
  core.WaitForFarewells(steady_clock::now() + std::chrono::seconds(10));
  if (agent_thread.joinable()) agent_thread.join();
  // `logs -f` clients end with the job, and exit with its code.
  trl::launch::v1::JobEndForLogs job_end;
  job_end.set_exit_code(std::clamp(outcome->exit_code, 0, 255));
  job_end.set_summary(
      absl::StrCat(trl::JobPhaseName(outcome->phase), ": ", outcome->summary));
  servers->log_relay->EndAll(job_end);
  servers->server->Shutdown(1000);

  const auto status = core.Status();
  const std::string& job_id = plan.options.job_id;
  if (outcome->phase == trl::JobPhase::kSucceeded) {
    log->info("job {} succeeded: {}", job_id, outcome->summary);
  } else {
    log->error("job {} {}: {}", job_id, trl::JobPhaseName(outcome->phase),
               outcome->summary);
    for (const auto& failure : status.failures()) {
      for (const auto& line : failure.last_lines()) {
        log->error("  | {}", line);
      }
    }
  }
  return std::clamp(outcome->exit_code, 0, 255);
}

int Start(const StartFlags& flags, const std::vector<std::string>& command) {
  // Before any thread starts, and before the token is read.
  trl::StartJobGuardian();
  auto plan = PlanJob(flags, command);
  if (!plan.ok()) return Fail(std::string(plan.status().message()));
  return RunJob(flags, *std::move(plan));
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil checks every absl::Mutex acquisition (gRPC's locks) for
  // lock-order cycles; at 4096 agents that was 8% of the coordinator's CPU.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  trl::PrepareDaemonProcess();
  trl::RouteGrpcLogs();
  trl::BlockStopSignals();
  trl::IgnoreBrokenPipes();
  trl::BecomeChildSubreaper();
  trl::RemoveStaleWorkerCgroups();  // for machine 0's agent
  CLI::App app{"trl-coord: the coordinator of a trl-launch job", "trl-coord"};
  app.require_subcommand(1);

  StartFlags start_flags;
  CLI::App* start = app.add_subcommand(
      "start", "Run the coordinator and machine 0's workers for a job");
  trl::AddLaunchFlags(*start, start_flags.launch);
  start->add_flag("--no_local_agent,--no-local-agent",
                  start_flags.no_local_agent,
                  "Do not run machine 0's agent in this process");
  start
      ->add_option("--state_file,--state-file", start_flags.state_file,
                   "Where the job's state is kept so that a restarted "
                   "coordinator resumes it (default: "
                   "~/.trl/run, else $XDG_RUNTIME_DIR/trl-launch, "
                   "coord-HOST-PORT.state; env "
                   "TRL_STATE_FILE)")
      ->envname("TRL_STATE_FILE");
  start
      ->add_option(
          "--status_port,--status-port", start_flags.status.port,
          "Port of the status page, its JSON (/api/status) and Prometheus "
          "metrics (/metrics) (default: main_process_port + 1; 0: a free port, "
          "logged; env TRL_STATUS_PORT). If it cannot be bound, the job runs "
          "without it")
      ->envname("TRL_STATUS_PORT");
  start->add_option("--status_address,--status-address",
                    start_flags.status.address,
                    "Address the status page listens on: loopback only "
                    "(default 127.0.0.1); from elsewhere, `trl-coord ui`");
  start->add_flag("--no_status,--no-status", start_flags.status.off,
                  "Serve no status page or metrics");
  start
      ->add_option("--connections_per_address,--connections-per-address",
                   start_flags.connections_per_address,
                   "Connections one address may hold that have not proven "
                   "the token before the oldest are cut (default 64; raise "
                   "it when many agents reach the coordinator through one "
                   "NAT address; env TRL_CONNECTIONS_PER_ADDRESS)")
      ->envname("TRL_CONNECTIONS_PER_ADDRESS")
      ->check(CLI::Range(1, 1 << 20));
  start->prefix_command();
  start->footer(
      "Everything after the flags is the command: a .py script runs as "
      "`python3 -u script args...`.");

  trl::PsFlags ps_flags;
  CLI::App* ps = app.add_subcommand("ps", "Show a running job");
  trl::AddPsFlags(*ps, ps_flags);

  trl::LogsFlags logs_flags;
  CLI::App* logs = app.add_subcommand(
      "logs", "Show the workers' output (retained lines; -f follows)");
  trl::AddLogsFlags(*logs, logs_flags);

  trl::EventsFlags events_flags;
  CLI::App* events = app.add_subcommand(
      "events", "Show a job's history (on the coordinator's machine)");
  trl::AddEventsFlags(*events, events_flags);

  trl::DiagnoseFlags diagnose_flags;
  CLI::App* diagnose = app.add_subcommand(
      "diagnose",
      "Say why each generation of a job ended and where its ranks stood");
  trl::AddDiagnoseFlags(*diagnose, diagnose_flags);

  trl::UncordonFlags uncordon_flags;
  CLI::App* uncordon = app.add_subcommand(
      "uncordon",
      "Let a host cordoned after too many failures be given ranks again");
  trl::AddUncordonFlags(*uncordon, uncordon_flags);

  trl::UiFlags ui_flags;
  CLI::App* ui = app.add_subcommand(
      "ui", "Serve a running job's status page on this machine's loopback");
  trl::AddUiFlags(*ui, ui_flags);

  std::vector<std::string> command;
  if (auto exit_code =
          trl::ParseCommandLineWithCommand(app, *start, argc, argv, &command)) {
    return *exit_code;
  }
  // Only the coordinator can choose a free port (main_process_port 0).
  start_flags.launch.allow_free_port = true;
  if (start->parsed()) return Start(start_flags, command);
  if (events->parsed()) return trl::RunEvents(events_flags);
  if (diagnose->parsed()) return trl::RunDiagnose(diagnose_flags);
  if (logs->parsed()) return trl::RunLogs(logs_flags);
  if (ui->parsed()) return trl::RunUi(ui_flags);
  if (uncordon->parsed()) return trl::RunUncordon(uncordon_flags);
  return trl::RunPs(ps_flags);
}

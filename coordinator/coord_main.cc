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
#include "agent/agent.h"
#include "agent/job_guardian.h"
#include "agent/orphans.h"
#include "agent/worker_cgroup.h"
#include "agent/worker_user.h"
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
#include "coordinator/access/refused_calls.h"
#include "coordinator/cli/events.h"
#include "coordinator/cli/logs.h"
#include "coordinator/cli/ps.h"
#include "coordinator/cli/ui.h"
#include "coordinator/cli/uncordon.h"
#include "coordinator/owner/coordinator.h"
#include "coordinator/ports/grpc_service.h"
#include "coordinator/ports/log_relay.h"
#include "coordinator/ports/udp_heartbeat_server.h"
#include "coordinator/record/state_file.h"
#include "coordinator/rendezvous/generation_rendezvous.h"
#include "coordinator/rendezvous/store_service.h"
#include "coordinator/status/http_server.h"
#include "coordinator/status/page.h"
#include "coordinator/status/routes.h"

namespace {

using std::chrono::steady_clock;

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "trl-coord: error: %s\n", message.c_str());
  return 2;
}

absl::StatusOr<std::string> NewJobId() {
  if (const char* id = std::getenv("TRL_JOB_ID")) {
    // It names directories (log_dir/<job>, the demo's output): a path in
    // disguise is refused.
    if (!trl::IsValidJobId(id)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TRL_JOB_ID '", id,
          "' is not a job id: 1-128 characters of A-Z a-z 0-9 . _ -"));
    }
    return std::string(id);
  }
  unsigned char bytes[4] = {};
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t ignored = read(fd, bytes, sizeof(bytes));
    (void)ignored;
    close(fd);
  }
  return absl::StrFormat("trl-%02x%02x%02x%02x", bytes[0], bytes[1], bytes[2],
                         bytes[3]);
}

struct StartFlags {
  trl::LaunchOptions launch;
  bool no_local_agent = false;
  std::string state_file;
  // The status page and /metrics (status/http_server.h): -1 means
  // main_process_port + 1, 0 a free port.
  int status_port = -1;
  std::string status_address = "127.0.0.1";
  bool no_status = false;
  // Connections one address may hold before its unproven ones are cut
  // (connection_limits.h).
  int connections_per_address = 64;
};

// The status server has no authentication yet: it may listen on loopback
// only, and a user reaches it through `ssh -L`.
absl::Status CheckStatusAddress(const StartFlags& flags) {
  if (flags.no_status || trl::IsLoopbackIp(flags.status_address)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--status_address ", flags.status_address,
      " is not a loopback address (127.0.0.0/8 or ::1): the status page has "
      "no authentication of its own, so it is served on this machine only; "
      "from elsewhere run `trl-coord ui --address HOST:PORT` there (the "
      "daemons' authentication, the page on its loopback), or pass "
      "--no_status"));
}

// Serves the status page unless turned off; a port that cannot be bound
// costs a warning, never the job.
std::unique_ptr<trl::StatusHttpServer> StartStatusServer(
    const StartFlags& flags, int main_process_port, trl::Coordinator* core) {
  auto log = trl::ComponentLogger("coord");
  if (flags.no_status) return nullptr;
  const int port =
      flags.status_port >= 0 ? flags.status_port : main_process_port + 1;
  trl::StatusSources sources;
  sources.snapshot = [core] { return core->Status(); };
  sources.status = [core](const trl::launch::v1::JobStatusRequest& request) {
    return core->Status(request);
  };
  sources.events = [core] { return core->Events(); };
  sources.nonce = trl::NewPageNonce;
  auto server = port > 65535
                    ? absl::StatusOr<std::unique_ptr<trl::StatusHttpServer>>(
                          absl::OutOfRangeError(
                              absl::StrCat("port ", port, " is out of range")))
                    : trl::StatusHttpServer::Start(
                          flags.status_address, port,
                          [sources](const trl::HttpRequest& request) {
                            return trl::HandleStatusRequest(request, sources);
                          });
  if (!server.ok()) {
    log->warn(
        "no status page: {} (the job runs without it; choose another "
        "--status_port, or --no_status)",
        std::string(server.status().message()));
    return nullptr;
  }
  log->info(
      "status page on http://{}/ (JSON at /api/status, Prometheus at "
      "/metrics)",
      trl::JoinHostPort(flags.status_address, (*server)->port()));
  return *std::move(server);
}

// What makes a job the same job: its command and the settings every machine
// agrees on.
std::string JobIdentity(const std::vector<std::string>& argv,
                        const trl::AccelerateConfig& config) {
  std::string text = absl::StrJoin(argv, "\x1f");
  for (const auto& [key, value] : trl::AgreementFingerprint(config)) {
    absl::StrAppend(&text, "\x1e", key, "=", value);
  }
  // SHA-256, not std::hash: the identity must be the same for every build
  // (a coordinator upgraded between two runs still resumes its job).
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(),
         digest);
  std::string hex;
  for (int i = 0; i < 16; ++i) absl::StrAppendFormat(&hex, "%02x", digest[i]);
  return hex;
}

int Start(const StartFlags& flags, const std::vector<std::string>& command) {
  // Before any thread starts, and before the token is read.
  trl::StartJobGuardian();
  auto log = trl::ComponentLogger("coord");
  const trl::LocalMachine machine = trl::ReadLocalMachine();
  std::vector<std::string> notes;
  auto config = trl::ResolveLaunchConfig(flags.launch, machine, &notes);
  if (!config.ok()) return Fail(std::string(config.status().message()));
  if (absl::Status status = CheckStatusAddress(flags); !status.ok()) {
    return Fail(std::string(status.message()));
  }
  for (const auto& note : notes) log->info("{}", note);
  if (flags.launch.spare) {
    return Fail(
        "--spare is for trl-agent (a machine waiting to take a lost one's "
        "place); trl-coord start runs the coordinator and machine 0");
  }
  if (!flags.no_local_agent && config->machine_rank != 0) {
    return Fail(absl::StrCat(
        "trl-coord start runs machine 0, but machine_rank is ",
        config->machine_rank, "; run `trl-agent` on the other machines"));
  }
  const auto& o = flags.launch;
  std::optional<trl::WorkerUser> worker_user;
  if (!o.worker_user.empty()) {
    auto user = trl::ResolveWorkerUser(o.worker_user);
    if (!user.ok()) return Fail(std::string(user.status().message()));
    worker_user = *std::move(user);
    if (absl::Status log_dir = trl::CheckLogDirForWorkerUser(o.log_dir);
        !log_dir.ok()) {
      return Fail(std::string(log_dir.message()));
    }
  }
  auto worker_argv =
      trl::BuildWorkerArgv(command, o.module, o.no_python, o.python);
  if (!worker_argv.ok())
    return Fail(std::string(worker_argv.status().message()));
  auto host = trl::ResolveHost(config->main_process_ip);
  if (!host.ok()) {
    return Fail(absl::StrCat("main_process_ip: ", host.status().message()));
  }
  if (config->main_process_port == 0) {  // as Accelerate: a free port
    auto port = trl::PickFreePort(*host);
    if (!port.ok()) return Fail(std::string(port.status().message()));
    config->main_process_port = *port;
    log->info(
        "main_process_port 0: the coordinator listens on free port {} (give "
        "trl-agent on the other machines --main_process_port {})",
        *port, *port);
  }
  if (const std::string warning = trl::MissingGpuWarning(*config, machine);
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

  if (o.insecure && !trl::IsLoopbackAddress(*host)) {
    return Fail(absl::StrCat(
        "--insecure is refused on ", *host,
        ": without authentication anyone who reaches the port can run "
        "commands on every node; it is allowed on a loopback address only"));
  }
  auto auth_token = trl::ResolveAuthToken(o.auth_token_file, o.insecure,
                                          /*create_if_missing=*/true);
  if (!auth_token.ok()) return Fail(std::string(auth_token.status().message()));
  trl::ForgetTokenFromEnvironment();
  if (o.insecure) log->warn("no authentication (--insecure)");
  // By default every connection is TLS with the identity derived from the
  // token (mutual: the token itself never crosses the network). Given
  // certificates, TLS with them and the token as a bearer over it.
  const trl::TlsFiles user_tls{o.tls_cert, o.tls_key, o.tls_ca};
  std::optional<trl::DerivedIdentity> identity;
  if (!o.insecure && !user_tls.enabled()) {
    auto derived = trl::DeriveIdentity(*auth_token);
    if (!derived.ok()) return Fail(std::string(derived.status().message()));
    identity = *std::move(derived);
  }
  auto server_credentials =
      identity ? absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>>(
                     trl::DerivedServerCredentials(*identity, true))
               : trl::ServerCredentials(user_tls);
  if (!server_credentials.ok()) {
    return Fail(std::string(server_credentials.status().message()));
  }

  trl::CoordinatorOptions options;
  options.config = *config;
  options.launcher_fingerprint = trl::LauncherFingerprint(o);
  // BuildWorkerArgv puts the interpreter (and -u) before a .py script or
  // a module: an agent's own --python may take its place.
  options.worker_argv_runs_python = worker_argv->size() > command.size();
  options.worker_argv = *worker_argv;
  auto job_id = NewJobId();
  if (!job_id.ok()) return Fail(std::string(job_id.status().message()));
  options.job_id = *job_id;
  // A coordinator restarted on the same address picks up the job its
  // predecessor ran, if it is the same job (command and config).
  options.state_file = flags.state_file;
  if (options.state_file.empty()) {
    auto path = trl::DefaultJobStatePath(*host, config->main_process_port);
    if (path.ok()) {
      options.state_file = *path;
    } else {
      // A safe fallback: nothing kept rather than a file others control.
      log->warn(
          "the job's state is not kept ({}); a coordinator restarted on this "
          "address will start a new job (or pass --state_file)",
          std::string(path.status().message()));
    }
  }
  options.identity = JobIdentity(*worker_argv, *config);
  auto previous =
      options.state_file.empty()
          ? absl::StatusOr<std::optional<trl::JobRecord>>(std::nullopt)
          : trl::LoadJobRecord(options.state_file);
  if (!previous.ok()) {
    log->warn("{}; starting a new job",
              std::string(previous.status().message()));
  } else if (*previous && (*previous)->identity == options.identity) {
    options.resume = *previous;
    options.job_id = (*previous)->job_id;
    log->info("resuming job {} after generation {} ({} restarts used), from {}",
              options.job_id, (*previous)->generation,
              (*previous)->restarts_used, options.state_file);
  } else if (*previous) {
    log->warn("{} belongs to another job ({}); starting a new job",
              options.state_file, (*previous)->job_id);
  }
  options.coordinator_address =
      trl::JoinHostPort(*host, config->main_process_port);
  options.policy.restart.max_restarts = o.max_restarts;
  options.policy.restart.initial_backoff = Millis(o.restart_backoff_s);
  options.policy.restart.max_backoff = Millis(o.restart_backoff_max_s);
  auto no_restart = trl::ParseExitCodeList(o.no_restart_exit_codes);
  if (!no_restart.ok()) return Fail(std::string(no_restart.status().message()));
  options.policy.restart.no_restart_exit_codes.insert(no_restart->begin(),
                                                      no_restart->end());
  options.policy.agent_heartbeat_timeout =
      Millis(o.AgentHeartbeatTimeoutSeconds());
  options.policy.rejoin_timeout = Millis(o.rejoin_timeout_s);
  options.policy.registration_timeout = Millis(o.rdzv_timeout_s);
  options.policy.stop_grace = Millis(o.stop_grace_s);
  options.policy.elastic_wait = Millis(o.elastic_wait_s);
  options.policy.rescale_on_join = o.rescale_on_join;
  options.policy.cordon_after = o.cordon_after;
  options.policy.cordon_window = Millis(o.cordon_window_s);
  options.policy.max_spares = o.max_spares;
  options.policy.tick_interval = Millis(o.monitor_interval_s);
  // GPU jobs get a fresh NCCL unique id per generation, from a helper
  // process beside this binary (built when NCCL was found).
  std::unique_ptr<trl::NcclIdSource> nccl;
  if (const std::string helper = trl::FindNcclRootHelper();
      !helper.empty() && !config->use_cpu) {
    nccl = std::make_unique<trl::NcclIdSource>(helper);
  }
  // The workers' rendezvous store (Gloo jobs): on the coordinator's port,
  // or, where that port requires the token's identity (which workers must
  // not hold), on a port of its own with TLS that workers verify with the
  // identity's certificate alone. Either way its calls carry a credential
  // per job and generation.
  trl::StoreService store;
  const int idle_connection_ms =
      static_cast<int>(Millis(o.connection_idle_timeout_s).count());
  std::unique_ptr<trl::CoordinatorServer> store_server;
  if (absl::Status can = trl::CheckCanListen(*host, config->main_process_port);
      !can.ok()) {
    return Fail(std::string(can.message()));
  }
  // Credentials checked on each call's headers, before its body is read
  // (call_authenticator.h): the store's by the current generation's token.
  auto store_token_ok = [&store](const std::string& token) {
    return store.IsCurrentToken(token);
  };
  if (identity) {
    auto store_credentials = trl::DerivedServerCredentials(*identity, false);
    store_credentials->SetAuthMetadataProcessor(
        std::make_shared<trl::CallAuthenticator>("", store_token_ok));
    auto started =
        trl::CoordinatorServer::Start(*host, 0, nullptr, "", store_credentials,
                                      store.service(), idle_connection_ms);
    if (!started.ok()) return Fail(std::string(started.status().message()));
    store_server = *std::move(started);
    options.coordinator_address =
        trl::JoinHostPort(*host, store_server->port());
  }
  options.open_store_generation = [&store](const std::string& job_id,
                                           int64_t generation) {
    return store.OpenGeneration(job_id, generation);
  };
  trl::Coordinator core(
      options,
      [&nccl](const std::string& master_addr) {
        return trl::PrepareRendezvous(master_addr, nccl.get());
      },
      [] { return steady_clock::now(); });
  if (!identity && user_tls.enabled() && !auth_token->empty()) {
    (*server_credentials)
        ->SetAuthMetadataProcessor(std::make_shared<trl::CallAuthenticator>(
            trl::BearerValue(*auth_token), store_token_ok));
  }
  trl::LogRelay log_relay(&core);  // `trl-coord logs`
  auto server = trl::CoordinatorServer::Start(
      *host, config->main_process_port, &core, identity ? "" : *auth_token,
      *server_credentials, identity ? nullptr : store.service(),
      idle_connection_ms, /*peer_identity=*/identity.has_value(), &log_relay);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  // At most 64 connections from one address and a share of the
  // descriptors unproven, on each port (connection_limits.h); registered
  // agents and workers that made an authenticated store call are kept.
  std::vector<int> governed_ports = {(*server)->port()};
  if (store_server) governed_ports.push_back(store_server->port());
  rlimit open_files{};
  getrlimit(RLIMIT_NOFILE, &open_files);
  const uint64_t descriptors = open_files.rlim_cur == RLIM_INFINITY
                                   ? uint64_t{1} << 30
                                   : static_cast<uint64_t>(open_files.rlim_cur);
  if (const auto warning = trl::DescriptorLimitWarning(
          descriptors, config->num_machines,
          static_cast<int>(governed_ports.size()))) {
    log->warn("{}", *warning);
  }
  // Unproven connections: half of what the proven ones leave of the
  // descriptors, shared between the ports (connection_limits.h).
  trl::ConnectionGovernor governor(
      governed_ports, flags.connections_per_address, descriptors,
      [&core, &store] {
        std::set<std::string> proven = core.AgentPeers();
        proven.merge(store.AuthenticatedPeers());
        return proven;
      },
      std::chrono::milliseconds(200));
  core.ReportDefences([&governor] {
    return trl::Coordinator::DefenceCounts{
        trl::RefusedCalls::InProcess(), static_cast<uint64_t>(governor.cut())};
  });
  const std::unique_ptr<trl::StatusHttpServer> status_server =
      StartStatusServer(flags, config->main_process_port, &core);
  // Heartbeats as UDP datagrams on the same port, if it can be bound.
  std::unique_ptr<trl::UdpHeartbeatServer> udp_heartbeats;
  if (!o.no_udp_heartbeats) {
    auto udp =
        trl::UdpHeartbeatServer::Start(*host, config->main_process_port, &core);
    if (udp.ok()) {
      udp_heartbeats = *std::move(udp);
      core.OfferUdpHeartbeats(config->main_process_port, [](size_t count) {
        auto bytes = trl::RandomBytes(count);
        return bytes.ok() ? *bytes : std::string();
      });
    } else {
      log->warn("{}; heartbeats stay on the gRPC stream",
                std::string(udp.status().message()));
    }
  }
  log->info(
      "job {}: coordinator on {} ({}), waiting for {} machine(s), {} "
      "process(es) in all",
      options.job_id, trl::JoinHostPort(*host, config->main_process_port),
      identity ? absl::StrCat("TLS with the token's identity; workers' store "
                              "on ",
                              options.coordinator_address)
      : user_tls.enabled() ? std::string("TLS with the given certificates")
                           : std::string("plaintext"),
      config->num_machines, config->num_processes);
  if (auto batch = trl::EffectiveBatchFromArguments(options.worker_argv,
                                                    config->num_processes)) {
    log->info("{}", batch->Describe());
  }

  trl::Console console(stdout, stderr);
  std::unique_ptr<trl::Agent> local_agent;
  std::thread agent_thread;
  if (!flags.no_local_agent) {
    trl::AgentOptions agent_options =
        trl::AgentOptionsFromFlags(*config, o, machine, *host);
    if (identity) {
      agent_options.identity = identity;
    } else {
      agent_options.auth_token = *auth_token;
      // One-way TLS (a certificate, no --tls_ca): machine 0's agent and
      // its workers trust the coordinator's own certificate (self-signed,
      // or a file with its chain up to the root).
      if (!o.tls_cert.empty() && o.tls_ca.empty()) {
        agent_options.tls_ca = o.tls_cert;
      }
    }
    agent_options.worker_user = worker_user;
    // The coordinator is in this very process: no need to wait long.
    agent_options.connect_timeout = std::chrono::seconds(30);
    local_agent = std::make_unique<trl::Agent>(agent_options, &console);
  }
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
  core.WaitForFarewells(steady_clock::now() + std::chrono::seconds(10));
  if (agent_thread.joinable()) agent_thread.join();
  log_relay.EndAll();  // `logs -f` clients end (exit 0) with the job
  (*server)->Shutdown(1000);

  const auto status = core.Status();
  if (outcome->phase == trl::JobPhase::kSucceeded) {
    log->info("job {} succeeded: {}", options.job_id, outcome->summary);
  } else {
    log->error("job {} {}: {}", options.job_id,
               trl::JobPhaseName(outcome->phase), outcome->summary);
    for (const auto& failure : status.failures()) {
      for (const auto& line : failure.last_lines()) {
        log->error("  | {}", line);
      }
    }
  }
  return std::clamp(outcome->exit_code, 0, 255);
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
          "--status_port,--status-port", start_flags.status_port,
          "Port of the status page, its JSON (/api/status) and Prometheus "
          "metrics (/metrics) (default: main_process_port + 1; 0: a free port, "
          "logged; env TRL_STATUS_PORT). If it cannot be bound, the job runs "
          "without it")
      ->envname("TRL_STATUS_PORT");
  start->add_option("--status_address,--status-address",
                    start_flags.status_address,
                    "Address the status page listens on: loopback only "
                    "(default 127.0.0.1); from elsewhere, `trl-coord ui`");
  start->add_flag("--no_status,--no-status", start_flags.no_status,
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
  if (logs->parsed()) return trl::RunLogs(logs_flags);
  if (ui->parsed()) return trl::RunUi(ui_flags);
  if (uncordon->parsed()) return trl::RunUncordon(uncordon_flags);
  return trl::RunPs(ps_flags);
}

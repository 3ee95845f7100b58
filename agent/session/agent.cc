#include "agent/session/agent.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/cleanup/exit_ledger.h"
#include "agent/cleanup/job_guardian.h"
#include "agent/health/health_monitor.h"
#include "agent/link/agent_channel.h"
#include "agent/link/coordinator_wait_report.h"
#include "agent/session/agent_session.h"
#include "common/host_identity.h"
#include "common/logging.h"
#include "common/network.h"
#include "common/private_files.h"
#include "common/tls_credentials.h"
#include "common/utf8.h"

namespace trl {

namespace pb = trl::launch::v1;
namespace fs = std::filesystem;
using std::chrono::steady_clock;

namespace {

std::shared_ptr<spdlog::logger> Log() { return ComponentLogger("agent"); }

AgentCoreSettings CoreSettings(const AgentOptions& options) {
  AgentCoreSettings settings;
  settings.heartbeat_interval = options.heartbeat_interval;
  settings.lease = options.lease;
  settings.udp_heartbeats = options.udp_heartbeats;
  settings.spare = options.spare;
  settings.connect_timeout = options.connect_timeout;
  settings.reconnect_timeout = options.reconnect_timeout;
  return settings;
}

}  // namespace

Agent::Agent(AgentOptions options, Console* console)
    : options_(std::move(options)),
      console_(console),
      core_(CoreSettings(options_)) {
  core_.PublishFenceTo(GuardianFencePage());
}

Agent::~Agent() = default;

int Agent::StopExitCode() {
  return core_.With([](AgentCore& core) { return core.StopExitCode(); });
}

bool Agent::WaitForCoordinator(
    std::shared_ptr<grpc::Channel>& channel,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    std::chrono::milliseconds timeout, bool* refused) {
  const std::string target =
      JoinHostPort(options_.coordinator_host, options_.coordinator_port);
  const auto started = steady_clock::now();
  CoordinatorWaitReport report(
      options_.coordinator_host, options_.coordinator_port,
      options_.waiting_report_interval, timeout,
      options_.identity ? options_.token_origin : std::string(), started);
  CoordinatorWaitObservation last;
  // False once the wait should end: a stop was asked for, or the timeout.
  // Says what stands in the way (`seen`, when `say`) when it changes and
  // every interval.
  auto keep_waiting = [&](const CoordinatorWaitObservation& seen,
                          bool say = true) {
    last = seen;
    if (StopExitCode() != 0) return false;
    const auto now = steady_clock::now();
    if (now - started > timeout) {
      Log()->error(
          "the coordinator at {} did not answer within {} s: {}", target,
          timeout.count() / 1000.0,
          DescribeCoordinatorWaitProblem(
              last, options_.coordinator_host, options_.coordinator_port,
              options_.identity ? options_.token_origin : std::string()));
      return false;
    }
    if (!say) return true;
    if (const std::string line = report.Observe(seen, now); !line.empty()) {
      Log()->warn("{}", line);
    }
    return true;
  };
  // Until the port answers, probe it ourselves: gRPC's own reconnect
  // backoff (20 ms, x1.6, jittered) left an agent that started with its
  // coordinator waiting a further ~100 ms in half of the runs. A port that
  // is not open yet cannot be waited on, only asked: every 2 ms for the
  // first second by the agents of a small job (64 machines at most: 32,000
  // refused SYNs a second at worst), every 10 ms otherwise and after (at
  // 16,384 agents that is already 1.6 million a second at the
  // coordinator's host while it starts).
  const auto probing_since = steady_clock::now();
  const bool small_job = options_.config.num_machines <= 64;
  while (true) {
    const TcpProbe probe =
        ProbeTcpPort(options_.coordinator_host, options_.coordinator_port, 200);
    if (probe.outcome == TcpProbe::kAnswered) break;
    CoordinatorWaitObservation seen;
    seen.error = probe.error;
    seen.problem = probe.outcome == TcpProbe::kRefused
                       ? CoordinatorWaitProblem::kRefused
                   : probe.outcome == TcpProbe::kUnreachable
                       ? CoordinatorWaitProblem::kUnreachable
                       : CoordinatorWaitProblem::kNoAnswer;
    if (!keep_waiting(seen)) return false;
    const bool fast = small_job && steady_clock::now() - probing_since <
                                       std::chrono::seconds(1);
    // An unreachable network answers at once: no need to ask 100 times a
    // second.
    const bool at_once = probe.outcome == TcpProbe::kUnreachable;
    std::this_thread::sleep_for(std::chrono::milliseconds(fast      ? 2
                                                          : at_once ? 100
                                                                    : 10));
  }
  // The port answers: a fresh channel connects now, with no backoff left
  // from failed attempts.
  channel = AgentChannel(target, credentials, options_.identity.has_value());
  // The port answers but no connection comes up. A handshake refused at
  // once (another token, not a trl-coord) puts the channel in
  // TRANSIENT_FAILURE within milliseconds, and it stays there (pick_first
  // keeps the state while it retries): after 5 s of that, stop. A stalled
  // coordinator (frozen, paused) leaves the handshake hanging until gRPC's
  // connect deadline (20 s) instead: that is waited for like any absence,
  // up to the timeout.
  const auto attempt_started = steady_clock::now();
  std::optional<steady_clock::time_point> refused_since;
  // gRPC retries a failed connection after its backoff (1 s at most, see
  // AgentChannel), timed by absl's wait, whose deadline is on the wall
  // clock: after the clock stepped back, the retry came that much later (a
  // clock 30 s off: 28 s to rejoin a coordinator back after 1 s). A channel
  // failing for longer than the backoff is replaced on the monotonic clock:
  // a fresh channel connects at once.
  auto failing_since = steady_clock::now();
  // Jittered: agents that failed together (a coordinator restarted, or
  // shedding connections) do not all come back in one burst.
  std::mt19937 jitter(std::random_device{}());
  auto fresh_after = [&jitter] {
    return kFreshChannelAfter +
           std::chrono::milliseconds(
               std::uniform_int_distribution<int>(0, 500)(jitter));
  };
  auto replace_after = fresh_after();
  // The wait for a change of state is polled on the monotonic clock too:
  // WaitForStateChange's deadline is a gRPC timer (a 200 ms wait took 28 s
  // with the clock 30 s off).
  ChannelPoller poller;
  const bool polled = ChannelPoller::DrivesChannels();
  grpc_connectivity_state state = channel->GetState(true);
  while (state != GRPC_CHANNEL_READY) {
    if (state != GRPC_CHANNEL_TRANSIENT_FAILURE) {
      failing_since = steady_clock::now();
    } else if (steady_clock::now() - failing_since > replace_after) {
      channel = AgentChannel(target, credentials, options_.identity.has_value(),
                             kMaxReconnectBackoff);
      state = channel->GetState(true);
      failing_since = steady_clock::now();
      replace_after = fresh_after();
    }
    CoordinatorWaitObservation seen;
    const bool failing = state == GRPC_CHANNEL_TRANSIENT_FAILURE;
    seen.problem = failing ? CoordinatorWaitProblem::kHandshakeFails
                           : CoordinatorWaitProblem::kHandshakeStalled;
    // A connection under way is no problem until it has taken a while (it
    // takes milliseconds when all is well).
    if (!keep_waiting(seen, failing || steady_clock::now() - attempt_started >
                                           std::chrono::seconds(3))) {
      return false;
    }
    // Every 2 ms for the first second (a connection takes milliseconds
    // when all is well), every 20 ms after.
    if (polled) {
      poller.PollFor(steady_clock::now() - attempt_started <
                             std::chrono::seconds(1)
                         ? std::chrono::milliseconds(2)
                         : std::chrono::milliseconds(20));
      state = channel->GetState(true);
    } else if (channel->WaitForStateChange(
                   state, std::chrono::system_clock::now() +
                              std::chrono::milliseconds(200))) {
      state = channel->GetState(true);
    }
    const auto now = steady_clock::now();
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE && !refused_since &&
        now - attempt_started < std::chrono::seconds(3)) {
      refused_since = now;
    }
    if (refused != nullptr && refused_since &&
        state == GRPC_CHANNEL_TRANSIENT_FAILURE &&
        now - *refused_since > std::chrono::seconds(5)) {
      CoordinatorWaitObservation fails;
      fails.problem = CoordinatorWaitProblem::kHandshakeFails;
      Log()->error(
          "cannot authenticate with the coordinator at {}: {}; nothing was "
          "sent to it",
          target,
          DescribeCoordinatorWaitProblem(
              fails, options_.coordinator_host, options_.coordinator_port,
              options_.identity ? options_.token_origin : std::string()));
      *refused = true;
      return false;
    }
  }
  return true;
}

int Agent::Run() {
  const bool derived = options_.identity.has_value();
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (derived) {
    credentials = DerivedClientCredentials(*options_.identity);
  } else {
    auto files = ClientCredentials(
        TlsFiles{options_.tls_cert, options_.tls_key, options_.tls_ca});
    if (!files.ok()) {
      Log()->error("{}", std::string(files.status().message()));
      return 2;
    }
    credentials = *files;
  }
  const std::string target =
      JoinHostPort(options_.coordinator_host, options_.coordinator_port);
  auto channel = AgentChannel(target, credentials, derived);
  // Per-rank files when no log_dir is given; removed when the agent ends.
  // mkdtemp: a fresh name, mode 0700, so that nothing another user planted
  // in a shared $TMPDIR is used.
  // Workers of another user must reach it: under /tmp then, whose
  // ancestors anyone may traverse (a private $TMPDIR may not be).
  std::string scratch_template =
      ((options_.worker_user ? fs::path("/tmp") : fs::temp_directory_path()) /
       absl::StrCat("trl-launch-",
                    options_.spare
                        ? std::string("spare")
                        : absl::StrCat("m", options_.config.machine_rank),
                    "-XXXXXX"))
          .string();
  std::string scratch_dir;
  if (mkdtemp(scratch_template.data()) != nullptr) {
    scratch_dir = scratch_template;
    // Workers of another user reach their files and the store's public
    // certificate by name; nobody can list what is there.
    if (options_.worker_user) chmod(scratch_dir.c_str(), 0711);
  } else {
    Log()->warn(
        "cannot create a scratch directory {}: {}; workers get no "
        "error or heartbeat files unless --log_dir is set",
        scratch_template, std::strerror(errno));
  }
  // Not seeded by the pid: agents in containers or PID namespaces of their
  // own all have the same small pids, and would all retry at the same
  // moments after a coordinator's restart.
  std::mt19937 random(std::random_device{}());
  auto jittered_pause = [&random] {
    const int pause_ms = std::uniform_int_distribution<int>(50, 500)(random);
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    return pause_ms;
  };
  int exit_code = 1;
  auto unreachable_since = steady_clock::now();
  // Workers verify the coordinator's store with the identity's certificate
  // (public); the private key stays in this process.
  const std::string host_id = LocalHostId();
  const std::string ledger_root = DefaultLedgerRoot();
  CarryWhatAnEarlierAgentKept(ledger_root, target, host_id);
  std::string store_certificate;
  if (derived && !scratch_dir.empty()) {
    store_certificate = scratch_dir + "/coordinator.pem";
    if (!WriteFileAtomically(store_certificate,
                             options_.identity->certificate_pem, 0644)
             .ok()) {
      store_certificate.clear();
    }
  }
  // Node health: checked before the first registration, which carries it,
  // then every interval; a change goes to the session of the moment (or
  // with the next registration).
  HealthMonitor health(options_.health, options_.health_check_interval);
  if (const std::string problem = health.CheckNow(); !problem.empty()) {
    Log()->error("this machine is unhealthy: {}", problem);
  }
  const bool watched = health.Start([this](const std::string& problem) {
    if (problem.empty()) {
      Log()->info("this machine passes its health checks again");
    } else {
      Log()->error("this machine is unhealthy: {}", problem);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (session_) session_->ReportHealth(problem);
  });
  if (!watched) {
    Log()->error(
        "no thread for the health checks every --health_check_interval "
        "(out of threads): this machine's health is what it was at start");
  }
  while (true) {
    // The first connection may wait for the whole rendezvous; after a lost
    // coordinator, only for the reconnect timeout. Once a handshake with
    // this coordinator has succeeded, it has proved it holds the token: a
    // later handshake that fails is the network's or a frozen or flooded
    // coordinator's doing, and is waited out, never taken for a refusal
    // (nemesis, seed 1: an agent reconnecting to a coordinator that had
    // been frozen for 3 s gave up with exit 2 and its job never finished).
    const auto [wait_limit, may_be_refused] = core_.With([](AgentCore& core) {
      return std::make_pair(core.WaitLimit(), core.HandshakeMayBeRefusal());
    });
    bool refused = false;
    if (!WaitForCoordinator(channel, credentials, wait_limit,
                            may_be_refused ? &refused : nullptr)) {
      exit_code = StopExitCode() != 0 ? StopExitCode() : refused ? 2 : 1;
      break;
    }
    std::string address = options_.advertise_addr;
    if (address.empty()) {
      // No route now (a link is down) is a reason to wait, not to give up.
      auto local = LocalAddressTowards(options_.coordinator_host,
                                       options_.coordinator_port);
      if (!local.ok()) {
        if (steady_clock::now() - unreachable_since > wait_limit) {
          Log()->error("{}", std::string(local.status().message()));
          break;
        }
        Log()->warn("{}; retrying", std::string(local.status().message()));
        jittered_pause();
        if (StopExitCode() != 0) {
          exit_code = StopExitCode();
          break;
        }
        continue;
      }
      address = *local;
    }
    unreachable_since = steady_clock::now();
    AgentOptions session_options = options_;
    session_options.interface_name = InterfaceWithAddress(address);
    if (derived) session_options.tls_ca = store_certificate;

    pb::AgentRegistration registration;
    registration.set_machine_rank(options_.config.machine_rank);
    registration.set_hostname(ToValidUtf8(LocalHostName()));  // any bytes
    registration.set_host_id(host_id);
    registration.set_advertise_addr(address);
    registration.set_interface_name(session_options.interface_name);
    registration.set_local_device_count(options_.local_gpu_count);
    registration.set_local_world_size(options_.config.ProcessesPerMachine());
    registration.set_agent_pid(getpid());
    registration.set_checks_command(true);
    registration.set_captures_before_stop(true);
    registration.set_lease_ms(static_cast<int32_t>(options_.lease.count()));
    // Only a guardian that runs can keep the promise (else the coordinator
    // waits the stop grace as well).
    if (GuardianFencePage() != nullptr && JobGuardianAlive()) {
      registration.set_fence_ms(static_cast<int32_t>(
          core_.With([](AgentCore& core) { return core.FenceBound(); })
              .count()));
    }
    for (const auto& [key, value] : AgreementFingerprint(options_.config)) {
      (*registration.mutable_config_fingerprint())[key] = value;
    }
    for (const auto& [key, value] : options_.launcher_fingerprint) {
      (*registration.mutable_config_fingerprint())[key] = value;
    }

    AgentSession session(session_options, console_, channel, scratch_dir,
                         &core_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (StopExitCode() != 0) {
        exit_code = StopExitCode();
        break;
      }
      // Under the lock the health monitor reports under: a change is in
      // this registration or reported on this session.
      registration.set_health_problem(ToValidUtf8(health.Latest()));
      session_ = &session;
    }
    const SessionEnd end = session.Run(registration);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      session_ = nullptr;
    }
    const AgentCore::Next next =
        core_.With([&](AgentCore& core) { return core.AfterSession(end); });
    exit_code = next.exit_code;
    if (!next.rejoin) break;
    channel = AgentChannel(target, credentials, derived);
    // Rejoin: after a jittered pause, so that a whole cluster that lost its
    // coordinator does not reconnect in one burst.
    Log()->info("reconnecting to the coordinator after {} ms",
                jittered_pause());
    unreachable_since = steady_clock::now();
  }
  std::error_code ignored;
  if (!scratch_dir.empty()) fs::remove_all(scratch_dir, ignored);
  // Its workers are gone and the coordinator heard what it will hear: what
  // was kept for a later agent is of no use now.
  const int machine_rank = core_.With(
      [](AgentCore& core) { return core.spare() ? -1 : core.machine_rank(); });
  ExitLedger(ledger_root, target, machine_rank, host_id).RemoveIfUnused();
  return exit_code;
}

void Agent::CarryWhatAnEarlierAgentKept(const std::string& ledger_root,
                                        const std::string& target,
                                        const std::string& host_id) {
  if (PruneLedgers(ledger_root, std::chrono::hours(24 * 7)) > 0) {
    Log()->debug("removed exit records that no agent wrote for 7 days");
  }
  if (options_.spare) return;
  const int machine_rank = options_.config.machine_rank;
  const LedgerReport report =
      ExitLedger(ledger_root, target, machine_rank, host_id).Read();
  if (report.exits.empty()) return;
  std::vector<pb::WorkerExited> exits;
  for (const auto& [local, exit] : report.exits) {
    pb::WorkerExited exited;
    exited.set_generation(report.generation);
    exited.set_local_rank(local);
    exited.set_exit_code(exit.exit_code);
    exited.set_signal(exit.signal);
    exits.push_back(std::move(exited));
  }
  Log()->info(
      "an earlier agent of machine {} on this host left the exits of {} "
      "worker(s) of generation {} (run {} of the job): this agent reports "
      "them",
      machine_rank, exits.size(), report.generation, report.run_id);
  core_.With([&](AgentCore& core) {
    core.CarryEarlierExits(report.run_id, report.generation, std::move(exits));
  });
}

void Agent::RequestStop(const StopSignal& signal) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto [escalate, effects] = core_.With([&](AgentCore& core) {
    const bool again = core.StopExitCode() != 0;
    return std::make_pair(again, core.StopRequested(signal));
  });
  if (escalate) {
    Log()->warn("received {} again: killing the workers now",
                SignalName(signal.number));
  } else {
    Log()->info(
        "received {}: stopping the workers (a second signal kills them at "
        "once)",
        SignalName(signal.number));
  }
  if (session_) session_->Apply(effects);
}

}  // namespace trl

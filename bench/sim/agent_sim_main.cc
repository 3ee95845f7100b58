// trl-agent-sim: drives the real coordinator with many simulated agents
// (bench/sim/sim_agent.h) and measures what docs/design.md (Targets) asks at
// scale: rendezvous time, the coordinator's CPU share under heartbeats,
// `trl-coord ps --json` and `trl-coord ps` latency, resident memory, a
// whole-job restart and the time to notice a silent agent. Prints one JSON
// object.
//
// It takes the same launch flags as trl-agent (so its registrations carry
// the same config fingerprint), plus its own:
//   trl-agent-sim --num_machines 4096 --num_processes 32768
//     --main_process_ip 127.0.0.1 --main_process_port 29600
//     --coordinator_pid PID --ps_binary build/coordinator/trl-coord
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "agent/link/agent_channel.h"
#include "bench/sim/sim_agent.h"
#include "common/accelerate_config.h"
#include "common/auth_token.h"
#include "common/launch_options.h"
#include "common/local_machine.h"
#include "common/network.h"
#include "common/tls_credentials.h"
#include "coordinator/access/connection_limits.h"

extern char** environ;

namespace {

namespace pb = trl::launch::v1;
using trl::sim::SimAgent;
using trl::sim::SimClock;
using trl::sim::SimRecorder;

double Seconds(SimClock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// utime + stime of `pid`, in seconds.
double CpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  }
  return ticks / sysconf(_SC_CLK_TCK);
}

// A "VmRSS"-style line of /proc/PID/status, in MiB.
double StatusMiB(pid_t pid, const std::string& key) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      return std::stod(line.substr(key.size() + 1)) / 1024.0;
    }
  }
  return -1;
}

// Wall time of one run of `argv` with its output discarded; -1 on failure.
double TimeCommand(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  const auto start = SimClock::now();
  pid_t pid = 0;
  const int rc =
      posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  const auto end = SimClock::now();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return Seconds(end - start);
}

struct Spread {
  double median = -1, min = -1, max = -1;
};
Spread Summarize(std::vector<double> values) {
  Spread s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.median = values[values.size() / 2];
  s.min = values.front();
  s.max = values.back();
  return s;
}

void RaiseFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "trl-agent-sim: error: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // One absl::Mutex per simulated agent (agent/session/shared_agent_core.h):
  // the lock-order graph that absl keeps for deadlock detection then took a
  // third of this process's CPU at 16,384 agents (GraphCycles::GetId), CPU
  // the coordinator it measures shares. A real agent has one such lock.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{
      "trl-agent-sim: many simulated agents against a real "
      "coordinator"};
  trl::LaunchOptions launch;
  trl::AddLaunchFlags(app, launch);
  int agents = 0;
  int first_machine_rank = 0;
  double heartbeat_phase_s = 10;
  pid_t coordinator_pid = 0;
  std::string ps_binary;
  std::string ps_baseline_binary;
  int ps_runs = 5;
  bool failures = true;
  double timeout_s = 120;
  app.add_option("--agents", agents,
                 "Simulated agents (default: num_machines - "
                 "first_machine_rank)");
  app.add_option("--first_machine_rank", first_machine_rank,
                 "machine_rank of the first simulated agent");
  app.add_option("--heartbeat_phase", heartbeat_phase_s,
                 "Seconds of heartbeats to measure the coordinator's CPU over");
  app.add_option("--coordinator_pid", coordinator_pid,
                 "The coordinator's pid, for its CPU and memory");
  app.add_option("--ps_binary", ps_binary,
                 "trl-coord, to time `trl-coord ps --json` against the job");
  app.add_option("--ps_baseline_binary", ps_baseline_binary,
                 "Another trl-coord to time `ps --json` and `ps` with too "
                 "(ps_baseline_ms, ps_summary_baseline_ms)");
  app.add_option("--ps_runs", ps_runs, "Times to run ps");
  app.add_flag("!--no_failures", failures,
               "Only rendezvous and heartbeats: no restart, no silent agent");
  app.add_option("--timeout", timeout_s, "Seconds any one phase may take");
  int wave = 0;
  int connect_batch = 256;
  app.add_option("--connect_batch", connect_batch,
                 "Agents whose connections are set up at the same time");
  app.add_option("--wave", wave,
                 "Agents that connect and register together; the next wave "
                 "connects once they are registered (default: as many "
                 "unproven connections as a coordinator under this "
                 "descriptor limit keeps, connection_limits.h)");
  CLI11_PARSE(app, argc, argv);
  RaiseFileLimit();

  const trl::LocalMachine machine = trl::ReadLocalMachine();
  launch.machine_rank = first_machine_rank;
  auto config = trl::ResolveLaunchConfig(launch, machine);
  if (!config.ok()) return Fail(std::string(config.status().message()));
  if (agents <= 0) agents = config->num_machines - first_machine_rank;
  if (wave <= 0) {
    rlimit open_files{};
    getrlimit(RLIMIT_NOFILE, &open_files);
    wave = trl::UnprovenConnectionCap(open_files.rlim_cur, config->num_machines,
                                      2);
  }
  if (first_machine_rank + agents > config->num_machines) {
    return Fail(absl::StrCat(first_machine_rank, " + ", agents,
                             " agents exceed num_machines ",
                             config->num_machines));
  }
  auto token = trl::ResolveAuthToken(launch.auth_token_file, launch.insecure,
                                     /*create_if_missing=*/false);
  if (!token.ok()) return Fail(std::string(token.status().message()));
  // As real agents: TLS with the token's derived identity by default.
  auto security = trl::ClientSecurityFor(
      trl::TlsFiles{launch.tls_cert, launch.tls_key, launch.tls_ca}, *token);
  if (!security.ok()) return Fail(std::string(security.status().message()));
  const std::string target =
      trl::JoinHostPort(config->main_process_ip, config->main_process_port);
  auto fingerprint = trl::AgreementFingerprint(*config);
  for (const auto& [key, value] : trl::LauncherFingerprint(launch)) {
    fingerprint[key] = value;
  }
  const auto phase =
      std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));

  // One connection per agent, as real agents have.
  SimRecorder recorder(agents);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<pb::Coordinator::Stub>> stubs;
  // The real agent's settings, as trl-agent takes them from the same flags.
  trl::AgentCoreSettings core_settings;
  core_settings.heartbeat_interval = std::chrono::milliseconds(
      static_cast<int64_t>(launch.heartbeat_interval_s * 1000));
  core_settings.lease = std::chrono::milliseconds(
      static_cast<int64_t>(launch.LeaseSeconds() * 1000));
  core_settings.udp_heartbeats = !launch.no_udp_heartbeats;
  trl::sim::SimDatagrams datagrams(config->main_process_ip);
  std::vector<std::unique_ptr<SimAgent>> sims;
  for (int i = 0; i < agents; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    trl::SetAgentKeepalive(&args);
    if (security->derived_identity) trl::SetDerivedServerName(&args);
    channels.push_back(
        grpc::CreateCustomChannel(target, security->credentials, args));
    stubs.push_back(pb::Coordinator::NewStub(channels.back()));
    pb::AgentRegistration registration;
    const int machine_rank = first_machine_rank + i;
    registration.set_machine_rank(machine_rank);
    registration.set_hostname(absl::StrCat("sim", machine_rank));
    registration.set_advertise_addr("127.0.0.1");
    registration.set_interface_name("lo");
    registration.set_local_world_size(config->ProcessesPerMachine());
    registration.set_agent_pid(getpid());
    registration.set_captures_before_stop(true);
    registration.set_lease_ms(
        static_cast<int32_t>(launch.LeaseSeconds() * 1000));
    for (const auto& [key, value] : fingerprint) {
      (*registration.mutable_config_fingerprint())[key] = value;
    }
    sims.push_back(std::make_unique<SimAgent>(
        i, std::move(registration), security->bearer_token,
        launch.no_udp_heartbeats ? nullptr : &datagrams, core_settings,
        &recorder));
  }
  // Connects agents [from, to): TCP, TLS and HTTP/2 set-up, before they
  // register, so that the rendezvous time is the coordinator's.
  // --connect_batch at a time: thousands of TLS handshakes at once
  // outlast the coordinator's 5 s handshake timeout on a busy machine,
  // and each one cut costs its client a reconnect backoff.
  auto connect = [&](int from, int to) {
    for (int batch = from; batch < to; batch += connect_batch) {
      const int end = std::min(batch + connect_batch, to);
      for (int i = batch; i < end; ++i) channels[i]->GetState(true);
      const auto connected_by = std::chrono::system_clock::now() + phase;
      for (int i = batch; i < end; ++i) {
        channels[i]->WaitForConnected(connected_by);
      }
    }
  };
  // In waves: the coordinator keeps at most a share of what its descriptor
  // limit leaves past the job's agents (at 20,000 here: 3,720 for 4096
  // agents, 648 for 16,384) for connections that have not registered, and
  // shuts down the oldest beyond it, as a flood of strangers would be.
  wave = std::max(1, std::min(wave, agents));
  connect_batch = std::max(1, connect_batch);
  connect(0, wave);

  std::vector<std::string> json;
  json.push_back(absl::StrFormat("\"agents\": %d", agents));
  {
    // How busy the machine was as the run began (the coordinator and the
    // simulator share its cores with whatever else runs).
    std::ifstream loadavg("/proc/loadavg");
    double load = -1;
    loadavg >> load;
    json.push_back(absl::StrFormat("\"load_average_1m\": %.2f", load));
  }
  json.push_back(
      absl::StrFormat("\"ranks\": %d", agents * config->ProcessesPerMachine()));
  json.push_back(absl::StrFormat("\"heartbeat_interval_s\": %g",
                                 launch.heartbeat_interval_s));
  const char* transport = security->derived_identity ? "tls-derived"
                          : launch.insecure          ? "insecure"
                                                     : "tls";
  json.push_back(absl::StrFormat("\"transport\": \"%s\"", transport));
  json.push_back(absl::StrFormat("\"heartbeats_via\": \"%s\"",
                                 launch.no_udp_heartbeats ? "stream" : "udp"));
  std::atomic<bool> beating{false};
  std::thread heartbeats;
  auto finish = [&](int code) {
    beating = false;
    if (heartbeats.joinable()) heartbeats.join();
    json.push_back(
        absl::StrFormat("\"leases_expired\": %d", recorder.lease_expired()));
    for (auto& sim : sims) sim->Shutdown();
    recorder.WaitAllEnded(SimClock::now() + std::chrono::seconds(30));
    const auto refusals = recorder.refusals();
    if (!refusals.empty()) {
      json.push_back(absl::StrFormat("\"refusals\": [\"%s\"]",
                                     absl::StrJoin(refusals, "\", \"")));
    }
    std::printf("{%s}\n", absl::StrJoin(json, ", ").c_str());
    std::fflush(stdout);
    return code;
  };

  // Heartbeats: every agent once per interval, spread over the interval as
  // agents that started at different moments would be.
  // From the first registration on, as real agents beat while they wait
  // for the rest (a rendezvous longer than the heartbeat timeout would
  // otherwise lose every agent as it starts).
  beating = true;
  heartbeats = std::thread([&] {
    const auto interval = std::chrono::duration_cast<SimClock::duration>(
        std::chrono::duration<double>(launch.heartbeat_interval_s));
    const auto start = SimClock::now();
    auto next = start;
    size_t at = 0;
    // The k-th tick at start + k * interval / N, computed from k each time:
    // an agent's ticks (k, k + N, ...) are then exactly one interval apart.
    // (Adding interval / N, rounded down, made them a few ns short of it,
    // and the core, rightly, skipped every second beat as not yet due.)
    const auto count = static_cast<uint64_t>(std::max<size_t>(sims.size(), 1));
    const auto interval_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(interval).count());
    uint64_t ticks = 0;
    auto deliver = [&](uint32_t machine_rank, std::string_view bytes) {
      const int64_t index =
          static_cast<int64_t>(machine_rank) - first_machine_rank;
      if (index >= 0 && index < static_cast<int64_t>(sims.size())) {
        sims[index]->DatagramReceived(bytes);
      }
    };
    while (beating) {
      datagrams.Drain(deliver);
      // Each agent's clock reads its schedule: it beats once an interval.
      sims[at]->Tick(next);
      at = (at + 1) % sims.size();
      ++ticks;
      next = start +
             std::chrono::nanoseconds((ticks / count) * interval_ns +
                                      (ticks % count) * interval_ns / count);
      std::this_thread::sleep_until(next);
    }
  });

  // 1. Rendezvous: first registration sent -> every agent assigned.
  const double cpu_before_rendezvous =
      coordinator_pid > 0 ? CpuSeconds(coordinator_pid) : 0;
  const double sim_cpu_before_rendezvous = CpuSeconds(getpid());
  const auto registering = SimClock::now();
  SimClock::duration connecting_later_waves{};
  SimClock::time_point last_registration = registering;
  for (int from = 0; from < agents; from += wave) {
    const int to = std::min(from + wave, agents);
    if (from > 0) {
      // The last wave's registrations were answered: connect the next.
      if (!recorder.WaitRegistered(from, SimClock::now() + phase)) {
        std::fprintf(stderr, "trl-agent-sim: a wave did not register\n");
        return finish(1);
      }
      const auto connecting = SimClock::now();
      connect(from, to);
      connecting_later_waves += SimClock::now() - connecting;
    }
    for (int i = from; i < to; ++i) sims[i]->Start(stubs[i].get());
    // The last registration is on its way once its Start returns.
    last_registration = SimClock::now();
  }
  auto assigned = recorder.WaitAllAssigned(0, SimClock::now() + phase);
  if (!assigned) {
    std::fprintf(stderr, "trl-agent-sim: not every agent was assigned\n");
    return finish(1);
  }
  json.push_back(absl::StrFormat("\"rendezvous_s\": %.4f",
                                 Seconds(*assigned - registering)));
  json.push_back(absl::StrFormat("\"waves\": %d", (agents + wave - 1) / wave));
  // The connection set-up (TCP, TLS, HTTP/2) of the waves after the first,
  // inside the rendezvous: its TLS share.
  json.push_back(absl::StrFormat("\"rendezvous_connect_s\": %.4f",
                                 Seconds(connecting_later_waves)));
  json.push_back(absl::StrFormat("\"last_registration_to_assigned_s\": %.4f",
                                 Seconds(*assigned - last_registration)));
  // What the rendezvous cost each side: on 2 cores the two compete.
  if (coordinator_pid > 0) {
    json.push_back(
        absl::StrFormat("\"rendezvous_coordinator_cpu_s\": %.3f",
                        CpuSeconds(coordinator_pid) - cpu_before_rendezvous));
  }
  json.push_back(
      absl::StrFormat("\"rendezvous_simulator_cpu_s\": %.3f",
                      CpuSeconds(getpid()) - sim_cpu_before_rendezvous));

  // 2. The coordinator under heartbeats: CPU share, ps latency, memory.
  if (coordinator_pid > 0) {
    std::this_thread::sleep_for(std::chrono::seconds(1));  // settle
    const double cpu0 = CpuSeconds(coordinator_pid);
    const auto t0 = SimClock::now();
    std::this_thread::sleep_until(
        t0 + std::chrono::duration_cast<SimClock::duration>(
                 std::chrono::duration<double>(heartbeat_phase_s)));
    const double cpu1 = CpuSeconds(coordinator_pid);
    const double wall = Seconds(SimClock::now() - t0);
    json.push_back(absl::StrFormat("\"heartbeat_phase_s\": %.2f", wall));
    json.push_back(absl::StrFormat("\"coordinator_cpu_share\": %.4f",
                                   (cpu1 - cpu0) / wall));
    json.push_back(absl::StrFormat("\"heartbeat_acks\": %d", recorder.acks()));
    json.push_back(absl::StrFormat("\"coordinator_rss_mib\": %.1f",
                                   StatusMiB(coordinator_pid, "VmRSS")));
    // Private memory (the rest is shared libraries' pages).
    json.push_back(absl::StrFormat("\"coordinator_anon_mib\": %.1f",
                                   StatusMiB(coordinator_pid, "RssAnon")));
    // ps after the CPU phase, so that its cost is not counted there:
    // `ps --json` (the whole status) and `ps` (a summary for a large job),
    // and the same with --ps_baseline_binary (another build's trl-coord,
    // e.g. one from before summaries) against the same coordinator, runs
    // interleaved.
    struct PsTiming {
      std::string field;
      std::string binary;
      bool json;
      std::vector<double> seconds;
    };
    std::vector<PsTiming> timings;
    if (!ps_binary.empty()) {
      timings.push_back({"ps_ms", ps_binary, true, {}});
      timings.push_back({"ps_summary_ms", ps_binary, false, {}});
    }
    if (!ps_baseline_binary.empty()) {
      timings.push_back({"ps_baseline_ms", ps_baseline_binary, true, {}});
      timings.push_back(
          {"ps_summary_baseline_ms", ps_baseline_binary, false, {}});
    }
    for (int i = 0; i < ps_runs; ++i) {
      for (PsTiming& timing : timings) {
        std::vector<std::string> ps = {timing.binary, "ps", "--address",
                                       target};
        if (timing.json) ps.push_back("--json");
        if (!launch.auth_token_file.empty()) {
          ps.insert(ps.end(), {"--auth_token_file", launch.auth_token_file});
        }
        if (launch.insecure) ps.push_back("--insecure");
        const double took = TimeCommand(ps);
        if (took >= 0) timing.seconds.push_back(took);
      }
    }
    json.push_back(absl::StrFormat("\"coordinator_hwm_mib\": %.1f",
                                   StatusMiB(coordinator_pid, "VmHWM")));
    for (const PsTiming& timing : timings) {
      const Spread ps = Summarize(timing.seconds);
      json.push_back(absl::StrFormat(
          "\"%s\": {\"runs\": %d, \"median\": %.1f, \"min\": %.1f, "
          "\"max\": %.1f}",
          timing.field, static_cast<int>(timing.seconds.size()),
          ps.median * 1000, ps.min * 1000, ps.max * 1000));
    }
  }

  int code = 0;
  if (failures && agents >= 2) {
    // 3. A whole-job restart: one worker fails -> every agent holds the
    // next generation's assignment (no backoff before a job's first
    // restart).
    const auto failing = SimClock::now();
    sims[agents / 2]->FailWorker(0, 1);
    auto restarted = recorder.WaitAllAssigned(1, SimClock::now() + phase);
    if (restarted) {
      json.push_back(absl::StrFormat("\"restart_s\": %.4f",
                                     Seconds(*restarted - failing)));
    } else {
      std::fprintf(stderr, "trl-agent-sim: the job did not restart\n");
      code = 1;
    }
    // 4. A silent agent: its heartbeats stop (the stream stays open) ->
    // the first stop order at another agent.
    if (restarted) {
      const int silent = agents - 1;
      const auto silenced = SimClock::now();
      sims[silent]->GoSilent();
      auto noticed = recorder.WaitStop(1, silent, SimClock::now() + phase);
      if (noticed) {
        json.push_back(absl::StrFormat("\"dead_agent_noticed_s\": %.4f",
                                       Seconds(*noticed - silenced)));
      } else {
        std::fprintf(stderr, "trl-agent-sim: the silent agent went unseen\n");
        code = 1;
      }
    }
  }
  return finish(code);
}

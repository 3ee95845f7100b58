#include "common/launch_options.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/slurm_job.h"

namespace trl {
namespace {

std::string FlagNames(const std::string& snake) {
  std::string kebab = snake;
  std::replace(kebab.begin(), kebab.end(), '_', '-');
  if (kebab == snake) return "--" + snake;
  return absl::StrCat("--", snake, ",--", kebab);
}

bool Given(const CLI::Option* flag) { return flag && flag->count() > 0; }

AccelerateConfig BuiltInDefault() {
  AccelerateConfig config;
  config.source = "built-in default";
  config.main_process_ip = "127.0.0.1";
  return config;
}

}  // namespace

std::map<std::string, std::string> LauncherFingerprint(
    const LaunchOptions& options) {
  return {
      {"heartbeat_interval_ms",
       std::to_string(std::llround(options.heartbeat_interval_s * 1000))},
      {"heartbeat_misses", std::to_string(options.heartbeat_misses)},
  };
}

void AddLaunchFlags(CLI::App& app, LaunchOptions& o) {
  auto env_string = [](const char* name, std::string fallback) {
    const char* value = std::getenv(name);
    return value ? std::string(value) : fallback;
  };
  auto env_double = [](const char* name, double fallback) {
    const char* value = std::getenv(name);
    return value ? std::atof(value) : fallback;
  };
  o.python = env_string("TRL_PYTHON", o.python);
  o.log_dir = env_string("TRL_LOG_DIR", o.log_dir);
  o.worker_user = env_string("TRL_WORKER_USER", o.worker_user);
  o.stop_grace_s = env_double("TRL_STOP_GRACE", o.stop_grace_s);
  o.rdzv_timeout_s = env_double("TRL_RDZV_TIMEOUT", o.rdzv_timeout_s);
  o.reconnect_timeout_s =
      env_double("TRL_RECONNECT_TIMEOUT", o.reconnect_timeout_s);
  o.heartbeat_interval_s =
      env_double("TRL_HEARTBEAT_INTERVAL", o.heartbeat_interval_s);

  app.add_option(FlagNames("config_file"), o.config_file,
                 "Accelerate config file (default: Accelerate's default "
                 "config, else a built-in single-machine config)");
  o.machine_rank_flag = app.add_option(FlagNames("machine_rank"),
                                       o.machine_rank, "This machine's rank");
  o.num_machines_flag = app.add_option(FlagNames("num_machines"),
                                       o.num_machines, "Number of machines");
  o.num_processes_flag =
      app.add_option(FlagNames("num_processes"), o.num_processes,
                     "Total number of processes over all machines");
  o.main_process_ip_flag =
      app.add_option(FlagNames("main_process_ip"), o.main_process_ip,
                     "Address of machine 0, where the coordinator listens");
  o.main_process_port_flag =
      app.add_option(FlagNames("main_process_port"), o.main_process_port,
                     "Port of the coordinator on machine 0");
  o.mixed_precision_flag = app.add_option(
      FlagNames("mixed_precision"), o.mixed_precision, "no, fp16, bf16, fp8");
  o.gpu_ids_flag = app.add_option(FlagNames("gpu_ids"), o.gpu_ids,
                                  "GPUs to use on each machine, e.g. 0,1");
  o.use_cpu_flag = app.add_flag(FlagNames("cpu") + "," + FlagNames("use_cpu"),
                                o.use_cpu, "Run on CPUs even if GPUs exist");
  app.add_option(FlagNames("max_restarts"), o.max_restarts,
                 "Restarts of the whole job before it fails");
  app.add_option(FlagNames("monitor_interval"), o.monitor_interval_s,
                 "Seconds between checks of worker state");
  app.add_option(FlagNames("log_dir"), o.log_dir,
                 "Directory for per-rank log files (env TRL_LOG_DIR)");
  app.add_option(FlagNames("worker_user"), o.worker_user,
                 "Run this machine's workers as this user (name or uid), "
                 "apart from the daemons and the token; the agent must run "
                 "as root (env TRL_WORKER_USER)");
  app.add_flag("-m," + FlagNames("module"), o.module,
               "Run the command as a Python module (python -m)");
  app.add_flag(FlagNames("no_python"), o.no_python,
               "Execute the command directly, not through Python");
  app.add_option(FlagNames("advertise_addr"), o.advertise_addr,
                 "Address other machines reach this one at (default: the "
                 "local address of the route to the coordinator)");
  app.add_option(FlagNames("stop_grace"), o.stop_grace_s,
                 "Seconds between SIGTERM and SIGKILL when stopping workers "
                 "(env TRL_STOP_GRACE)");
  app.add_option(FlagNames("rdzv_timeout"), o.rdzv_timeout_s,
                 "Seconds to wait for the coordinator or for all agents "
                 "(env TRL_RDZV_TIMEOUT)");
  app.add_option(FlagNames("heartbeat_interval"), o.heartbeat_interval_s,
                 "Seconds between agent heartbeats (env "
                 "TRL_HEARTBEAT_INTERVAL)");
  app.add_option(FlagNames("heartbeat_misses"), o.heartbeat_misses,
                 "Missed heartbeats after which an agent counts as lost");
  app.add_option(FlagNames("rejoin_timeout"), o.rejoin_timeout_s,
                 "Seconds a restart waits for a lost machine to come back");
  app.add_option(FlagNames("reconnect_timeout"), o.reconnect_timeout_s,
                 "Seconds an agent that lost its coordinator waits for it to "
                 "come back before it exits (env TRL_RECONNECT_TIMEOUT)")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option(FlagNames("connection_idle_timeout"),
                 o.connection_idle_timeout_s,
                 "Seconds the coordinator keeps a connection that makes no "
                 "call")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option(FlagNames("restart_backoff"), o.restart_backoff_s,
                 "Seconds before the first restart; doubles with each");
  app.add_option(FlagNames("restart_backoff_max"), o.restart_backoff_max_s,
                 "Cap of the restart backoff, in seconds");
  app.add_option(FlagNames("no_restart_exit_codes"), o.no_restart_exit_codes,
                 "Worker exit codes that end the job without a restart, "
                 "e.g. 2,64");
  app.add_option(FlagNames("worker_heartbeat_timeout"),
                 o.worker_heartbeat_timeout_s,
                 "Seconds without a touch of TRL_HEARTBEAT_FILE after which a "
                 "worker counts as hung (0: off)");
  app.add_option(FlagNames("lease"), o.lease_s,
                 "Seconds an agent keeps workers running without hearing "
                 "from the coordinator (default: heartbeat_interval x "
                 "heartbeat_misses + 1)");
  app.add_flag(FlagNames("no_udp_heartbeats"), o.no_udp_heartbeats,
               "Send heartbeats on the gRPC stream, not as UDP datagrams to "
               "main_process_port (agents fall back to the stream by "
               "themselves when datagrams get no answer)");
  app.add_option(FlagNames("auth_token_file"), o.auth_token_file,
                 "File holding the shared auth token (default: "
                 "TRL_AUTH_TOKEN, else ~/.trl/token)");
  app.add_flag(FlagNames("slurm"), o.slurm,
               "Take machine_rank, num_machines, main_process_ip and the "
               "processes per node from Slurm (srun's SLURM_* variables); "
               "they win over the config file");
  app.add_flag(FlagNames("insecure"), o.insecure,
               "No authentication (only on a loopback address)");
  app.add_option(FlagNames("tls_cert"), o.tls_cert,
                 "This daemon's TLS certificate (PEM)");
  app.add_option(FlagNames("tls_key"), o.tls_key,
                 "The private key of --tls_cert (PEM)");
  app.add_option(FlagNames("tls_ca"), o.tls_ca,
                 "CA certificate (PEM) that signs the peers' certificates; "
                 "on the coordinator it makes client certificates required "
                 "(mutual TLS)");
  app.add_option(FlagNames("python"), o.python,
                 "Python interpreter for .py commands (env TRL_PYTHON)");
}

absl::StatusOr<std::vector<int>> ParseExitCodeList(const std::string& text) {
  std::vector<int> codes;
  if (text.empty()) return codes;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int code = -1;
    const std::string trimmed(absl::StripAsciiWhitespace(part));
    if (!absl::SimpleAtoi(trimmed, &code) || code < 0 || code > 255) {
      return absl::InvalidArgumentError(
          absl::StrCat("--no_restart_exit_codes '", text, "': '", trimmed,
                       "' is not an exit code (0..255)"));
    }
    codes.push_back(code);
  }
  return codes;
}

std::string AccelerateDefaultConfigPath(const LocalMachine& machine) {
  return (std::filesystem::path(machine.hf_home) / "accelerate" /
          "default_config.yaml")
      .string();
}

namespace {

// Whether Accelerate's default config is there; a cache directory we may
// not look into (another user's) counts as no default config.
bool DefaultConfigExists(const std::string& path) {
  std::error_code error;
  return std::filesystem::exists(path, error) && !error;
}

}  // namespace

absl::StatusOr<AccelerateConfig> ResolveLaunchConfig(
    const LaunchOptions& o, const LocalMachine& machine,
    std::vector<std::string>* notes) {
  AccelerateConfig config;
  if (!o.config_file.empty()) {
    auto loaded = LoadAccelerateConfigFile(o.config_file);
    if (!loaded.ok()) return loaded.status();
    config = *std::move(loaded);
  } else if (const std::string path = AccelerateDefaultConfigPath(machine);
             !machine.hf_home.empty() && DefaultConfigExists(path)) {
    auto loaded = LoadAccelerateConfigFile(path);
    if (!loaded.ok()) return loaded.status();
    config = *std::move(loaded);
  } else {
    config = BuiltInDefault();
  }

  if (Given(o.machine_rank_flag)) config.machine_rank = o.machine_rank;
  if (Given(o.num_machines_flag)) config.num_machines = o.num_machines;
  if (Given(o.num_processes_flag)) config.num_processes = o.num_processes;
  if (Given(o.main_process_ip_flag)) config.main_process_ip = o.main_process_ip;
  if (Given(o.main_process_port_flag)) {
    config.main_process_port = o.main_process_port;
  }
  if (Given(o.mixed_precision_flag)) {
    config.mixed_precision = absl::AsciiStrToLower(o.mixed_precision);
    config.mixed_precision_from_file = false;
  }
  if (Given(o.gpu_ids_flag)) config.gpu_ids = o.gpu_ids;
  if (Given(o.use_cpu_flag)) config.use_cpu = o.use_cpu;
  if (o.slurm) {
    auto job = ReadSlurmJob(machine.environment);
    if (!job.ok()) return job.status();
    ApplySlurmJob(*job, &config, notes);
  }

  // Like `accelerate launch`: an unset process count means one process per
  // local GPU (or one CPU process) on each machine.
  if (config.num_processes < 0) {
    const int per_machine =
        (!config.use_cpu && machine.gpu_count > 0) ? machine.gpu_count : 1;
    config.num_processes = per_machine * config.num_machines;
  }
  if (config.source == "built-in default") {
    const bool gpus = !config.use_cpu && machine.gpu_count > 0;
    if (!gpus) config.use_cpu = true;
    if (config.num_processes > 1 || config.num_machines > 1) {
      config.distributed_type = gpus ? "MULTI_GPU" : "MULTI_CPU";
    }
  }
  if (config.main_process_ip.empty() && config.num_machines == 1) {
    config.main_process_ip = "127.0.0.1";
  }
  if (auto status = ValidateAccelerateConfig(config); !status.ok()) {
    return status;
  }
  return config;
}

}  // namespace trl

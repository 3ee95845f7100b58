#include "common/launch_options.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

const std::vector<std::string>& DynamoBackends() {
  static const auto* backends =
      new std::vector<std::string>{"no",
                                   "eager",
                                   "aot_eager",
                                   "inductor",
                                   "aot_ts_nvfuser",
                                   "nvprims_nvfuser",
                                   "cudagraphs",
                                   "ofi",
                                   "fx2trt",
                                   "onnxrt",
                                   "tensorrt",
                                   "aot_torchxla_trace_once",
                                   "torhchxla_trace_once",
                                   "ipex",
                                   "tvm"};
  return *backends;
}

// Accelerate's flags beyond the ones every launcher has, and the refused
// ones (accelerate_flags.h).
void AddMoreAccelerateFlags(CLI::App& app, LaunchOptions& o) {
  app.add_flag("-q," + FlagNames("quiet"), o.quiet,
               "Accepted for `accelerate launch`: trl-launch shows no "
               "launcher stack trace to silence");
  app.add_flag(FlagNames("debug"), o.debug,
               "ACCELERATE_DEBUG_MODE=true for the workers");
  app.add_flag(FlagNames("multi_gpu"), o.multi_gpu,
               "distributed_type MULTI_GPU, whatever the file says");
  app.add_flag(FlagNames("use_deepspeed"), o.use_deepspeed,
               "Accepted when the config's distributed_type is DEEPSPEED");
  app.add_flag(FlagNames("use_fsdp"), o.use_fsdp,
               "Accepted when the config's distributed_type is FSDP");
  app.add_flag(FlagNames("use_megatron_lm"), o.use_megatron_lm,
               "Accepted when the config's distributed_type is MEGATRON_LM");
  app.add_flag(FlagNames("enable_cpu_affinity"), o.enable_cpu_affinity,
               "ACCELERATE_CPU_AFFINITY=1 for the workers");
  app.add_flag(FlagNames("same_network"), o.same_network,
               "Accepted for `accelerate launch`: the coordinator is the "
               "rendezvous on any network");
  o.num_cpu_threads_flag =
      app.add_option(FlagNames("num_cpu_threads_per_process"),
                     o.num_cpu_threads_per_process,
                     "OMP_NUM_THREADS of every worker (default: the "
                     "inherited OMP_NUM_THREADS, else for CPU jobs each "
                     "process's share of the physical cores, else 1)")
          ->check(CLI::Range(1, 1 << 20));
  o.role_flag = app.add_option(FlagNames("role"), o.role,
                               "ROLE_NAME of the workers (default: default)");
  o.rdzv_backend_flag = app.add_option(
      FlagNames("rdzv_backend"), o.rdzv_backend,
      "Accepted for `accelerate launch` (static, c10d, etcd, etcd-v2): the "
      "coordinator is the rendezvous whichever is named");
  o.dynamo_backend_flag =
      app.add_option(FlagNames("dynamo_backend"), o.dynamo_backend,
                     "torch.compile backend (ACCELERATE_DYNAMO_BACKEND)")
          ->check(CLI::IsMember(DynamoBackends(), CLI::ignore_case));
  o.dynamo_mode_flag =
      app.add_option(FlagNames("dynamo_mode"), o.dynamo_mode,
                     "torch.compile mode (ACCELERATE_DYNAMO_MODE)")
          ->check(CLI::IsMember({"default", "reduce-overhead", "max-autotune",
                                 "max-autotune-no-cudagraphs"}));
  app.add_flag(FlagNames("dynamo_use_fullgraph"), o.dynamo_use_fullgraph,
               "ACCELERATE_DYNAMO_USE_FULLGRAPH=True");
  app.add_flag(FlagNames("dynamo_use_dynamic"), o.dynamo_use_dynamic,
               "ACCELERATE_DYNAMO_USE_DYNAMIC=True (unset: torch.compile "
               "decides)");
  app.add_flag(FlagNames("dynamo_use_regional_compilation"),
               o.dynamo_use_regional_compilation,
               "ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION=True");
  for (const AccelerateLaunchFlag& flag : AccelerateLaunchFlags()) {
    if (flag.honoured) continue;
    std::string names = FlagNames(flag.name.substr(2));
    if (!flag.short_name.empty()) names = flag.short_name + "," + names;
    CLI::Option* option = flag.takes_value ? app.add_option(names)->expected(1)
                                           : app.add_flag(names);
    // Hidden from --help; listed in the README with its reason.
    option->group("");
    o.refused_flags.emplace_back(&flag, option);
  }
}

void SetSectionValue(ConfigSection& section, const std::string& key,
                     const std::string& value) {
  for (auto& [k, v] : section) {
    if (k == key) {
      v = value;
      return;
    }
  }
  section.emplace_back(key, value);
}

// Accelerate's flags that choose the launcher and what the workers see,
// applied over the file as `accelerate launch` applies them.
absl::Status ApplyAccelerateFlags(const LaunchOptions& o,
                                  AccelerateConfig& config) {
  const int paradigms = int{o.use_cpu && Given(o.use_cpu_flag)} +
                        int{o.multi_gpu} + int{o.use_deepspeed} +
                        int{o.use_fsdp};
  if (paradigms > 1) {
    return absl::InvalidArgumentError(
        "only one of --cpu, --multi_gpu, --use_deepspeed, --use_fsdp may be "
        "given (as in `accelerate launch`)");
  }
  if (o.multi_gpu) {
    if (Given(o.num_processes_flag) && o.num_processes < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("--multi_gpu needs at least 2 processes; "
                       "--num_processes is ",
                       o.num_processes));
    }
    config.distributed_type = "MULTI_GPU";
  }
  const struct {
    bool given;
    const char* flag;
    const char* type;
    const char* section;
  } paradigm_flags[] = {
      {o.use_deepspeed, "--use_deepspeed", "DEEPSPEED", "deepspeed_config"},
      {o.use_fsdp, "--use_fsdp", "FSDP", "fsdp_config"},
      {o.use_megatron_lm, "--use_megatron_lm", "MEGATRON_LM",
       "megatron_lm_config"},
  };
  for (const auto& p : paradigm_flags) {
    if (p.given && config.distributed_type != p.type) {
      return absl::InvalidArgumentError(absl::StrCat(
          p.flag, " is refused: trl-launch takes ", p.type,
          " settings from the config file only; set distributed_type: ", p.type,
          " and its ", p.section, " there (", config.source,
          " says distributed_type '", config.distributed_type, "')"));
    }
  }
  if (o.debug) config.debug = true;
  if (o.enable_cpu_affinity) config.enable_cpu_affinity = true;
  if (o.same_network) config.same_network = true;
  if (Given(o.rdzv_backend_flag)) config.rdzv_backend = o.rdzv_backend;
  if (Given(o.role_flag)) {
    if (o.role.empty()) {
      return absl::InvalidArgumentError("--role must not be empty");
    }
    config.role = o.role;
  }
  if (Given(o.num_cpu_threads_flag)) {
    config.num_cpu_threads_per_process = o.num_cpu_threads_per_process;
  }
  if (Given(o.dynamo_backend_flag)) {
    SetSectionValue(config.dynamo_config, "dynamo_backend",
                    absl::AsciiStrToLower(o.dynamo_backend));
  }
  if (Given(o.dynamo_mode_flag)) {
    SetSectionValue(config.dynamo_config, "dynamo_mode", o.dynamo_mode);
  }
  if (o.dynamo_use_fullgraph) {
    SetSectionValue(config.dynamo_config, "dynamo_use_fullgraph", "true");
  }
  if (o.dynamo_use_dynamic) {
    SetSectionValue(config.dynamo_config, "dynamo_use_dynamic", "true");
  }
  if (o.dynamo_use_regional_compilation) {
    SetSectionValue(config.dynamo_config, "dynamo_use_regional_compilation",
                    "true");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckRefusedFlags(const LaunchOptions& options) {
  for (const auto& [flag, option] : options.refused_flags) {
    if (Given(option)) {
      return absl::InvalidArgumentError(RefusedFlagMessage(*flag, flag->name));
    }
  }
  return absl::OkStatus();
}

std::map<std::string, std::string> LauncherFingerprint(
    const LaunchOptions& options) {
  return {
      {"heartbeat_interval_ms",
       std::to_string(std::llround(options.heartbeat_interval_s * 1000))},
      {"heartbeat_misses", std::to_string(options.heartbeat_misses)},
  };
}

std::string LaunchOptions::GivenPython() const {
  const bool given =
      (python_flag != nullptr && python_flag->count() > 0) || python_from_env;
  return given ? python : std::string();
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
  o.python_from_env = std::getenv("TRL_PYTHON") != nullptr;
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
  o.num_machines_flag = app.add_option(
      FlagNames("num_machines"), o.num_machines,
      "Number of machines: N, or MIN:MAX for an elastic job that runs on "
      "as few as MIN (env TRL_NUM_MACHINES)");
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
  AddMoreAccelerateFlags(app, o);
  app.add_option(FlagNames("advertise_addr"), o.advertise_addr,
                 "Address other machines reach this one at (default: the "
                 "local address of the route to the coordinator)");
  app.add_option(FlagNames("stop_grace"), o.stop_grace_s,
                 "Seconds between SIGTERM and SIGKILL when stopping workers "
                 "(env TRL_STOP_GRACE)");
  app.add_option(FlagNames("rdzv_timeout"), o.rdzv_timeout_s,
                 "Seconds to wait for the coordinator or for all agents "
                 "(env TRL_RDZV_TIMEOUT)");
  app.add_option(FlagNames("waiting_report_interval"),
                 o.waiting_report_interval_s,
                 "Seconds between the reports of what a daemon waits for: "
                 "the coordinator's of the machines not there, with the "
                 "command to run on them (0: none); an agent's of why its "
                 "coordinator or token is not there (0: only when it "
                 "changes)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option(FlagNames("heartbeat_interval"), o.heartbeat_interval_s,
                 "Seconds between agent heartbeats (env "
                 "TRL_HEARTBEAT_INTERVAL)");
  app.add_option(FlagNames("heartbeat_misses"), o.heartbeat_misses,
                 "Missed heartbeats after which an agent counts as lost");
  app.add_option(FlagNames("rejoin_timeout"), o.rejoin_timeout_s,
                 "Seconds a restart waits for a lost machine to come back");
  app.add_option(FlagNames("elastic_wait"), o.elastic_wait_s,
                 "Elastic jobs: seconds the first generation waits for more "
                 "machines once MIN have registered (default 10)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_flag(FlagNames("rescale_on_join"), o.rescale_on_join,
               "Elastic jobs: a machine that registers while a generation "
               "runs stops it at once to be taken in (default: at the next "
               "restart)");
  app.add_flag(FlagNames("spare"), o.spare,
               "trl-agent: register as a hot spare, without a machine rank; "
               "take a lost machine's place at once (docs/elastic.md)");
  app.add_option(FlagNames("cordon_after"), o.cordon_after,
                 "Failures of one host (a worker failing there, its agent "
                 "lost) within --cordon_window after which it gets no ranks "
                 "until `trl-coord uncordon HOST` (default 3; 0: never)")
      ->check(CLI::Range(0, 1000000));
  app.add_option(FlagNames("max_spares"), o.max_spares,
                 "Spares the coordinator takes at most (default: as many as "
                 "machines); more are refused")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option(FlagNames("cordon_window"), o.cordon_window_s,
                 "Seconds over which --cordon_after counts (default 600)")
      ->check(CLI::Range(0.001, 31536000.0));
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
                 "Seconds before the second restart (the first is at "
                 "once); doubles with each after it");
  app.add_option(FlagNames("restart_backoff_max"), o.restart_backoff_max_s,
                 "Cap of the restart backoff, in seconds");
  app.add_option(FlagNames("no_restart_exit_codes"), o.no_restart_exit_codes,
                 "Worker exit codes that end the job without a restart, "
                 "e.g. 2,64");
  app.add_option(FlagNames("worker_heartbeat_timeout"),
                 o.worker_heartbeat_timeout_s,
                 "Seconds without a touch of TRL_HEARTBEAT_FILE after which a "
                 "worker counts as hung (0: off)");
  app.add_option(FlagNames("hang_output_timeout"), o.hang_output_timeout_s,
                 "Seconds without a byte of output from any rank of a "
                 "machine after which its ranks count as hung (default 0: "
                 "off; a script that prints on rank 0 only leaves the other "
                 "machines silent)")
      ->check(CLI::Range(0.0, 864000.0));
  app.add_option(FlagNames("hang_cpu_timeout"), o.hang_cpu_timeout_s,
                 "Seconds a worker's processes may use less than 1% of a "
                 "core before it counts as hung (asleep, waiting for a "
                 "peer, deadlocked; 0: off)")
      ->check(CLI::Range(0.0, 864000.0));
  app.add_option(FlagNames("health_check"), o.health_check,
                 "A command (run with /bin/sh -c) that checks this machine "
                 "when the agent starts and every --health_check_interval: "
                 "a non-zero exit means unhealthy, its last line of output "
                 "the reason; an unhealthy machine's host gets no ranks "
                 "(a spare takes its place) until it passes again");
  app.add_option(FlagNames("health_check_interval"), o.health_check_interval_s,
                 "Seconds between node health checks (0: only at start)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option(FlagNames("health_check_timeout"), o.health_check_timeout_s,
                 "Seconds --health_check may run before it is killed and "
                 "the machine counts as unhealthy")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option(FlagNames("min_free_disk_mb"), o.min_free_disk_mb,
                 "MiB that must stay free in the log directory and the "
                 "working directory, or the machine is unhealthy (0: no "
                 "disk check)")
      ->check(CLI::Range(0.0, 1e9));
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
  o.python_flag = app.add_option(
      FlagNames("python"), o.python,
      "Python interpreter for .py commands (env TRL_PYTHON); an agent's own "
      "wins for its machine's workers");
}

absl::StatusOr<MachineRange> ParseNumMachines(const std::string& text,
                                              const std::string& what) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", text, "': ", why,
                     "; give N or MIN:MAX with 1 <= MIN <= MAX (e.g. 2:4)"));
  };
  const std::string trimmed(absl::StripAsciiWhitespace(text));
  const std::vector<std::string> parts = absl::StrSplit(trimmed, ':');
  if (parts.size() > 2) return bad("more than one ':'");
  std::vector<int> numbers;
  for (const std::string& part : parts) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n)) {
      return bad(absl::StrCat("'", part, "' is not a whole number"));
    }
    numbers.push_back(n);
  }
  MachineRange range{numbers.front(), numbers.back()};
  if (range.min < 1) {
    return bad(absl::StrCat(parts.size() == 2 ? "MIN " : "", range.min,
                            " is below 1"));
  }
  if (range.min > range.max) {
    return bad(
        absl::StrCat("MIN ", range.min, " is greater than MAX ", range.max));
  }
  return range;
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

// "multi_node.yaml: main_process_ip 'x' is ..." becomes "multi_node.yaml
// with --main_process_ip: ..." when flags changed what the file said.
absl::Status NamingOverrides(const absl::Status& status,
                             const std::string& source,
                             const std::vector<std::string>& overrides) {
  const std::string prefix = source + ": ";
  const std::string message(status.message());
  if (overrides.empty() || !absl::StartsWith(message, prefix)) return status;
  return absl::Status(
      status.code(),
      absl::StrCat(source, " with ", absl::StrJoin(overrides, ", "), ": ",
                   message.substr(prefix.size())));
}

}  // namespace

absl::StatusOr<AccelerateConfig> ResolveLaunchConfig(
    const LaunchOptions& o, const LocalMachine& machine,
    std::vector<std::string>* notes) {
  if (auto refused = CheckRefusedFlags(o); !refused.ok()) return refused;
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

  // The settings given on the command line (or in code) that changed the
  // file's: a bad value is then said to come from them, not the file.
  std::vector<std::string> overrides;
  if (Given(o.machine_rank_flag)) {
    config.machine_rank = o.machine_rank;
    overrides.push_back("--machine_rank");
  }
  {
    // The flag, else TRL_NUM_MACHINES; either overrides the file.
    const auto env = machine.environment.find("TRL_NUM_MACHINES");
    const bool from_flag = Given(o.num_machines_flag);
    if (from_flag || env != machine.environment.end()) {
      auto range = from_flag
                       ? ParseNumMachines(o.num_machines, "--num_machines")
                       : ParseNumMachines(env->second, "TRL_NUM_MACHINES");
      if (!range.ok()) return range.status();
      config.num_machines = range->max;
      config.min_machines = range->min;
      overrides.push_back(from_flag ? "--num_machines" : "TRL_NUM_MACHINES");
    }
  }
  if (Given(o.num_processes_flag)) {
    config.num_processes = o.num_processes;
    overrides.push_back("--num_processes");
  }
  // Options made in code (a client's, without the command line's flags)
  // override with what they set.
  if (Given(o.main_process_ip_flag) ||
      (o.main_process_ip_flag == nullptr && !o.main_process_ip.empty())) {
    config.main_process_ip = o.main_process_ip;
    overrides.push_back("--main_process_ip");
  }
  if (Given(o.main_process_port_flag) ||
      (o.main_process_port_flag == nullptr && o.main_process_port != 0)) {
    config.main_process_port = o.main_process_port;
    overrides.push_back("--main_process_port");
  }
  if (Given(o.mixed_precision_flag)) {
    config.mixed_precision = absl::AsciiStrToLower(o.mixed_precision);
    config.mixed_precision_from_file = false;
    overrides.push_back("--mixed_precision");
  }
  if (Given(o.gpu_ids_flag)) {
    config.gpu_ids = o.gpu_ids;
    overrides.push_back("--gpu_ids");
  }
  if (Given(o.use_cpu_flag)) {
    config.use_cpu = o.use_cpu;
    config.cpu_flag = o.use_cpu;
  }
  if (auto applied = ApplyAccelerateFlags(o, config); !applied.ok()) {
    return applied;
  }
  if (o.slurm) {
    auto job = ReadSlurmJob(machine.environment);
    if (!job.ok()) return job.status();
    ApplySlurmJob(*job, &config, notes);
    overrides.push_back("--slurm");
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
    return NamingOverrides(status, config.source, overrides);
  }
  if (config.main_process_port == 0 && !o.allow_free_port) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.source,
        ": main_process_port 0 (a free port, chosen by the coordinator) is "
        "refused here: this daemon cannot learn which port `trl-coord start` "
        "chose; give the port it printed"));
  }
  return config;
}

}  // namespace trl

// Command-line flags shared by `trl-coord start` and `trl-agent`, and the
// resolution of the effective Accelerate config: the file (or Accelerate's
// default config file, or a built-in single-machine default), then flag
// overrides, then validation.
#ifndef TRL_COMMON_LAUNCH_OPTIONS_H_
#define TRL_COMMON_LAUNCH_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/accelerate_config.h"
#include "common/accelerate_flags.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace trl {

struct LaunchOptions {
  // Accelerate's own flags; each overrides the config file when given.
  std::string config_file;
  int machine_rank = 0;
  // "N" or an elastic range "MIN:MAX" (ParseNumMachines); when the flag is
  // not given, TRL_NUM_MACHINES gives it.
  std::string num_machines;
  int num_processes = 1;
  int main_process_port = 0;
  std::string main_process_ip;
  std::string mixed_precision;
  std::string gpu_ids;
  bool use_cpu = false;
  int max_restarts = 0;
  double monitor_interval_s = 0.1;
  std::string log_dir;
  // The user workers run as (the agent must be root); empty: the agent's.
  std::string worker_user;
  bool module = false;
  bool no_python = false;
  bool quiet = false;  // nothing to silence: no launcher stack trace is shown
  bool debug = false;
  bool multi_gpu = false;
  bool use_deepspeed = false;
  bool use_fsdp = false;
  bool use_megatron_lm = false;
  bool enable_cpu_affinity = false;
  bool same_network = false;  // the coordinator is the rendezvous either way
  int num_cpu_threads_per_process = 0;
  std::string role;
  std::string rdzv_backend;
  std::string dynamo_backend;
  std::string dynamo_mode;
  bool dynamo_use_fullgraph = false;
  bool dynamo_use_dynamic = false;
  bool dynamo_use_regional_compilation = false;

  // Launcher settings that an Accelerate file cannot hold.
  std::string advertise_addr;
  double stop_grace_s = 30;
  double rdzv_timeout_s = 900;
  // While the coordinator waits for machines, how often it says which
  // (0: never).
  double waiting_report_interval_s = 15;
  double heartbeat_interval_s = 1;
  int heartbeat_misses = 3;
  double rejoin_timeout_s = 300;
  // Elastic jobs (--num_machines MIN:MAX; docs/elastic.md): how long the
  // first generation waits for more than MIN machines, and whether a
  // machine that registers while a generation runs stops it at once to be
  // taken in (otherwise at the next restart).
  double elastic_wait_s = 10;
  bool rescale_on_join = false;
  // trl-agent --spare: register without a machine rank and wait to take a
  // lost machine's place. Hosts with cordon_after failures within
  // cordon_window_s get no ranks until `trl-coord uncordon` (0: never).
  bool spare = false;
  int cordon_after = 3;
  double cordon_window_s = 600;
  int max_spares = 0;  // 0: as many as machines
  // How long an agent that lost the coordinator it was registered with
  // waits for it to come back (resume the job) before it exits: no agent
  // outlives its coordinator by more.
  double reconnect_timeout_s = 120;
  // The coordinator closes a connection that has carried no call this long
  // (agents always have one open; a flood of idle ones does not last).
  double connection_idle_timeout_s = 60;
  double restart_backoff_s = 0.1;
  double restart_backoff_max_s = 30;
  std::string no_restart_exit_codes;      // "2,64"
  double worker_heartbeat_timeout_s = 0;  // 0: off
  // Hangs seen without the script's help (agent/core/hang_watch.h): a
  // worker's processes idle, no output from any rank of a machine. 0: off.
  // The CPU one is longer than a healthy job's idle waits (a checkpoint
  // saved, a barrier while rank 0 downloads) and shorter than Gloo's own
  // 30 min. The output one is off by default: a script that prints only
  // on rank 0 (Hugging Face's Trainer does) leaves every other machine
  // silent for the whole run.
  double hang_output_timeout_s = 0;
  double hang_cpu_timeout_s = 600;
  // Node health (agent/health/node_health.h): the operator's check, run at
  // start and every interval, bounded by its timeout; the log and working
  // directories' free space.
  std::string health_check;
  double health_check_interval_s = 60;
  double health_check_timeout_s = 30;
  double min_free_disk_mb = 64;
  // How long an agent keeps workers running without hearing from the
  // coordinator; 0 means heartbeat_interval * heartbeat_misses + 1 s.
  double lease_s = 0;
  // Heartbeats stay on the gRPC stream instead of UDP datagrams on
  // main_process_port (common/heartbeat_datagram.h).
  bool no_udp_heartbeats = false;
  // Take machine_rank, num_machines, main_process_ip and the processes
  // per node from Slurm's variables (common/slurm_job.h).
  bool slurm = false;
  std::string python = "python3";
  // Authentication: a token file (default ~/.trl/token, or TRL_AUTH_TOKEN);
  // --insecure turns it off, on loopback only.
  std::string auth_token_file;
  bool insecure = false;
  // TLS (PEM files); see tls_credentials.h.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;

  double AgentHeartbeatTimeoutSeconds() const {
    return heartbeat_interval_s * heartbeat_misses;
  }
  double LeaseSeconds() const {
    return lease_s > 0 ? lease_s : AgentHeartbeatTimeoutSeconds() + 1;
  }

  // Which overrides were given on the command line.
  CLI::Option* machine_rank_flag = nullptr;
  CLI::Option* num_machines_flag = nullptr;
  CLI::Option* num_processes_flag = nullptr;
  CLI::Option* main_process_port_flag = nullptr;
  CLI::Option* main_process_ip_flag = nullptr;
  CLI::Option* mixed_precision_flag = nullptr;
  CLI::Option* gpu_ids_flag = nullptr;
  CLI::Option* use_cpu_flag = nullptr;
  CLI::Option* num_cpu_threads_flag = nullptr;
  CLI::Option* role_flag = nullptr;
  CLI::Option* python_flag = nullptr;
  bool python_from_env = false;  // TRL_PYTHON was set
  // The interpreter this process was given (--python or TRL_PYTHON), or ""
  // if neither: an agent's own wins for its workers.
  std::string GivenPython() const;
  CLI::Option* rdzv_backend_flag = nullptr;
  CLI::Option* dynamo_backend_flag = nullptr;
  CLI::Option* dynamo_mode_flag = nullptr;
  // Accelerate's flags that trl-launch refuses (accelerate_flags.h), each
  // registered so that it is never taken for the command; giving one makes
  // ResolveLaunchConfig fail naming it.
  std::vector<std::pair<const AccelerateLaunchFlag*, CLI::Option*>>
      refused_flags;

  // trl-agent cannot learn a port the coordinator chose: only `trl-coord
  // start` may take main_process_port 0 (it then picks a free port).
  bool allow_free_port = false;
};

// The launcher settings every agent must share with the coordinator, key ->
// value, sent with the config's fingerprint: an agent with other heartbeat
// settings would be declared lost again and again.
std::map<std::string, std::string> LauncherFingerprint(
    const LaunchOptions& options);

// Registers the flags on `app`; both `--snake_case` and `--kebab-case`
// spellings are accepted. TRL_* environment variables provide the launcher
// settings' defaults.
void AddLaunchFlags(CLI::App& app, LaunchOptions& options);

// Facts about this machine that the config resolution needs.
struct LocalMachine {
  int gpu_count = 0;
  std::string hf_home;  // Accelerate's cache home, for its default config
  // This process's environment (Slurm's variables, for --slurm).
  std::map<std::string, std::string> environment;
};

// Where Accelerate keeps its default config file.
std::string AccelerateDefaultConfigPath(const LocalMachine& machine);

// The machine count of --num_machines / TRL_NUM_MACHINES: "N" (MIN = MAX
// = N) or "MIN:MAX" with 1 <= MIN <= MAX. `what` names the flag or variable
// in the error.
struct MachineRange {
  int min = 1;
  int max = 1;
};
absl::StatusOr<MachineRange> ParseNumMachines(const std::string& text,
                                              const std::string& what);

// Parses a comma-separated list of exit codes (0..255), e.g. "2,64".
absl::StatusOr<std::vector<int>> ParseExitCodeList(const std::string& text);

// The first refused `accelerate launch` flag given, as an error naming it;
// OK when none was given.
absl::Status CheckRefusedFlags(const LaunchOptions& options);

// Loads the config the flags name (or the default one), applies the flag
// overrides and fills what is still unset, then validates it.
// With --slurm, Slurm's values win; what they changed is added to `notes`.
absl::StatusOr<AccelerateConfig> ResolveLaunchConfig(
    const LaunchOptions& options, const LocalMachine& machine,
    std::vector<std::string>* notes = nullptr);

// A flag given in seconds (--stop_grace 2.5) as the duration the daemons
// hold it in.
inline std::chrono::milliseconds SecondsToMillis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace trl

#endif  // TRL_COMMON_LAUNCH_OPTIONS_H_

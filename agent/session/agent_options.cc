#include <filesystem>

#include "agent/health/node_health.h"
#include "agent/session/agent.h"
#include "common/local_machine.h"

namespace trl {
AgentOptions AgentOptionsFromFlags(const AccelerateConfig& config,
                                   const LaunchOptions& flags,
                                   const LocalMachine& machine,
                                   const std::string& coordinator_host) {
  AgentOptions options;
  options.config = config;
  options.spare = flags.spare;
  options.coordinator_host = coordinator_host;
  options.coordinator_port = config.main_process_port;
  options.advertise_addr = flags.advertise_addr;
  options.log_dir = flags.log_dir;
  options.heartbeat_interval = SecondsToMillis(flags.heartbeat_interval_s);
  options.launcher_fingerprint = LauncherFingerprint(flags);
  options.lease = SecondsToMillis(flags.LeaseSeconds());
  options.udp_heartbeats = !flags.no_udp_heartbeats;
  options.worker_heartbeat_timeout =
      SecondsToMillis(flags.worker_heartbeat_timeout_s);
  options.hang_output_timeout = SecondsToMillis(flags.hang_output_timeout_s);
  options.hang_cpu_timeout = SecondsToMillis(flags.hang_cpu_timeout_s);
  options.health.command = flags.health_check;
  options.health.command_timeout =
      SecondsToMillis(flags.health_check_timeout_s);
  options.health.min_free_bytes = MinFreeBytes(flags.min_free_disk_mb);
  options.health_check_interval =
      SecondsToMillis(flags.health_check_interval_s);
  options.connect_timeout = SecondsToMillis(flags.rdzv_timeout_s);
  options.waiting_report_interval =
      SecondsToMillis(flags.waiting_report_interval_s);
  options.reconnect_timeout = SecondsToMillis(flags.reconnect_timeout_s);
  options.tls_cert = flags.tls_cert;
  options.tls_key = flags.tls_key;
  options.tls_ca = flags.tls_ca;
  options.local_gpu_count = machine.gpu_count;
  options.inherited_environment = CurrentEnvironment();
  options.working_directory = std::filesystem::current_path().string();
  options.health.directories = {options.log_dir, options.working_directory};
  options.own_python = flags.GivenPython();
  return options;
}

}  // namespace trl

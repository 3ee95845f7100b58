#include "coordinator/owner/coordinator_options.h"

#include <chrono>

namespace trl {

namespace {

// What every agent's registration must say: the config's fingerprint and
// the launcher settings they share.
std::map<std::string, std::string> FingerprintOf(
    const CoordinatorOptions& options) {
  auto fingerprint = AgreementFingerprint(options.config);
  fingerprint.insert(options.launcher_fingerprint.begin(),
                     options.launcher_fingerprint.end());
  return fingerprint;
}

}  // namespace

int64_t SystemUnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

JobSettings JobSettingsOf(const CoordinatorOptions& options) {
  JobSettings settings;
  static_cast<JobPolicy&>(settings) = options.policy;
  settings.job_id = options.job_id;
  settings.num_machines = options.config.num_machines;
  settings.local_world_size = options.config.ProcessesPerMachine();
  settings.config_fingerprint = FingerprintOf(options);
  settings.command = options.worker_argv;
  settings.min_machines = options.config.min_machines;
  return settings;
}

}  // namespace trl

#include "coordinator/owner/job_options.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/private_files.h"
#include "coordinator/record/state_file.h"

namespace trl {
absl::StatusOr<JobPolicy> JobPolicyFromFlags(const LaunchOptions& o) {
  JobPolicy policy;
  policy.restart.max_restarts = o.max_restarts;
  policy.restart.initial_backoff = SecondsToMillis(o.restart_backoff_s);
  policy.restart.max_backoff = SecondsToMillis(o.restart_backoff_max_s);
  auto no_restart = ParseExitCodeList(o.no_restart_exit_codes);
  if (!no_restart.ok()) return no_restart.status();
  policy.restart.no_restart_exit_codes.insert(no_restart->begin(),
                                              no_restart->end());
  policy.agent_heartbeat_timeout =
      SecondsToMillis(o.AgentHeartbeatTimeoutSeconds());
  policy.rejoin_timeout = SecondsToMillis(o.rejoin_timeout_s);
  policy.registration_timeout = SecondsToMillis(o.rdzv_timeout_s);
  policy.stop_grace = SecondsToMillis(o.stop_grace_s);
  policy.elastic_wait = SecondsToMillis(o.elastic_wait_s);
  policy.rescale_on_join = o.rescale_on_join;
  policy.cordon_after = o.cordon_after;
  policy.cordon_window = SecondsToMillis(o.cordon_window_s);
  policy.max_spares = o.max_spares;
  policy.tick_interval = SecondsToMillis(o.monitor_interval_s);
  return policy;
}

absl::StatusOr<std::string> NewJobId() {
  if (const char* id = std::getenv("TRL_JOB_ID")) {
    // It names directories (log_dir/<job>, the demo's output): a path in
    // disguise is refused.
    if (!IsValidJobId(id)) {
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

std::string NewRunId() {
  unsigned char bytes[8] = {};
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t got = 0;
  if (fd >= 0) {
    got = read(fd, bytes, sizeof(bytes));
    close(fd);
  }
  if (got != static_cast<ssize_t>(sizeof(bytes))) {
    // No /dev/urandom: the clock and the pid tell runs apart well enough.
    const uint64_t mixed =
        static_cast<uint64_t>(
            std::chrono::system_clock::now().time_since_epoch().count()) ^
        (static_cast<uint64_t>(getpid()) << 40);
    for (int i = 0; i < 8; ++i) bytes[i] = (mixed >> (8 * i)) & 0xff;
  }
  std::string id;
  for (unsigned char b : bytes) absl::StrAppendFormat(&id, "%02x", b);
  return id;
}

std::string JobIdentity(const std::vector<std::string>& argv,
                        const AccelerateConfig& config) {
  std::string text = absl::StrJoin(argv, "\x1f");
  for (const auto& [key, value] : AgreementFingerprint(config)) {
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

void ChooseStateFile(const std::string& state_file, const std::string& host,
                     int port, CoordinatorOptions* options) {
  auto log = ComponentLogger("coord");
  // A coordinator restarted on the same address picks up the job its
  // predecessor ran, if it is the same job (command and config).
  options->state_file = state_file;
  if (options->state_file.empty()) {
    auto path = DefaultJobStatePath(host, port);
    if (path.ok()) {
      options->state_file = *path;
    } else {
      // A safe fallback: nothing kept rather than a file others control.
      log->warn(
          "the job's state is not kept ({}); a coordinator restarted on this "
          "address will start a new job (or pass --state_file)",
          std::string(path.status().message()));
    }
  }
  auto previous = options->state_file.empty()
                      ? absl::StatusOr<std::optional<JobRecord>>(std::nullopt)
                      : LoadJobRecord(options->state_file);
  if (!previous.ok()) {
    log->warn("{}; starting a new job",
              std::string(previous.status().message()));
  } else if (*previous && (*previous)->identity == options->identity) {
    options->resume = *previous;
    options->job_id = (*previous)->job_id;
    if (!(*previous)->run_id.empty()) options->run_id = (*previous)->run_id;
    log->info("resuming job {} after generation {} ({} restarts used), from {}",
              options->job_id, (*previous)->generation,
              (*previous)->restarts_used, options->state_file);
  } else if (*previous) {
    log->warn("{} belongs to another job ({}); starting a new job",
              options->state_file, (*previous)->job_id);
  }
}

}  // namespace trl

// The little a restarted coordinator needs to pick its job up again: the
// job id, the last generation that may have run, the restarts used, the
// rest of a restart backoff, the failure history, where each machine ran,
// and what identifies the job (command and config), kept in a small text file
// written atomically (temp file, fsync, rename) before each generation starts
// and whenever a failure or a restart is counted.
#ifndef TRL_COORDINATOR_RECORD_STATE_FILE_H_
#define TRL_COORDINATOR_RECORD_STATE_FILE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/job/state_machine.h"

namespace trl {

struct JobRecord {
  std::string job_id;
  // This run of the job: random when a coordinator starts it afresh, kept
  // by one that resumes it. Agents' reports name it: a job id may be used
  // again (TRL_JOB_ID), a run id is not.
  std::string run_id;
  int64_t generation = -1;
  int restarts_used = 0;
  // A digest of the command and the config fingerprint: a coordinator
  // started for another job does not resume this one.
  std::string identity;
  // Wall-clock time (Unix ms) before which the next generation may not
  // start: the rest of a restart backoff; 0 for none. (The steady clock
  // does not outlive the process; a clock step moves this by its size,
  // within the backoff's cap.)
  int64_t not_before_unix_ms = 0;
  // The failures so far, oldest first, without their last lines; at most
  // kFailuresKept (the newest).
  std::vector<FailureRecord> failures;
  // Where each machine's agent ran at the last generation's start: after a
  // restart, an agent on another host waits for the old one's lease.
  std::map<int, HostIdentity> hosts;
  // How long after its last word each of those agents' workers may run on
  // (its lease and fence): a restarted coordinator waits that long, not
  // the newcomer's lease, before another host takes the machine (I1).
  std::map<int, std::chrono::milliseconds> run_on;
  // Hosts cordoned after too many failures: they stay so across a
  // coordinator restart, until `trl-coord uncordon`.
  std::map<std::string, Cordon> cordoned;

  static constexpr size_t kFailuresKept = 100;
};

absl::Status SaveJobRecord(const std::string& path, const JobRecord& record);
// Nothing when the file does not exist; an error when it cannot be read or
// parsed.
absl::StatusOr<std::optional<JobRecord>> LoadJobRecord(const std::string& path);
void RemoveJobRecord(const std::string& path);

// The default place for the coordinator on host:port: in this user's
// private directory (common/private_files.h), never in a shared /tmp.
absl::StatusOr<std::string> DefaultJobStatePath(const std::string& host,
                                                int port);

}  // namespace trl

#endif  // TRL_COORDINATOR_RECORD_STATE_FILE_H_

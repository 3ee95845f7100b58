// The little a restarted coordinator needs to pick its job up again: the
// job id, the last generation, the restarts used, and what identifies the
// job (command and config), kept in a small text file written atomically
// (temp file, fsync, rename) each time a generation starts.
#ifndef TRL_COORDINATOR_JOB_STATE_FILE_H_
#define TRL_COORDINATOR_JOB_STATE_FILE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trl {

struct JobRecord {
  std::string job_id;
  int64_t generation = -1;
  int restarts_used = 0;
  // A digest of the command and the config fingerprint: a coordinator
  // started for another job does not resume this one.
  std::string identity;
};

absl::Status SaveJobRecord(const std::string& path, const JobRecord& record);
// Nothing when the file does not exist; an error when it cannot be read or
// parsed.
absl::StatusOr<std::optional<JobRecord>> LoadJobRecord(const std::string& path);
void RemoveJobRecord(const std::string& path);

// The default place for the coordinator on host:port.
std::string DefaultJobStatePath(const std::string& host, int port);

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_STATE_FILE_H_

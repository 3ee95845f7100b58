// CoordinatorOptions from `trl-coord start`'s flags: the job's policy
// (restarts, timeouts, grace, elasticity, cordons, spares), a new job id,
// what makes a job the same job, and whether the state file of a
// coordinator that ran before on this address holds this job to resume.
#ifndef TRL_COORDINATOR_OWNER_JOB_OPTIONS_H_
#define TRL_COORDINATOR_OWNER_JOB_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/accelerate_config.h"
#include "common/launch_options.h"
#include "coordinator/owner/core.h"

namespace trl {

// The policy the flags set. InvalidArgument for a bad
// --no_restart_exit_codes.
absl::StatusOr<JobPolicy> JobPolicyFromFlags(const LaunchOptions& flags);

// TRL_JOB_ID if set (InvalidArgument if it is no job id: it names
// directories), else "trl-" and 8 random hex digits.
absl::StatusOr<std::string> NewJobId();

// A run id (JobRecord::run_id): 16 random hex digits.
std::string NewRunId();

// What makes a job the same job: its command and the settings every machine
// agrees on (a SHA-256 prefix, the same for every build).
std::string JobIdentity(const std::vector<std::string>& argv,
                        const AccelerateConfig& config);

// Sets options->state_file (`state_file`, else the default for
// `host`:`port`, else none, with a warning), and, if that file holds the
// job of options->identity, options->resume and its job id. A file of
// another job, or one that cannot be read, starts a new job (a warning).
void ChooseStateFile(const std::string& state_file, const std::string& host,
                     int port, CoordinatorOptions* options);

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_JOB_OPTIONS_H_

// The job as `trl-coord ps` shows it: a JobStatus message built from the
// state machine, and its rendering as a table or as JSON.
#ifndef TRL_COORDINATOR_JOB_STATUS_H_
#define TRL_COORDINATOR_JOB_STATUS_H_

#include <string>

#include "coordinator/job_state_machine.h"
#include "proto/trl_launch.pb.h"

namespace trl {

trl::launch::v1::JobStatus DescribeJob(const JobStateMachine& machine,
                                       TimePoint now);

// A human-readable view: the job, one line per node, one line per rank and
// the failures, root cause first. A job of more than kWholeTableMachines
// machines or kWholeTableRanks ranks is summarised instead (counts by
// state, the machines and ranks that are lost, failed or stopped, the last
// failures), unless `every_row`.
inline constexpr int kWholeTableMachines = 16;
inline constexpr int kWholeTableRanks = 64;
std::string FormatJobTable(const trl::launch::v1::JobStatus& status,
                           bool every_row = false);

// The same as JSON (protobuf's JSON mapping, field names as in the proto).
std::string FormatJobJson(const trl::launch::v1::JobStatus& status);

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_STATUS_H_

// `trl-coord ps`'s output: a JobStatus as a table, a summary or JSON.
#ifndef TRL_COORDINATOR_STATUS_TABLE_H_
#define TRL_COORDINATOR_STATUS_TABLE_H_

#include <string>

#include "proto/trl_launch.pb.h"

namespace trl {

// A human-readable view: the job, one line per node, one line per rank and
// the failures, root cause first. A status that carries a summary (what
// the coordinator sends for JobStatusRequest.summary), or one of more than
// kWholeTableMachines machines or kWholeTableRanks ranks (summarised here,
// by the same code: status/view.h), is printed as a summary (counts by
// state, the machines and ranks that are lost, failed or stopped, the last
// failures), unless `every_row` and the status is whole.
inline constexpr int kWholeTableMachines = 16;
inline constexpr int kWholeTableRanks = 64;
std::string FormatJobTable(const trl::launch::v1::JobStatus& status,
                           bool every_row = false);

// Whether a job of this many machines and ranks is printed whole.
inline bool PrintedWhole(int machines, int ranks) {
  return machines <= kWholeTableMachines && ranks <= kWholeTableRanks;
}

// The same as JSON (protobuf's JSON mapping, field names as in the proto).
std::string FormatJobJson(const trl::launch::v1::JobStatus& status);

}  // namespace trl

#endif  // TRL_COORDINATOR_STATUS_TABLE_H_

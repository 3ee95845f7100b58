// The job as `trl-coord ps` and the status page ask for it: a JobStatus
// message built from the state machine, whole or in the views of a
// JobStatusRequest (status_view.h). Rendering: job_table.h.
#ifndef TRL_COORDINATOR_JOB_STATUS_H_
#define TRL_COORDINATOR_JOB_STATUS_H_

#include <functional>
#include <string>
#include <vector>

#include "coordinator/job_state_machine.h"
#include "proto/trl_launch.pb.h"

namespace trl {

// The whole status: every machine, rank, failure and generation.
trl::launch::v1::JobStatus DescribeJob(const JobStateMachine& machine,
                                       TimePoint now);

// How a machine's last heartbeat came ("udp", "stream"), or nullptr.
using HeartbeatVia = std::function<const char*(int machine_rank)>;

// What a request for views (not the whole status) needs, copied from the
// state machine under the coordinator's lock: the job's facts, the summary
// (one pass over the rows, counting) and unfiltered slices are built
// there; for a filtered slice, the rows are copied as they are, to be
// matched by FinishJobStatus off the lock.
struct JobStatusCopy {
  struct NodeRow {
    int machine_rank;
    std::string hostname;
    std::string address;
    const char* state;
    int workers;
    double last_heartbeat_age_s;
    const char* heartbeat_via;
  };
  struct RankRow {
    int rank;
    int local_rank;
    int machine_rank;
    int pid;
    const char* state;
    int exit_code;
    int signal;
  };
  trl::launch::v1::JobStatus status;
  trl::launch::v1::JobStatusRequest request;
  std::vector<NodeRow> nodes;  // a filtered slice's candidates
  std::vector<RankRow> ranks;  // a filtered slice's candidates
};

JobStatusCopy CopyJobStatus(const JobStateMachine& machine, TimePoint now,
                            const trl::launch::v1::JobStatusRequest& request,
                            const HeartbeatVia& via);
trl::launch::v1::JobStatus FinishJobStatus(JobStatusCopy copy);

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_STATUS_H_

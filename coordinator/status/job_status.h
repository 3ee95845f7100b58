// The job as `trl-coord ps` and the status page ask for it: a JobStatus
// message built from the state machine, whole or in the views of a
// JobStatusRequest (status/view.h). Rendering: status/table.h.
#ifndef TRL_COORDINATOR_STATUS_JOB_STATUS_H_
#define TRL_COORDINATOR_STATUS_JOB_STATUS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/job/state_machine.h"
#include "proto/trl_launch.pb.h"

namespace trl {

// The whole status: every machine, rank, failure and generation.
trl::launch::v1::JobStatus DescribeJob(const JobStateMachine& machine,
                                       TimePoint now);

// How a machine's last heartbeat came ("udp", "stream"), or nullptr.
using HeartbeatVia = std::function<const char*(int machine_rank)>;

// What a request needs, copied from the state machine by the coordinator's
// owner thread (CopyJobStatus), and the answer made of it on the asking
// thread (FinishJobStatus). On the owner: the job's facts,
// the summary (one pass over the rows, counting, that fills only the rows
// it shows), the rows of an unfiltered slice; for the whole status or a
// filtered slice, every row's few fields are copied as they are, and the
// message is built (a filter matched) off the owner.
struct JobStatusCopy {
  struct NodeRow {
    int machine_rank;
    std::string hostname;
    std::string address;
    const char* state;
    int workers;
    double last_heartbeat_age_s;
    const char* heartbeat_via;
    double last_output_age_s;
  };
  struct RankRow {
    int rank;
    int local_rank;
    int machine_rank;
    int pid;
    const char* state;
    int exit_code;
    int signal;
    std::string hostname;
    std::shared_ptr<const std::string> last_line;  // null: none
    double last_line_age_s;
  };
  trl::launch::v1::JobStatus status;
  trl::launch::v1::JobStatusRequest request;
  // Every row, for the whole status or a filtered slice.
  std::vector<NodeRow> nodes;
  std::vector<RankRow> ranks;
};

JobStatusCopy CopyJobStatus(const JobStateMachine& machine, TimePoint now,
                            const trl::launch::v1::JobStatusRequest& request,
                            const HeartbeatVia& via);
trl::launch::v1::JobStatus FinishJobStatus(JobStatusCopy copy);

}  // namespace trl

#endif  // TRL_COORDINATOR_STATUS_JOB_STATUS_H_

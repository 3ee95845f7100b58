// What the core says to agents, message by message: a registration's
// reply, a stop order, a heartbeat's ack, a new role (a spare that takes a
// machine's place, a machine's agent made a spare) and the job's end. (A
// generation's assignment has a file of its own: generation_assignment.h.)
//
// Pure: each function only makes a message; the core sends it.
#ifndef TRL_COORDINATOR_OWNER_AGENT_MESSAGES_H_
#define TRL_COORDINATOR_OWNER_AGENT_MESSAGES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/stop_signals.h"
#include "coordinator/job/records.h"
#include "coordinator/owner/coordinator_options.h"
#include "proto/trl_launch.pb.h"

namespace trl {

// The reply to a registration that `status` refused.
trl::launch::v1::CoordinatorMessage RefusedRegistration(
    const std::string& job_id, const absl::Status& status);
// The reply to a registration admitted under `key` (its machine rank, or a
// spare's key, < 0), with the command its workers run. The heartbeats'
// session is added by HeartbeatSessions::Open.
trl::launch::v1::CoordinatorMessage AcceptedRegistration(
    const CoordinatorOptions& options, int key);
// Stop generation `generation`'s workers (`reason`); with `signal`, the
// signal they get first; with `capture_stacks`, after keeping where each
// stood (a stop for a failure).
trl::launch::v1::CoordinatorMessage StopOrder(
    int64_t generation, const std::string& reason,
    const std::optional<StopSignal>& signal = std::nullopt,
    bool capture_stacks = false);
trl::launch::v1::CoordinatorMessage HeartbeatAck();
// The stream stands for another machine or spare now.
trl::launch::v1::CoordinatorMessage RoleChange(const Handover& handover);
// How the job ended.
trl::launch::v1::CoordinatorMessage JobEnded(const JobOutcome& outcome);

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_AGENT_MESSAGES_H_

#include "coordinator/owner/agent_messages.h"

#include <algorithm>

namespace trl {

namespace pb = trl::launch::v1;

pb::CoordinatorMessage RefusedRegistration(const std::string& job_id,
                                           const absl::Status& status) {
  pb::CoordinatorMessage reply;
  reply.mutable_registration_reply()->set_accepted(false);
  reply.mutable_registration_reply()->set_job_id(job_id);
  reply.mutable_registration_reply()->set_reason(std::string(status.message()));
  return reply;
}

pb::CoordinatorMessage AcceptedRegistration(const CoordinatorOptions& options,
                                            int key) {
  pb::CoordinatorMessage reply;
  const bool spare = key < 0;
  reply.mutable_registration_reply()->set_accepted(true);
  reply.mutable_registration_reply()->set_job_id(options.job_id);
  reply.mutable_registration_reply()->set_spare(spare);
  reply.mutable_registration_reply()->set_machine_rank(spare ? -1 : key);
  for (const auto& arg : options.worker_argv) {
    reply.mutable_registration_reply()->add_argv(arg);
  }
  reply.mutable_registration_reply()->set_argv_runs_python(
      options.worker_argv_runs_python);
  return reply;
}

pb::CoordinatorMessage StopOrder(int64_t generation, const std::string& reason,
                                 const std::optional<StopSignal>& signal,
                                 bool capture_stacks) {
  pb::CoordinatorMessage stop;
  stop.mutable_stop()->set_generation(generation);
  stop.mutable_stop()->set_reason(reason);
  stop.mutable_stop()->set_capture_stacks(capture_stacks);
  if (signal) {
    stop.mutable_stop()->set_signal(signal->number);
    stop.mutable_stop()->set_workers_have_signal(signal->workers_have_it);
  }
  return stop;
}

pb::CoordinatorMessage HeartbeatAck() {
  pb::CoordinatorMessage ack;
  ack.mutable_heartbeat_ack();
  return ack;
}

pb::CoordinatorMessage RoleChange(const Handover& handover) {
  pb::CoordinatorMessage role;
  role.mutable_role_change()->set_spare(handover.to < 0);
  role.mutable_role_change()->set_machine_rank(std::max(-1, handover.to));
  role.mutable_role_change()->set_reason(handover.reason);
  return role;
}

pb::CoordinatorMessage JobEnded(const JobOutcome& outcome) {
  pb::CoordinatorMessage finished;
  finished.mutable_finished()->set_state(JobPhaseName(outcome.phase));
  finished.mutable_finished()->set_exit_code(outcome.exit_code);
  finished.mutable_finished()->set_summary(outcome.summary);
  return finished;
}

}  // namespace trl

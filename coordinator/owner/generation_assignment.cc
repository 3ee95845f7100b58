#include "coordinator/owner/generation_assignment.h"

#include <chrono>
#include <string>

#include "common/worker_environment.h"

namespace trl {

namespace pb = trl::launch::v1;

GenerationAssignment::GenerationAssignment(const CoordinatorOptions& options,
                                           const GenerationStart& start,
                                           const RendezvousData& rendezvous,
                                           bool elastic) {
  JobEnvironmentInputs inputs;
  inputs.job_id = options.job_id;
  inputs.generation = start.generation;
  inputs.world_size = start.world_size;
  inputs.num_machines = start.num_machines;
  inputs.max_restarts = options.policy.restart.max_restarts;
  inputs.master_addr = start.master_addr;
  inputs.master_port = rendezvous.master_port;
  inputs.nccl_unique_id_hex = rendezvous.nccl_unique_id_hex;
  inputs.coordinator_address = options.coordinator_address;
  if (options.open_store_generation) {
    inputs.store_token =
        options.open_store_generation(options.job_id, start.generation);
  }
  const Environment job_env = BuildJobEnvironment(options.config, inputs);
  pb::Assignment* assignment = message_.mutable_assignment();
  assignment->set_job_id(options.job_id);
  assignment->set_run_id(options.run_id);
  assignment->set_generation(start.generation);
  assignment->set_stop_grace_s(
      std::chrono::duration<double>(options.policy.stop_grace).count());
  for (const auto& arg : options.worker_argv) assignment->add_argv(arg);
  assignment->set_argv_runs_python(options.worker_argv_runs_python);
  assignment->set_log_dir(options.log_dir);
  assignment->mutable_job_environment()->insert(job_env.begin(), job_env.end());
  with_group_rank_ = elastic && job_env.count("WORLD_SIZE") > 0;
}

const pb::CoordinatorMessage& GenerationAssignment::For(
    const NodeAssignment& node) {
  pb::Assignment* assignment = message_.mutable_assignment();
  assignment->set_machine_rank(node.machine_rank);
  assignment->set_rank_offset(node.rank_offset);
  assignment->set_local_world_size(node.local_world_size);
  if (with_group_rank_) {
    // Its place among this generation's machines, which the agent puts in
    // GROUP_RANK (BuildWorkerEnvironment).
    (*assignment->mutable_job_environment())["GROUP_RANK"] =
        std::to_string(node.group_rank);
  }
  return message_;
}

}  // namespace trl

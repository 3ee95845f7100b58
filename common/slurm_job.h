// What a Slurm allocation says about a trl-launch job, read from the
// variables srun gives each task: this node's machine_rank
// (SLURM_NODEID), the number of machines (SLURM_JOB_NUM_NODES), machine
// 0's host (the first of SLURM_JOB_NODELIST, expanded as `scontrol show
// hostnames` does) and the processes per node (the GPUs Slurm gave this
// node). Pure functions of the environment.
#ifndef TRL_COMMON_SLURM_JOB_H_
#define TRL_COMMON_SLURM_JOB_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/accelerate_config.h"

namespace trl {

struct SlurmJob {
  int machine_rank = 0;
  int num_machines = 1;
  std::vector<std::string> hosts;  // SLURM_JOB_NODELIST, expanded
  std::string main_process_ip;     // hosts[0]
  // GPUs Slurm gave this node (SLURM_GPUS_ON_NODE, SLURM_GPUS_PER_NODE or
  // SLURM_JOB_GPUS); 0 when it gave none (a CPU job).
  int gpus_per_node = 0;
};

// "node[01-03,07],gpu5,rack[1-2]-n[1-2]" -> node01 node02 node03 node07
// gpu5 rack1-n1 rack1-n2 rack2-n1 rack2-n2. Zero padding is kept from the
// range's start. Errors name the malformed part.
absl::StatusOr<std::vector<std::string>> ExpandSlurmHostList(
    const std::string& list);

// Errors name the missing or malformed variable.
absl::StatusOr<SlurmJob> ReadSlurmJob(
    const std::map<std::string, std::string>& environment);

// Slurm's values win over the config file and flags; each value that
// changes something is described in `notes`.
void ApplySlurmJob(const SlurmJob& job, AccelerateConfig* config,
                   std::vector<std::string>* notes);

}  // namespace trl

#endif  // TRL_COMMON_SLURM_JOB_H_

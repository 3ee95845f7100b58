// The environment a worker sees: torchrun's variables, Accelerate's variables
// for the config's distributed_type (same names and value spellings as
// `accelerate launch`), and trl-launch's own TRL_* variables. Pure functions:
// the coordinator builds the part shared by every rank of a generation, each
// agent adds what is particular to its machine and rank.
#ifndef TRL_COMMON_WORKER_ENVIRONMENT_H_
#define TRL_COMMON_WORKER_ENVIRONMENT_H_

#include <cstdint>
#include <map>
#include <string>

#include "common/accelerate_config.h"

namespace trl {

using Environment = std::map<std::string, std::string>;

struct JobEnvironmentInputs {
  std::string job_id;
  int64_t generation = 0;
  int world_size = 0;
  // The generation's machines (GROUP_WORLD_SIZE); 0: the config's
  // num_machines. Fewer in an elastic generation without some.
  int num_machines = 0;
  int max_restarts = 0;
  std::string master_addr;
  int master_port = 0;
  // Hex of this generation's ncclUniqueId; empty when built without NCCL.
  std::string nccl_unique_id_hex;
  // host:port of the coordinator, which serves the workers' store.
  std::string coordinator_address;
  // This generation's credential for the store (TRL_STORE_TOKEN); it opens
  // nothing but this generation's store namespace. Empty: no store.
  std::string store_token;
};

// Variables that are identical for every rank of one generation.
Environment BuildJobEnvironment(const AccelerateConfig& config,
                                const JobEnvironmentInputs& inputs);

struct RankEnvironmentInputs {
  int machine_rank = 0;
  int rank_offset = 0;
  int local_world_size = 1;
  int local_rank = 0;
  // This machine's own gpu_ids setting ("all" or "0,1").
  std::string gpu_ids = "all";
  // The interface that carries this machine's advertised address.
  std::string interface_name;
  std::string error_file;
  std::string heartbeat_file;
  // Where PyTorch's NCCL flight recorder writes its dump and makes the pipe
  // that asks for one (agent/workers/flight_recorder.h): STEM<rank> and
  // STEM<rank>.pipe. Empty: left to the user.
  std::string flight_recorder_stem;
  std::string working_directory;
  // Physical cores of this machine, for CPU jobs' OMP_NUM_THREADS; 0: read
  // them from this machine (LocalPhysicalCoreCount).
  int physical_cores = 0;
};

// Physical cores (not hyperthreads) of this machine, counted as psutil's
// cpu_count(logical=False) counts them on Linux: distinct sibling sets in
// /sys/devices/system/cpu/cpu*/topology; at least 1.
int LocalPhysicalCoreCount();

// The job environment's marker that every rank's OMP_NUM_THREADS is its
// share of its machine's physical cores (Accelerate's default for CPU
// jobs); BuildWorkerEnvironment consumes it, workers never see it.
inline constexpr char kOmpShareOfPhysicalCores[] =
    "TRL_OMP_SHARE_OF_PHYSICAL_CORES";

// The complete environment of one worker: the agent's own environment
// (`inherited`), overlaid with the job's variables and then the rank's.
// Variables the user may tune (OMP_NUM_THREADS,
// TORCH_NCCL_ASYNC_ERROR_HANDLING, NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME) are
// set only when `inherited` lacks them (OMP_NUM_THREADS from the job, i.e.
// --num_cpu_threads_per_process, wins over the inherited one, as in
// Accelerate). So are PyTorch's NCCL flight recorder's (a trace buffer of
// 2000 collectives; a dump on a watchdog timeout with the pipe that asks
// for one; the dump file; under `flight_recorder_stem`), each setting
// under both the names PyTorch 2.6+ reads and the older ones, and none of
// a group one of whose variables the user set. A job environment without
// WORLD_SIZE is a plain process (Accelerate's DistributedType.NO): no torchrun
// rank variables. TRL_AUTH_TOKEN, the cluster's token, is never passed on.
Environment BuildWorkerEnvironment(const Environment& inherited,
                                   const Environment& job_environment,
                                   const RankEnvironmentInputs& inputs);

}  // namespace trl

#endif  // TRL_COMMON_WORKER_ENVIRONMENT_H_

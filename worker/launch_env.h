// What a worker learns from its launcher, read from the environment into
// one value: its place in the job (torchrun's variables) and trl-launch's
// own (TRL_*). Errors name the variable that is missing or malformed.
#ifndef TRL_WORKER_LAUNCH_ENV_H_
#define TRL_WORKER_LAUNCH_ENV_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace trl::worker {

struct LaunchEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int machine_rank = 0;  // GROUP_RANK
  int num_machines = 1;  // GROUP_WORLD_SIZE
  std::string master_addr;
  int master_port = 0;
  int64_t generation = 0;  // TRL_GENERATION, else TORCHELASTIC_RESTART_COUNT
  std::string job_id;      // TRL_JOB_ID
  std::string coordinator_address;  // TRL_COORDINATOR_ADDR, host:port
  std::string store_token;          // TRL_STORE_TOKEN
  std::string heartbeat_file;       // TRL_HEARTBEAT_FILE
  std::string nccl_unique_id_hex;   // TRL_NCCL_UNIQUE_ID (GPU jobs)
  std::string socket_ifname;        // GLOO_SOCKET_IFNAME
  // TLS files for the store, when the coordinator serves TLS.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // The name the store's certificate carries (TRL_TLS_SERVER_NAME), when
  // it is not the address dialled (the token's derived identity).
  std::string tls_server_name;

  bool has_store() const {
    return !coordinator_address.empty() && !store_token.empty();
  }
};

using EnvironmentMap = std::map<std::string, std::string>;

// Reads `env` (pure). RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT are required; the rest are optional.
absl::StatusOr<LaunchEnv> ParseLaunchEnv(const EnvironmentMap& env);

// This process's environment.
EnvironmentMap ProcessEnvironment();
absl::StatusOr<LaunchEnv> ReadLaunchEnv();

}  // namespace trl::worker

#endif  // TRL_WORKER_LAUNCH_ENV_H_

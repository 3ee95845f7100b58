// An Accelerate launch configuration (the `accelerate config` YAML), read
// strictly: unknown keys, wrong types and impossible values are errors that
// name the key, the value, the line and what is allowed.
#ifndef TRL_COMMON_ACCELERATE_CONFIG_H_
#define TRL_COMMON_ACCELERATE_CONFIG_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace trl {

// An ordered list of key/value pairs of a nested section such as
// `deepspeed_config`; order is kept because Accelerate reports the keys of
// `deepspeed_config` in file order (ACCELERATE_CONFIG_DS_FIELDS).
using ConfigSection = std::vector<std::pair<std::string, std::string>>;

struct AccelerateConfig {
  std::string compute_environment = "LOCAL_MACHINE";
  std::string distributed_type = "NO";
  std::string mixed_precision = "no";
  bool use_cpu = false;
  // The --cpu flag itself: Accelerate then runs its plain CPU launcher
  // whatever distributed_type says (use_cpu from the file does not).
  bool cpu_flag = false;
  bool debug = false;
  // Total over all machines; -1 means "not set" (the built-in default picks
  // one process per local GPU, or one CPU process).
  int num_processes = -1;
  // With an elastic range (--num_machines MIN:MAX), num_machines is MAX:
  // the file's num_machines stays a plain integer.
  int num_machines = 1;
  // MIN of --num_machines MIN:MAX (or TRL_NUM_MACHINES); 0: not given, the
  // same as num_machines (a fixed-size job). A flag only.
  int min_machines = 0;
  int machine_rank = 0;
  std::string gpu_ids = "all";
  std::string main_process_ip;  // empty: not set
  int main_process_port = 29500;
  std::string rdzv_backend = "static";
  bool same_network = true;
  std::string main_training_function = "main";
  bool enable_cpu_affinity = false;
  std::string downcast_bf16 = "no";
  // --num_cpu_threads_per_process (a flag only); 0: not given.
  int num_cpu_threads_per_process = 0;
  // torchrun's --role (ROLE_NAME); a flag only.
  std::string role = "default";
  ConfigSection deepspeed_config;
  ConfigSection fsdp_config;
  ConfigSection dynamo_config;
  // Where the values came from, for messages: a path or "built-in default".
  std::string source = "built-in default";
  // True when mixed_precision came from the file, not from a flag; Accelerate
  // then lists it in ACCELERATE_CONFIG_DS_FIELDS.
  bool mixed_precision_from_file = false;

  int ProcessesPerMachine() const { return num_processes / num_machines; }
  int MinMachines() const {
    return min_machines > 0 ? min_machines : num_machines;
  }
  // A range with MIN < MAX: the job runs on as few as MIN machines.
  bool Elastic() const { return MinMachines() < num_machines; }
  bool UsesGpus() const;
  // The value of `key` in `section`, or `fallback` when absent.
  static std::string Lookup(const ConfigSection& section,
                            const std::string& key,
                            const std::string& fallback = "");
};

// Parses YAML text. `source` names the file in error messages.
absl::StatusOr<AccelerateConfig> ParseAccelerateConfig(
    const std::string& yaml_text, const std::string& source);

// Reads and parses a file; a missing or unreadable file is an error naming it.
absl::StatusOr<AccelerateConfig> LoadAccelerateConfigFile(
    const std::string& path);

// Checks the relations between values once flags have been applied:
// machine_rank < num_machines, num_processes divisible by num_machines, a
// port in 1..65535, a main_process_ip that is an address or a host name when
// several machines are used, and the enumerations.
absl::Status ValidateAccelerateConfig(const AccelerateConfig& config);

// The settings every machine's config must agree on, as key -> value; the
// coordinator refuses an agent whose fingerprint differs and says which.
std::map<std::string, std::string> AgreementFingerprint(
    const AccelerateConfig& config);

// The distributed types trl-launch can launch.
const std::vector<std::string>& SupportedDistributedTypes();
const std::vector<std::string>& MixedPrecisionValues();

}  // namespace trl

#endif  // TRL_COMMON_ACCELERATE_CONFIG_H_

// Facts about the machine a daemon runs on, read once at start-up.
#ifndef TRL_COMMON_LOCAL_MACHINE_H_
#define TRL_COMMON_LOCAL_MACHINE_H_

#include "common/launch_options.h"
#include "common/worker_environment.h"

namespace trl {

// Counts NVIDIA GPUs by their device nodes (/dev/nvidia0, /dev/nvidia1, ...),
// so that no CUDA library is needed to decide how many workers to start.
int CountLocalGpus();

// GPU count and Accelerate's cache home ($HF_HOME, else
// $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface).
LocalMachine ReadLocalMachine();

// The warning `accelerate launch` gives when a config asks for GPUs on a
// machine without them, or "" when there is nothing to say.
std::string MissingGpuWarning(const AccelerateConfig& config,
                              const LocalMachine& machine);

// This process's environment as a map.
Environment CurrentEnvironment();

}  // namespace trl

#endif  // TRL_COMMON_LOCAL_MACHINE_H_

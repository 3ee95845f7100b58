// The argv a worker runs, built like `accelerate launch` builds it: a `.py`
// script runs as `python -u script`, `-m` runs a module, `--no_python` (or a
// command that is not a .py file) runs the command itself. Nothing ever goes
// through a shell.
#ifndef TRL_COMMON_WORKER_COMMAND_H_
#define TRL_COMMON_WORKER_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trl {

absl::StatusOr<std::vector<std::string>> BuildWorkerArgv(
    const std::vector<std::string>& command, bool module, bool no_python,
    const std::string& python);

// Finds `program` like execvp would: a name containing '/' is used as it is
// (it must be an executable file); otherwise each entry of `search_path`
// (colon-separated) is tried.
absl::StatusOr<std::string> ResolveExecutable(const std::string& program,
                                              const std::string& search_path);

}  // namespace trl

#endif  // TRL_COMMON_WORKER_COMMAND_H_

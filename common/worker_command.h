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

// The argv this machine's workers run: the coordinator's `argv`, with
// `own_python` (an agent's --python or TRL_PYTHON, "" if not given) in
// place of the interpreter when argv[0] is one (`runs_python`).
std::vector<std::string> WithOwnPython(std::vector<std::string> argv,
                                       bool runs_python,
                                       const std::string& own_python);

// Whether `argv` can start here: argv[0] resolves on `search_path`, and a
// Python script (argv = python -u SCRIPT ...; not -m) is a file, relative
// to `working_dir` unless absolute. The error names what is missing and
// where it was looked for.
absl::Status CheckCommandRunsHere(const std::vector<std::string>& argv,
                                  bool runs_python,
                                  const std::string& search_path,
                                  const std::string& working_dir);

// Finds `program` like execvp would: a name containing '/' is used as it is
// (it must be an executable file); otherwise each entry of `search_path`
// (colon-separated) is tried.
absl::StatusOr<std::string> ResolveExecutable(const std::string& program,
                                              const std::string& search_path);

}  // namespace trl

#endif  // TRL_COMMON_WORKER_COMMAND_H_

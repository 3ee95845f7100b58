#include "common/worker_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/utf8.h"

namespace trl {

absl::StatusOr<std::vector<std::string>> BuildWorkerArgv(
    const std::vector<std::string>& command, bool module, bool no_python,
    const std::string& python) {
  if (command.empty() || command.front().empty()) {
    return absl::InvalidArgumentError(
        "no training script given: pass the script (and its arguments) "
        "after the launcher's flags, e.g. `train.py --lr 1e-4`");
  }
  if (module && no_python) {
    return absl::InvalidArgumentError(
        "--module and --no_python cannot be used together");
  }
  // The command travels to every agent in a proto3 string, which must be
  // UTF-8 (the agent could not read its registration reply).
  for (size_t i = 0; i < command.size(); ++i) {
    if (ToValidUtf8(command[i]) != command[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "argument ", i + 1, " of the command ('", ToValidUtf8(command[i]),
          "') is not UTF-8: trl-launch sends the command to every agent as "
          "text; pass it in UTF-8 (or through a file or the environment)"));
    }
  }
  std::vector<std::string> argv;
  if (module) {
    argv = {python, "-u", "-m"};
  } else if (!no_python && absl::EndsWith(command.front(), ".py")) {
    argv = {python, "-u"};
  }
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

namespace {

// A regular file with an execute bit (access(X_OK) says yes to root for
// files without one being executable by nobody).
bool IsExecutableFile(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         (info.st_mode & 0111) != 0 && access(path.c_str(), X_OK) == 0;
}

}  // namespace

absl::StatusOr<std::string> ResolveExecutable(const std::string& program,
                                              const std::string& search_path) {
  if (program.find('/') != std::string::npos) {
    if (IsExecutableFile(program)) return program;
    return absl::NotFoundError(
        absl::StrCat("'", program, "' is not an executable file"));
  }
  for (absl::string_view dir : absl::StrSplit(search_path, ':')) {
    const std::string candidate =
        absl::StrCat(dir.empty() ? "." : dir, "/", program);
    if (IsExecutableFile(candidate)) return candidate;
  }
  return absl::NotFoundError(absl::StrCat(
      "'", program, "' was not found on PATH (", search_path, ")"));
}

std::vector<std::string> WithOwnPython(std::vector<std::string> argv,
                                       bool runs_python,
                                       const std::string& own_python) {
  if (runs_python && !own_python.empty() && !argv.empty()) {
    argv[0] = own_python;
  }
  return argv;
}

absl::Status CheckCommandRunsHere(const std::vector<std::string>& argv,
                                  bool runs_python,
                                  const std::string& search_path,
                                  const std::string& working_dir) {
  if (argv.empty()) return absl::InvalidArgumentError("no command");
  if (auto found = ResolveExecutable(argv[0], search_path); !found.ok()) {
    return found.status();
  }
  // python -u SCRIPT ... (BuildWorkerArgv); -m runs a module, which only
  // the interpreter can find.
  if (!runs_python || argv.size() < 3 || argv[1] != "-u" || argv[2] == "-m") {
    return absl::OkStatus();
  }
  const std::string& script = argv[2];
  const std::string path =
      script.front() == '/' ? script : absl::StrCat(working_dir, "/", script);
  struct stat info;
  if (stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::NotFoundError(
        script.front() == '/'
            ? absl::StrCat("the script ", script, " is not a file here")
            : absl::StrCat("the script ", script,
                           " is not a file in the agent's working directory ",
                           working_dir));
  }
  return absl::OkStatus();
}

}  // namespace trl

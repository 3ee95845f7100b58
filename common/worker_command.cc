#include "common/worker_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

}  // namespace trl

// Whether a process still runs, read from /proc as the tests see it.
#ifndef TRL_TESTS_INTEGRATION_PROCESS_STATE_H_
#define TRL_TESTS_INTEGRATION_PROCESS_STATE_H_

#include <sys/types.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/kernel_files.h"

namespace trl::testing {

// Whether `pid` runs (a zombie does not count: it is dead, not yet reaped).
inline bool ProcessRuns(pid_t pid) {
  const std::string text =
      ReadKernelFile("/proc/" + std::to_string(pid) + "/stat");
  if (text.empty()) return false;
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() &&
         text[paren + 2] != 'Z' && text[paren + 2] != 'X';
}

// The children of `parent` whose command name is `name` (/proc/PID/comm).
inline std::vector<pid_t> ChildrenNamed(pid_t parent, const std::string& name) {
  std::vector<pid_t> found;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc", error)) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = ReadKernelFile("/proc/" + pid + "/stat");
    const size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos ||
        close + 2 >= stat.size()) {
      continue;
    }
    const std::string comm = stat.substr(open + 1, close - open - 1);
    // After ") S ": the parent's pid.
    const pid_t ppid = static_cast<pid_t>(std::atol(stat.c_str() + close + 4));
    if (comm == name && ppid == parent) found.push_back(std::stoi(pid));
  }
  return found;
}

}  // namespace trl::testing

#endif  // TRL_TESTS_INTEGRATION_PROCESS_STATE_H_

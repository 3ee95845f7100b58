#include "agent/cleanup/process_facts.h"

#include <filesystem>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/kernel_files.h"

namespace trl {

bool ReadProcessLinks(pid_t pid, ProcessLinks* links) {
  // The whole file: a command name may hold a newline (PR_SET_NAME), and a
  // process that cut its line short would hide from every sweep.
  const std::string text =
      ReadKernelFile("/proc/" + std::to_string(pid) + "/stat");
  if (text.empty()) return false;
  // The fields after the ')' that ends the command name: state, ppid, pgrp.
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 > text.size()) return false;
  std::istringstream rest(text.substr(paren + 2));
  rest >> links->state >> links->parent >> links->group;
  // Fields 6 to 21 (session ... itrealvalue), then 22: starttime.
  std::string skipped;
  for (int field = 6; field <= 21 && rest; ++field) rest >> skipped;
  rest >> links->start_time;
  return static_cast<bool>(rest);
}

bool IsRunning(pid_t pid) {
  ProcessLinks links;
  return ReadProcessLinks(pid, &links) && links.state != 'Z' &&
         links.state != 'X';
}

bool GroupHasRunningMembers(pid_t group) {
  for (pid_t pid : AllProcesses()) {
    ProcessLinks links;
    if (ReadProcessLinks(pid, &links) && links.group == group &&
        links.state != 'Z' && links.state != 'X') {
      return true;
    }
  }
  return false;
}

bool EnvironmentHasBoth(pid_t pid, const std::string& first,
                        const std::string& second) {
  const std::string environ =
      ReadKernelFile("/proc/" + std::to_string(pid) + "/environ", 4 << 20);
  bool has_first = false, has_second = false;
  for (absl::string_view entry : absl::StrSplit(environ, '\0')) {
    has_first = has_first || entry == first;
    has_second = has_second || entry == second;
  }
  return has_first && has_second;
}

std::string CommandNameOf(pid_t pid) {
  const std::string comm =
      ReadKernelFile("/proc/" + std::to_string(pid) + "/comm", 256);
  return comm.substr(0, comm.find('\n'));
}

std::vector<pid_t> AllProcesses() {
  std::vector<pid_t> pids;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc", error)) {
    pid_t pid = 0;
    if (absl::SimpleAtoi(entry.path().filename().string(), &pid)) {
      pids.push_back(pid);
    }
  }
  return pids;
}

}  // namespace trl

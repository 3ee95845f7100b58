#include "agent/procfs/process_facts.h"

#include <signal.h>
#include <unistd.h>

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
  // Fields 6 to 13 (session ... cmajflt), 14 to 17 (utime, stime, cutime,
  // cstime), 18 to 21 (priority ... itrealvalue), then 22: starttime.
  std::string skipped;
  for (int field = 6; field <= 13 && rest; ++field) rest >> skipped;
  links->cpu_ticks = 0;
  for (int field = 14; field <= 17 && rest; ++field) {
    long long ticks = 0;
    rest >> ticks;
    if (ticks > 0) links->cpu_ticks += static_cast<unsigned long long>(ticks);
  }
  // 18 priority, 19 nice, 20 num_threads, 21 itrealvalue.
  rest >> skipped >> skipped >> links->threads >> skipped;
  rest >> links->start_time;
  if (!rest) return false;
  // Fields 23 to 51, then 52: exit_code (Linux 3.5; 0 to another user).
  for (int field = 23; field <= 51 && rest; ++field) rest >> skipped;
  int status = -1;
  links->wait_status = (rest >> status) ? status : -1;
  return true;
}

namespace {

// Whether thread `tid` of `pid` is ending (OtherThreadsAreEnding).
bool ThreadIsEnding(pid_t pid, const std::string& tid) {
  const std::string task = "/proc/" + std::to_string(pid) + "/task/" + tid;
  const std::string stat = ReadKernelFile(task + "/stat");
  const size_t paren = stat.rfind(')');
  if (stat.empty() || paren == std::string::npos) return true;  // gone
  // After the ')': state (3), ppid, pgrp, session, tty_nr, tpgid, then 9:
  // the kernel's flags word.
  std::istringstream rest(stat.substr(paren + 1));
  std::string skipped;
  for (int field = 3; field <= 8 && rest; ++field) rest >> skipped;
  unsigned long long flags = 0;
  constexpr unsigned long long kExiting = 0x4;  // PF_EXITING
  if ((rest >> flags) && (flags & kExiting) != 0) return true;
  const std::string status = ReadKernelFile(task + "/status");
  if (status.empty()) return true;
  const size_t pending = status.find("\nSigPnd:");
  if (pending == std::string::npos) return false;
  std::istringstream mask(status.substr(pending + 8));
  unsigned long long signals = 0;
  constexpr unsigned long long kKill = 1ULL << (SIGKILL - 1);
  return (mask >> std::hex >> signals) && (signals & kKill) != 0;
}

}  // namespace

bool OtherThreadsAreEnding(pid_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(tasks, error)) {
    const std::string tid = entry.path().filename().string();
    if (tid != std::to_string(pid) && !ThreadIsEnding(pid, tid)) return false;
  }
  return true;
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

namespace {

// Every living process's links, by parent.
std::map<pid_t, std::vector<std::pair<pid_t, ProcessLinks>>> ByParent() {
  std::map<pid_t, std::vector<std::pair<pid_t, ProcessLinks>>> children;
  for (pid_t pid : AllProcesses()) {
    ProcessLinks links;
    if (ReadProcessLinks(pid, &links)) {
      children[links.parent].emplace_back(pid, links);
    }
  }
  return children;
}

}  // namespace

std::vector<pid_t> ProcessTree(pid_t root, size_t limit) {
  const auto children = ByParent();
  std::vector<pid_t> tree = {root};
  for (size_t i = 0; i < tree.size() && tree.size() < limit; ++i) {
    auto it = children.find(tree[i]);
    if (it == children.end()) continue;
    for (const auto& [child, links] : it->second) {
      if (tree.size() < limit) tree.push_back(child);
    }
  }
  return tree;
}

std::map<pid_t, double> TreeCpuSeconds(const std::vector<pid_t>& roots) {
  const auto children = ByParent();
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::map<pid_t, double> seconds;
  for (pid_t root : roots) {
    ProcessLinks links;
    if (!ReadProcessLinks(root, &links)) continue;
    unsigned long long ticks = links.cpu_ticks;
    std::vector<pid_t> pending = {root};
    // A bound on the walk: a fork bomb must not stall the watch.
    for (size_t walked = 0; !pending.empty() && walked < 4096; ++walked) {
      const pid_t pid = pending.back();
      pending.pop_back();
      auto it = children.find(pid);
      if (it == children.end()) continue;
      for (const auto& [child, child_links] : it->second) {
        ticks += child_links.cpu_ticks;
        pending.push_back(child);
      }
    }
    seconds[root] = static_cast<double>(ticks) / (tick > 0 ? tick : 100.0);
  }
  return seconds;
}

}  // namespace trl

#include "agent/cleanup/orphans.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "agent/cleanup/job_guardian.h"
#include "agent/procfs/process_facts.h"
#include "common/exempt_children.h"

namespace trl {
namespace {

struct Child {
  pid_t pid;
  pid_t group;
};

std::vector<Child> ChildrenOfThisProcess() {
  const pid_t self = getpid();
  std::vector<Child> children;
  for (pid_t pid : AllProcesses()) {
    ProcessLinks links;
    if (ReadProcessLinks(pid, &links) && links.parent == self) {
      children.push_back({pid, links.group});
    }
  }
  return children;
}

}  // namespace

void BecomeChildSubreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1); }

int KillOrphansOfGeneration(const std::string& job_id, int64_t generation) {
  const std::string job_entry = "TRL_JOB_ID=" + job_id;
  const std::string generation_entry =
      "TRL_GENERATION=" + std::to_string(generation);
  const pid_t own_group = getpgrp();
  int killed = 0;
  // Killing an orphan reparents its own children to us: repeat until none
  // of the generation is left (bounded, in case something keeps forking).
  for (int round = 0; round < 20; ++round) {
    std::vector<pid_t> found;
    for (const Child& child : ChildrenOfThisProcess()) {
      if (child.pid == JobGuardianPid() || IsExemptChild(child.pid)) continue;
      if (child.group != own_group ||
          EnvironmentHasBoth(child.pid, job_entry, generation_entry)) {
        found.push_back(child.pid);
      }
    }
    if (found.empty()) break;
    for (pid_t pid : found) {
      kill(pid, SIGKILL);
      ++killed;
    }
    for (pid_t pid : found) {
      while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }
  return killed;
}

}  // namespace trl

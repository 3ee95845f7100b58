#include "agent/orphans.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"

namespace trl {
namespace {

// Parent pid from /proc/PID/stat (the field after the ')' of the name).
pid_t ParentOf(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream rest(text.substr(paren + 2));
  std::string state;
  pid_t parent = -1;
  rest >> state >> parent;
  return parent;
}

bool BelongsTo(pid_t pid, const std::string& job_entry,
               const std::string& generation_entry) {
  std::ifstream environ("/proc/" + std::to_string(pid) + "/environ",
                        std::ios::binary);
  bool job = false, generation = false;
  std::string entry;
  while (std::getline(environ, entry, '\0')) {
    job = job || entry == job_entry;
    generation = generation || entry == generation_entry;
  }
  return job && generation;
}

std::vector<pid_t> ChildrenOfThisProcess() {
  const pid_t self = getpid();
  std::vector<pid_t> children;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc", error)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    if (ParentOf(pid) == self) children.push_back(pid);
  }
  return children;
}

}  // namespace

void BecomeChildSubreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1); }

int KillOrphansOfGeneration(const std::string& job_id, int64_t generation) {
  const std::string job_entry = "TRL_JOB_ID=" + job_id;
  const std::string generation_entry =
      "TRL_GENERATION=" + std::to_string(generation);
  int killed = 0;
  // Killing an orphan reparents its own children to us: repeat until none
  // of the generation is left (bounded, in case something keeps forking).
  for (int round = 0; round < 20; ++round) {
    std::vector<pid_t> found;
    for (pid_t pid : ChildrenOfThisProcess()) {
      if (BelongsTo(pid, job_entry, generation_entry)) found.push_back(pid);
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

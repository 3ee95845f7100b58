// What /proc says about another process: for the agent's sweeps of what
// workers left behind (agent/cleanup/), and for watching and capturing its
// workers (agent/workers/: hangs, stacks).
#ifndef TRL_AGENT_PROCFS_PROCESS_FACTS_H_
#define TRL_AGENT_PROCFS_PROCESS_FACTS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace trl {

struct ProcessLinks {
  char state = '?';  // R, S, D, T, Z (zombie), ...
  pid_t parent = -1;
  pid_t group = -1;
  // Clock ticks after boot: with the pid, names one process for good (a
  // pid is used again once its process is gone).
  unsigned long long start_time = 0;
  // CPU time it used, and its reaped children did (utime, stime, cutime,
  // cstime), in clock ticks.
  unsigned long long cpu_ticks = 0;
  // A zombie's exit status, as waitpid(2) would give it (field 52,
  // exit_code: readable by its user); -1 when the kernel does not say.
  int wait_status = -1;
  // Threads in its thread group (field 20). A zombie leader with more
  // either ended alone (pthread_exit: its wait_status is not the
  // process's) or ends with the rest (OtherThreadsAreEnding).
  long threads = 0;
};

// State, parent, process group and start time from /proc/PID/stat; false
// if it is gone.
bool ReadProcessLinks(pid_t pid, ProcessLinks* links);

// Whether every thread of process `pid` but its leader is ending: it has
// begun to exit (PF_EXITING), or has a SIGKILL waiting (what the kernel
// gives each thread when the process exits or is killed), or is gone.
// While a process ends this is true as long as its leader is a zombie
// with threads left; after a pthread_exit of the leader, false.
bool OtherThreadsAreEnding(pid_t pid);

// Whether `pid` exists and is not a zombie (dead, not yet reaped).
bool IsRunning(pid_t pid);

// Whether a process of group `group` exists that is not a zombie.
bool GroupHasRunningMembers(pid_t group);

// Whether the initial environment of `pid` holds both entries ("NAME=value"
// each, exactly); false when it cannot be read.
bool EnvironmentHasBoth(pid_t pid, const std::string& first,
                        const std::string& second);

// /proc/PID/comm, or "".
std::string CommandNameOf(pid_t pid);

// Every pid in /proc.
std::vector<pid_t> AllProcesses();

// `root` and its descendants, parents first, at most `limit` of them.
std::vector<pid_t> ProcessTree(pid_t root, size_t limit = 256);

// The CPU seconds each tree of `roots` used (every living process of it,
// and the children they reaped), from one read of /proc; a root that is
// gone is left out.
std::map<pid_t, double> TreeCpuSeconds(const std::vector<pid_t>& roots);

}  // namespace trl

#endif  // TRL_AGENT_PROCFS_PROCESS_FACTS_H_

// A cgroup v2 for one generation's workers on this machine, where the
// machine has a writable cgroup2 hierarchy: everything a worker forks stays
// in it, even a daemon that left its process group and session, and
// cgroup.kill ends all of it at once. Where there is none (no cgroup2, no
// permission, `ip netns exec`'s fresh /sys), workers run without one and
// the process groups and the subreaper (agent/cleanup/orphans.h) do the job.
#ifndef TRL_AGENT_WORKERS_WORKER_CGROUP_H_
#define TRL_AGENT_WORKERS_WORKER_CGROUP_H_

#include <sys/types.h>

#include <memory>
#include <string>

namespace trl {

class WorkerCgroup {
 public:
  // Creates a cgroup named `name` below this process's own; nullptr where
  // that is not possible. Agents name theirs trl-agent-PID-genG.
  static std::unique_ptr<WorkerCgroup> Create(const std::string& name);
  // Kills what is left in it and removes it.
  ~WorkerCgroup();
  WorkerCgroup(const WorkerCgroup&) = delete;
  WorkerCgroup& operator=(const WorkerCgroup&) = delete;

  // The file a new worker writes "0" to, to move itself in.
  const std::string& procs_path() const { return procs_path_; }
  const std::string& path() const { return path_; }

  // Kills every process in the cgroup and waits (bounded) until it is
  // empty; returns whether it is.
  bool KillAll();

 private:
  explicit WorkerCgroup(std::string path);

  const std::string path_;
  const std::string procs_path_;
};

// Ends the worker cgroups left by agents that were killed (named
// trl-agent-PID-... with PID no longer alive): kills what is in them
// (cgroup.kill) and removes them. Returns how many were removed.
int RemoveStaleWorkerCgroups();

// Ends the worker cgroups of agent `owner`, alive or not (its guardian
// calls this at once when it dies, before it is reaped): kills what is in
// them, waits until they are empty (up to 2 s each) and removes them.
struct WorkerCgroupsEnded {
  int removed = 0;
  bool all_empty = true;  // none was left with a process in it
};
WorkerCgroupsEnded EndWorkerCgroupsOf(pid_t owner);

// The mount point of the cgroup2 hierarchy, from /proc/self/mounts; "" if
// there is none.
std::string Cgroup2MountPoint();

}  // namespace trl

#endif  // TRL_AGENT_WORKERS_WORKER_CGROUP_H_

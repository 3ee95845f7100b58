// Descendants of workers that left their process group (setsid, a daemon's
// double fork) are reparented to the agent, which is a child subreaper
// (PR_SET_CHILD_SUBREAPER). Once a generation's workers are gone, whatever
// they left that was reparented to us is killed and reaped: children with
// the generation's launch variables (TRL_JOB_ID and TRL_GENERATION in their
// initial environment), and every child outside this process's own process
// group (a daemon that left its session and cleared its environment). The
// daemon's own children are left alone: its guardian (job_guardian.h) and
// helpers started in its process group (the coordinator's NCCL helper);
// workers have groups of their own, and none runs when this is called.
//
// Where cgroup v2 can be delegated, the worker cgroup
// (agent/workers/worker_cgroup.h) ends all of it as well.
#ifndef TRL_AGENT_CLEANUP_ORPHANS_H_
#define TRL_AGENT_CLEANUP_ORPHANS_H_

#include <cstdint>
#include <string>

namespace trl {

// Makes this process the reaper of its orphaned descendants.
void BecomeChildSubreaper();

// Kills and reaps this process's children that workers left (see above):
// those of `job_id`'s `generation` and those outside its process group.
// Call it only when no worker runs. Returns how many were killed.
int KillOrphansOfGeneration(const std::string& job_id, int64_t generation);

}  // namespace trl

#endif  // TRL_AGENT_CLEANUP_ORPHANS_H_

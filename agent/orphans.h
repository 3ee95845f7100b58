// Descendants of workers that left their process group (setsid, a daemon's
// double fork) are reparented to the agent, which is a child subreaper
// (PR_SET_CHILD_SUBREAPER). Once a generation's workers are gone, whatever
// of that generation was reparented to us is killed and reaped. They are
// recognised by the launch variables they inherited (TRL_JOB_ID and
// TRL_GENERATION in their initial environment), so the agent's other
// children (the coordinator's NCCL helper) are left alone.
//
// Where cgroup v2 can be delegated, a cgroup per worker group would also
// catch descendants that clear their environment; that is not done yet.
#ifndef TRL_AGENT_ORPHANS_H_
#define TRL_AGENT_ORPHANS_H_

#include <cstdint>
#include <string>

namespace trl {

// Makes this process the reaper of its orphaned descendants.
void BecomeChildSubreaper();

// Kills and reaps this process's children that belong to `job_id`'s
// `generation`; returns how many were killed.
int KillOrphansOfGeneration(const std::string& job_id, int64_t generation);

}  // namespace trl

#endif  // TRL_AGENT_ORPHANS_H_

// What a daemon's workers started outlives the daemon when it is killed
// with SIGKILL: the workers die with it (PR_SET_PDEATHSIG), but whatever
// they forked is reparented to init, and without a cgroup (no delegated
// cgroup2; inside `ip netns exec`) nothing finds a daemon that left its
// session and cleared its environment. The guardian is a small process,
// forked from the daemon at its start, that notes the daemon's
// descendants every second and, once the daemon is gone (however it
// ended), kills what is left of them: the worker cgroups of the dead
// daemon, and every noted descendant still alive (checked by start time:
// a pid used again is left alone), with whatever those forked since.
// Processes forked and detached within the last second before a SIGKILL
// can escape it; a cgroup catches those too.
//
// It is also the agent's fence (agent/cleanup/fence_page.h): when the deadline
// the agent publishes passes (the agent frozen, or cut off past its lease), it
// kills every descendant of the agent, without the agent's help.
//
// And it speaks for a dead agent: once the agent is gone and every process it
// killed has ended (a zombie has; up to 3 s), it sends the agent's last word
// (fence_page.h) to the coordinator, which then gives the agent's ranks to a
// spare at once instead of waiting out the lease (a killed agent is told from
// a cut cable). It says nothing if the agent was starting workers after its
// last note of the tree (the tree is noted again within 0.1 s of each
// start), or if a process does not end: the coordinator then waits as for a
// machine it cannot reach.
#ifndef TRL_AGENT_CLEANUP_JOB_GUARDIAN_H_
#define TRL_AGENT_CLEANUP_JOB_GUARDIAN_H_

#include <sys/types.h>

#include <chrono>

namespace trl {

// Forks the guardian of this process. Call it early, before any thread
// starts (a fork copies only the calling thread). Returns whether it runs.
bool StartJobGuardian(
    std::chrono::milliseconds interval = std::chrono::seconds(1));

// The guardian's pid, or 0 when none was started.
pid_t JobGuardianPid();
// Whether the guardian started and has not exited.
bool JobGuardianAlive();

class FencePage;
// The page the guardian reads the agent's fence from; null when no
// guardian runs.
FencePage* GuardianFencePage();

}  // namespace trl

#endif  // TRL_AGENT_CLEANUP_JOB_GUARDIAN_H_

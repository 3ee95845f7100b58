// A new agent for a machine_rank on a host where an earlier agent for the
// same machine_rank and coordinator ran (killed with SIGKILL, frozen with
// SIGSTOP, or cut off and not yet at the end of its lease) ends what that
// agent left before it registers: the workers, recognised by the launch
// variables they inherited (TRL_LAUNCH_COORDINATOR, the coordinator as agents
// dial it, and TRL_MACHINE_RANK), with their process groups, and the trl-agent
// process that started them. The coordinator then hands the machine's ranks to
// the new agent at once, without two generations of a rank alive together
// (invariant 1).
#ifndef TRL_AGENT_CLEANUP_STALE_WORKERS_H_
#define TRL_AGENT_CLEANUP_STALE_WORKERS_H_

#include <string>

namespace trl {

struct StaleProcesses {
  int workers = 0;  // processes killed (workers and their descendants)
  int agents = 0;   // earlier trl-agent processes killed
};

// Kills (SIGKILL) the processes of other agents of `machine_rank` for the
// coordinator at `coordinator_address` on this host (this process's
// network namespace: test hosts share one pid namespace), started before
// the sweep, and waits (up to
// 10 s) until they and their process groups are gone. Processes this one
// started are left alone. Call it only once the coordinator has accepted
// this agent for the machine (it then holds the old agent lost).
StaleProcesses KillStaleProcessesOf(const std::string& coordinator_address,
                                    int machine_rank);

}  // namespace trl

#endif  // TRL_AGENT_CLEANUP_STALE_WORKERS_H_

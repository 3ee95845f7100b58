// Children of this process that the orphan sweep (agent/cleanup/orphans.h)
// must leave alone although they run in a process group of their own: the
// node health check (agent/health/node_health.h) while it runs. A spawn
// registers its child under the registry's lock, so that a sweep that sees
// the child also sees it exempt.
#ifndef TRL_COMMON_EXEMPT_CHILDREN_H_
#define TRL_COMMON_EXEMPT_CHILDREN_H_

#include <sys/types.h>

#include <functional>

namespace trl {

// Runs `spawn` under the registry's lock and exempts the pid it returns
// (none if it returns <= 0).
pid_t SpawnExemptChild(const std::function<pid_t()>& spawn);
// The child is reaped: the sweep may see its pid again (reused).
void ForgetExemptChild(pid_t pid);
bool IsExemptChild(pid_t pid);

}  // namespace trl

#endif  // TRL_COMMON_EXEMPT_CHILDREN_H_

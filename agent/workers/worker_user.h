// Workers under a user of their own (--worker_user): the daemons keep the
// token (its file mode 0600, their memory non-dumpable) and the workers,
// which run user code and whatever it imports, cannot read either, nor
// signal or trace the daemons. Needs an agent that runs as root (it
// changes the workers' user between fork and execve); the worker user may
// not be root.
#ifndef TRL_AGENT_WORKERS_WORKER_USER_H_
#define TRL_AGENT_WORKERS_WORKER_USER_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trl {

struct WorkerUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary, from the group database
};

// The user named `name` (or a numeric uid), checked: it exists, it is not
// root, and this process can switch to it (it runs as root).
absl::StatusOr<WorkerUser> ResolveWorkerUser(const std::string& name);

// With workers under another user, a --log_dir the agent (root) writes
// into must be this process's own and writable by nobody else: a worker
// could otherwise plant links there that root follows. Creates it (0755)
// when missing. OK for an empty `log_dir`.
absl::Status CheckLogDirForWorkerUser(const std::string& log_dir);

}  // namespace trl

#endif  // TRL_AGENT_WORKERS_WORKER_USER_H_

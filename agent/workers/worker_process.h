// One worker process: started with fork + execve (never a shell) in a
// process group of its own, with PR_SET_PDEATHSIG so it cannot outlive the
// agent thread that started it, and its stdout/stderr on pipes.
#ifndef TRL_AGENT_WORKERS_WORKER_PROCESS_H_
#define TRL_AGENT_WORKERS_WORKER_PROCESS_H_

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/workers/worker_user.h"
#include "common/worker_environment.h"

namespace trl {

struct WorkerSpec {
  std::string executable;  // absolute or relative path, already resolved
  std::vector<std::string> argv;
  Environment environment;
  std::string working_directory;  // empty: the agent's
  // A cgroup's cgroup.procs the worker moves itself into before execve;
  // empty: none.
  std::string cgroup_procs_path;
  // The user the worker runs as; nullopt: the agent's.
  std::optional<WorkerUser> user;
};

// How a process ended, as waitpid reported it.
struct ProcessExit {
  int exit_code = 0;
  int signal = 0;
};

class WorkerProcess {
 public:
  // Starts the process and returns once execve has succeeded; a failed
  // execve (no such file, not executable) is returned as an error.
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> Spawn(
      const WorkerSpec& spec);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Read ends of the worker's stdout and stderr; the caller takes them over.
  int TakeStdout();
  int TakeStderr();

  // Sends `signal` to the worker's whole process group.
  void SignalGroup(int signal) const;

  // Blocks until the worker exits, then kills whatever is left of its
  // process group, so nothing it forked survives it.
  ProcessExit Wait();
  // Whether the worker has exited (a zombie, or reaped already), without
  // reaping it: safe beside a Wait() in another thread.
  bool HasEnded() const;

 private:
  WorkerProcess(pid_t pid, int stdout_fd, int stderr_fd)
      : pid_(pid), stdout_fd_(stdout_fd), stderr_fd_(stderr_fd) {}

  pid_t pid_;
  int stdout_fd_;
  int stderr_fd_;
  std::atomic<bool> reaped_{false};
};

}  // namespace trl

#endif  // TRL_AGENT_WORKERS_WORKER_PROCESS_H_

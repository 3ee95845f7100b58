// When a failed job is worth restarting, and how long to wait before it:
// a global budget of restarts, exit codes marked as not worth a restart (a
// bad argument will fail again), and capped exponential backoff.
#ifndef TRL_COORDINATOR_JOB_RESTART_POLICY_H_
#define TRL_COORDINATOR_JOB_RESTART_POLICY_H_

#include <chrono>
#include <set>
#include <string>

namespace trl {

struct RestartPolicy {
  int max_restarts = 0;
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{30000};
  std::set<int> no_restart_exit_codes;

  // The wait before restart number `restart` (1 for the first): none
  // before the first (a job that failed once is not a crash loop, and a
  // whole-job restart should cost what a start costs), then
  // initial_backoff * 2^(restart-2), at most max_backoff.
  std::chrono::milliseconds BackoffBefore(int restart) const;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_RESTART_POLICY_H_

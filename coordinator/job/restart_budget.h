// What the job's restart policy has left: restarts used, the free restarts
// after a start that failed for want of resources (a moment out of
// descriptors or memory: they do not spend the budget, up to kFreeRestarts
// in a row, so a machine that never recovers still ends the job), and the
// earliest time the next generation may start (the backoff). A lost
// machine that a ready spare replaces is a handover: no restart spent, no
// backoff.
//
// Pure. Not thread-safe: the job state machine's owner serialises calls.
#ifndef TRL_COORDINATOR_JOB_RESTART_BUDGET_H_
#define TRL_COORDINATOR_JOB_RESTART_BUDGET_H_

#include <optional>
#include <utility>

#include "coordinator/job/records.h"
#include "coordinator/job/restart_policy.h"

namespace trl {

class RestartBudget {
 public:
  explicit RestartBudget(RestartPolicy policy) : policy_(std::move(policy)) {}

  int used() const { return used_; }
  // Generations restarted to hand a lost machine's place to a spare.
  int handovers() const { return handovers_; }
  // The earliest time the next generation may start.
  TimePoint not_before() const { return not_before_; }
  // For a restarted coordinator: what the one before it had used.
  void Resume(int used, TimePoint not_before) {
    used_ = used;
    not_before_ = not_before;
  }

  // What `failure` of a running generation means once it has stopped: the
  // job's end (its outcome, with `exit_code`), or nothing: a restart.
  std::optional<JobOutcome> Judge(const FailureRecord& failure, int exit_code);
  // The generation that failed is gone: the next may start after the
  // backoff (spending a restart, or a free one).
  void Restart(TimePoint now);
  // Stopped for no failure (a rescale): the next starts at once.
  void StartAgainAt(TimePoint now) { not_before_ = now; }
  // Every rank of a generation started: the free restarts count from zero.
  void GenerationStarted() { free_in_a_row_ = 0; }

 private:
  static constexpr int kFreeRestarts = 5;
  const RestartPolicy policy_;
  int used_ = 0;
  int free_in_a_row_ = 0;
  bool next_is_free_ = false;
  bool next_is_handover_ = false;
  int handovers_ = 0;
  TimePoint not_before_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_RESTART_BUDGET_H_

#include "coordinator/job/restart_budget.h"

#include "absl/strings/str_cat.h"

namespace trl {

std::optional<JobOutcome> RestartBudget::Judge(const FailureRecord& failure,
                                               int exit_code) {
  const bool excluded =
      failure.rank >= 0 && failure.exit.signal == 0 &&
      failure.exit.start_error.empty() &&
      policy_.no_restart_exit_codes.count(failure.exit.exit_code) > 0;
  if (excluded) {
    return JobOutcome{
        JobPhase::kFailed, exit_code,
        absl::StrCat(failure.reason, " (exit code ", failure.exit.exit_code,
                     " is marked as not worth a restart)")};
  }
  if (failure.spare_takes_over) {
    // A handover: the job goes on with the spare, whatever the budget
    // (with the default of 0 restarts, a spare would otherwise never help).
    next_is_handover_ = true;
    return std::nullopt;
  }
  if (failure.exit.out_of_resources && free_in_a_row_ < kFreeRestarts) {
    // Out of descriptors or memory for a moment (a flood, a neighbour):
    // try again after the backoff without spending the budget.
    next_is_free_ = true;
    return std::nullopt;
  }
  if (used_ >= policy_.max_restarts) {
    return JobOutcome{
        JobPhase::kFailed, exit_code,
        policy_.max_restarts == 0
            ? failure.reason
            : absl::StrCat(failure.reason, " (all ", policy_.max_restarts,
                           " restarts used)")};
  }
  return std::nullopt;  // restart once the generation is gone
}

void RestartBudget::Restart(TimePoint now) {
  // Restarts so far, free ones in a row included, number the backoff: the
  // first restart of a job waits for none (BackoffBefore(1)), but a
  // shortage is retried after a backoff from its first retry on (a
  // moment out of descriptors or memory is still there at once: its
  // series starts one step later), and a restart after shortage retries
  // backs off past them.
  if (next_is_handover_) {
    // No backoff either: the spare waits only for the lost machine's fence.
    next_is_handover_ = false;
    ++handovers_;
    not_before_ = now;
    return;
  }
  if (next_is_free_) {
    next_is_free_ = false;
    ++free_in_a_row_;
    not_before_ = now + policy_.BackoffBefore(used_ + free_in_a_row_ + 1);
    return;
  }
  const int restart = used_ + 1 + free_in_a_row_ + (free_in_a_row_ > 0);
  free_in_a_row_ = 0;
  ++used_;
  not_before_ = now + policy_.BackoffBefore(restart);
}

}  // namespace trl

// The machines whose agents were lost while every other rank of their
// generation had exited 0: their workers may have finished too, and only
// their exits were lost with the connection. The job waits (until a
// deadline: the rejoin timeout after the first loss) for each agent to
// come back and report; the reports decide whether the generation
// succeeded.
//
// Pure. Not thread-safe: the job state machine's owner serialises calls.
#ifndef TRL_COORDINATOR_JOB_AWAITED_REPORTS_H_
#define TRL_COORDINATOR_JOB_AWAITED_REPORTS_H_

#include <set>
#include <string>
#include <vector>

#include "coordinator/job/machine_table.h"
#include "coordinator/job/rank_table.h"
#include "coordinator/job/records.h"

namespace trl {

class AwaitedReports {
 public:
  bool empty() const { return machines_.empty(); }
  const std::set<int>& machines() const { return machines_; }
  TimePoint deadline() const { return deadline_; }
  // Awaits the reports of `machines` too; the first wait sets the deadline.
  void Await(const std::vector<int>& machines, TimePoint deadline);
  // The generation ends whatever they would report.
  void Clear() { machines_.clear(); }

  // What the reports that came say.
  struct Verdict {
    enum class Kind {
      kWaiting,        // some still to come, before the deadline
      kAllSucceeded,   // every awaited worker exited 0
      kMachineFailed,  // a machine's report is incomplete, or never came
      kRankFailed,     // a reported worker failed
    };
    Kind kind = Kind::kWaiting;
    int machine_rank = -1;
    std::string why;                   // kMachineFailed
    const RankRecord* rank = nullptr;  // kRankFailed
  };
  // Applies the reports of the machines back (connected again) to their
  // ranks of `generation`, and says what they mean at `now`.
  // `rejoin_timeout` is named in the verdict on a machine that never came.
  Verdict Settle(const MachineTable& machines, RankTable& ranks,
                 int64_t generation, std::chrono::milliseconds rejoin_timeout,
                 TimePoint now);

 private:
  std::set<int> machines_;
  TimePoint deadline_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_AWAITED_REPORTS_H_

// Which machines a generation takes (--num_machines MIN:MAX,
// docs/elastic.md): every machine of a fixed-size job; the ready ones of an
// elastic job, less the cordoned ones while MIN remain without them. The
// first elastic generation starts at once with all MAX, or elastic_wait
// after MIN are ready; a restart goes on with the machines it has. A
// machine that registers while a generation runs is a joiner: it waits for
// the next generation, or (--rescale_on_join) stops the running one to be
// taken in at once, which spends no restart.
//
// Pure. Not thread-safe: the job state machine's owner serialises calls.
#ifndef TRL_COORDINATOR_JOB_ELASTIC_MEMBERSHIP_H_
#define TRL_COORDINATOR_JOB_ELASTIC_MEMBERSHIP_H_

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/job/cordon_list.h"
#include "coordinator/job/machine_table.h"
#include "coordinator/job/records.h"

namespace trl {

// An elastic generation's shape, for the log: "2 of 2:3 machines (0, 2),
// world size 4, effective batch size = per-device batch x 4" (the
// data-parallel degree is the world size).
std::string ElasticShape(const GenerationStart& start,
                         const JobSettings& settings);

class ElasticMembership {
 public:
  explicit ElasticMembership(const JobSettings& settings)
      : elastic_(settings.Elastic()),
        min_(settings.MinMachines()),
        max_(settings.num_machines),
        wait_(settings.elastic_wait) {}

  // The machines the next generation would take now, in machine_rank
  // order (GROUP_RANK order).
  std::vector<int> NextMembers(const MachineTable& machines,
                               const CordonList& cordons) const;
  // Whether an elastic generation may start with `ready` machines ready
  // (`restarting`: after a failure, not the first).
  bool ReadyToStart(int ready, bool restarting, TimePoint now) const;
  // Before the first generation: starts (or drops) the wait for more
  // machines once MIN are ready.
  void UpdateHold(int ready, TimePoint now);
  // When the first generation's wait for more machines ends, if it began.
  const std::optional<TimePoint>& hold_until() const { return hold_until_; }

  // Machine `m` registered while a generation runs without it.
  void Joined(int m) { joiners_.insert(m); }
  void Left(int m) { joiners_.erase(m); }
  // A joiner that a rescale would take in now: ready, not cordoned, no
  // earlier agent of it still running.
  std::optional<int> JoinerToTakeIn(const MachineTable& machines,
                                    const CordonList& cordons,
                                    TimePoint now) const;
  // A generation stops to take a joiner in; TakeRescale says (once) that
  // the stop was that.
  void StartRescale() { rescaling_ = true; }
  bool TakeRescale() { return std::exchange(rescaling_, false); }
  // A generation starts: no joiners, no wait, no rescale under way.
  void NewGeneration();

 private:
  const bool elastic_;
  const int min_;
  const int max_;
  const std::chrono::milliseconds wait_;
  std::set<int> joiners_;
  std::optional<TimePoint> hold_until_;
  bool rescaling_ = false;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_ELASTIC_MEMBERSHIP_H_

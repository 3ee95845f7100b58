// When each generation reached each step of its life (assigned, every rank
// running, stopping, ended), for the status page's timeline and the
// rendezvous and restart durations in /metrics: one entry per generation,
// kept as it happens (bounded by the restart budget and its free
// restarts), never computed by a walk. The first time a step is noted
// counts.
//
// Pure. Not thread-safe: the job state machine's owner serialises calls.
#ifndef TRL_COORDINATOR_JOB_GENERATION_TIMELINE_H_
#define TRL_COORDINATOR_JOB_GENERATION_TIMELINE_H_

#include <optional>
#include <vector>

#include "coordinator/job/records.h"

namespace trl {

class GenerationTimeline {
 public:
  const std::vector<GenerationTimes>& all() const { return times_; }

  void Assigned(int64_t generation, TimePoint at) {
    GenerationTimes times;
    times.generation = generation;
    times.assigned_at = at;
    times_.push_back(times);
  }
  void Running(int64_t generation, TimePoint at) {
    Note(generation, &GenerationTimes::running_at, at);
  }
  void Stopping(int64_t generation, TimePoint at) {
    Note(generation, &GenerationTimes::stopping_at, at);
  }
  void Ended(int64_t generation, TimePoint at) {
    Note(generation, &GenerationTimes::ended_at, at);
  }

 private:
  void Note(int64_t generation, std::optional<TimePoint> GenerationTimes::*step,
            TimePoint at) {
    if (times_.empty() || times_.back().generation != generation) return;
    std::optional<TimePoint>& when = times_.back().*step;
    if (!when) when = at;
  }
  std::vector<GenerationTimes> times_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_GENERATION_TIMELINE_H_

// `trl-coord diagnose`: why each generation of a job ended, read from the
// job's events (record/events.h). Per generation: how it started, what
// went wrong in it (a lost or unhealthy machine, a stall), why it was
// stopped, where its ranks stood then, grouped ("ranks 0, 2-3 in
// all_reduce (...), from train.py:13; rank 1 in <module> (train.py:11),
// the odd one out" becomes one line per place), and how the job ended.
// Pure: the same text from the events file after the job and from a
// running coordinator.
#ifndef TRL_COORDINATOR_RECORD_DIAGNOSIS_H_
#define TRL_COORDINATOR_RECORD_DIAGNOSIS_H_

#include <cstdint>
#include <string>

#include "proto/trl_launch.pb.h"

namespace trl {

// Every generation, oldest first (`generation` >= 0: that one only); a
// generation in which nothing went wrong is one line. Times are UTC.
std::string DiagnoseJob(const trl::launch::v1::JobEvents& events,
                        int64_t generation = -1);

// The newest generation stopped for a cause (a "stopping" event), or -1.
int64_t LastStoppedGeneration(const trl::launch::v1::JobEvents& events);

}  // namespace trl

#endif  // TRL_COORDINATOR_RECORD_DIAGNOSIS_H_

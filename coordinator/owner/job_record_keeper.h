// The job's record for a coordinator restarted on it (record/state_file.h),
// as the core keeps it: made of the state machine (RecordOf), written off
// the owner's thread when the restarts or failures it holds change (after
// a failed write, with the next change), removed once the job has ended,
// and read back into the state machine by a coordinator that resumes the
// job (Resume).
//
// Not thread-safe: the owner serialises calls. Writes go to the Offload it
// is given, in order, and their `done` must come back on the owner's
// thread.
#ifndef TRL_COORDINATOR_OWNER_JOB_RECORD_KEEPER_H_
#define TRL_COORDINATOR_OWNER_JOB_RECORD_KEEPER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "coordinator/job/state_machine.h"
#include "coordinator/record/state_file.h"

namespace trl {

class JobRecordKeeper {
 public:
  using Clock = std::function<TimePoint()>;
  // Unix time in milliseconds: what the record's backoff is written in.
  using WallClock = std::function<int64_t()>;
  // Runs `work` where slow work may run, then `done` on the owner's thread.
  using Offload = std::function<void(std::function<void()> work,
                                     std::function<void()> done)>;

  // `state_file` empty: nothing is kept (every write is a no-op).
  JobRecordKeeper(std::string state_file, std::string job_id,
                  std::string identity, Clock clock, WallClock wall_clock,
                  Offload offload, std::string run_id = "");

  bool keeps() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

  // `machine` picks up the job `record` kept: its generation, restarts,
  // failures, hosts and cordons, and the rest of its backoff (on the steady
  // clock; never more than `max_backoff`, should the wall clock have jumped
  // back). What it says counts as kept.
  void Resume(const JobRecord& record, std::chrono::milliseconds max_backoff,
              JobStateMachine& machine);
  // The record saying `generation` of `machine`'s job may have run.
  JobRecord RecordOf(const JobStateMachine& machine, int64_t generation) const;
  // Writes the record of `machine`'s generation if its restarts or
  // failures are not those last written (or asked to be), or the last
  // write failed; nothing once the job has ended.
  void KeepIfChanged(const JobStateMachine& machine);
  // Writes it whatever changed (a host uncordoned); nothing once the job
  // has ended.
  void Keep(const JobStateMachine& machine);
  // A generation's start wrote `machine`'s record itself (with the
  // rendezvous): its restarts and failures are kept.
  void Kept(const JobStateMachine& machine);
  // The job has ended: the file goes, after every write asked for before.
  void Remove();

 private:
  void Write(JobRecord record);

  const std::string path_;
  const std::string job_id_;
  const std::string run_id_;
  const std::string identity_;
  const Clock clock_;
  const WallClock wall_clock_;
  const Offload offload_;
  // What the state file says now (-1: the last write failed).
  int kept_restarts_ = 0;
  size_t kept_failures_ = 0;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_JOB_RECORD_KEEPER_H_

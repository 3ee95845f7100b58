// When the job's members run out of time: machines that did not register
// in time, lost machines that did not rejoin in time, agents silent for
// longer than the heartbeat timeout, the coordinator's own stalls (nobody's
// silence), and when the next of these, or of the membership's other
// deadlines (an elastic job's hold, an old agent's lease), falls due. It
// reads the membership it is given and changes nothing in it: the job
// state machine acts on what it says.
//
// Pure: every call that needs the time carries it. Not thread-safe: the
// job state machine's owner serialises calls.
#ifndef TRL_COORDINATOR_JOB_MEMBERSHIP_TIMEOUTS_H_
#define TRL_COORDINATOR_JOB_MEMBERSHIP_TIMEOUTS_H_

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/job/membership.h"
#include "coordinator/job/records.h"

namespace trl {

class MembershipTimeouts {
 public:
  // The job acts once `now` is past a deadline, so each is due just past
  // it.
  static constexpr std::chrono::microseconds kPast{1};

  MembershipTimeouts(JobSettings settings, TimePoint created_at);

  // On every tick: the coordinator's own stall since the last tick (late
  // by more than a tick interval, or 250 ms, for a loaded machine), if it
  // stalled; counted in stalls_excused().
  std::optional<std::chrono::steady_clock::duration> OwnStall(TimePoint now);
  std::chrono::steady_clock::duration stalls_excused() const {
    return stalls_excused_;
  }
  // A restart begins: lost machines have the rejoin timeout from `now`.
  void AwaitRejoins(TimePoint now) {
    rejoin_deadline_ = now + settings_.rejoin_timeout;
  }

  // The machines silent for longer than the heartbeat timeout, each with
  // why it is lost.
  std::vector<std::pair<int, std::string>> Silent(const MachineTable& machines,
                                                  TimePoint now) const;
  // The failure that ends the job in `generation` when machines did not
  // register in time (while it waits for agents; an elastic job needs
  // only MIN) or a lost machine did not rejoin in time (while it restarts;
  // an elastic job goes on without lost machines while MIN are ready).
  std::optional<FailureRecord> Overdue(const JobMembership& membership,
                                       JobPhase phase, int64_t generation,
                                       TimePoint now) const;
  // When, after `now`, the next of the membership's deadlines in `phase`
  // falls due, if any.
  std::optional<TimePoint> Next(const JobMembership& membership, JobPhase phase,
                                TimePoint now) const;

 private:
  std::optional<std::string> RegistrationOverdue(
      const JobMembership& membership, JobPhase phase, TimePoint now) const;
  std::optional<std::pair<int, std::string>> RejoinOverdue(
      const JobMembership& membership, JobPhase phase, TimePoint now) const;

  JobSettings settings_;
  TimePoint created_at_;
  TimePoint rejoin_deadline_;
  std::optional<TimePoint> last_tick_;
  std::chrono::steady_clock::duration stalls_excused_{};
};

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_MEMBERSHIP_TIMEOUTS_H_

// The job's lifecycle as a pure state machine: agents register, a generation
// is assigned, workers start and exit; on a failure every worker of the
// generation is stopped and, while the restart budget lasts, the next
// generation starts once every machine is back; otherwise the job ends. It
// opens no sockets, starts no threads and never reads a clock: every event
// carries `now` (Tick too, for timeouts), and every method returns what the
// caller (the gRPC edge) must do next.
//
// Not thread-safe: the owner serialises calls.
#ifndef TRL_COORDINATOR_JOB_STATE_MACHINE_H_
#define TRL_COORDINATOR_JOB_STATE_MACHINE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/job/awaited_reports.h"
#include "coordinator/job/generation_timeline.h"
#include "coordinator/job/membership.h"
#include "coordinator/job/membership_timeouts.h"
#include "coordinator/job/rank_table.h"
#include "coordinator/job/records.h"
#include "coordinator/job/restart_budget.h"

namespace trl {

class JobStateMachine {
 public:
  JobStateMachine(JobSettings settings, TimePoint now);
  // Its machine table holds iterators: movable, not copyable.
  JobStateMachine(const JobStateMachine&) = delete;
  JobStateMachine& operator=(const JobStateMachine&) = delete;
  JobStateMachine(JobStateMachine&&) = default;
  JobStateMachine& operator=(JobStateMachine&&) = default;

  // For a restarted coordinator picking its job up again: the next
  // generation will be `generation` + 1, not before `not_before` (the rest
  // of a restart backoff), with `restarts_used` and the failure history
  // carried over. Only before the first generation. The agents of the
  // last generation (`previous_hosts`: machine -> host) may still have
  // their workers: an agent on another host gets a machine's ranks only
  // once the old agent's run-on (`previous_run_on`: its lease and fence,
  // AgentInfo::RunOn), counted from now (it heard from the old coordinator
  // before this one started), has run out.
  void ResumeAfter(
      int64_t generation, int restarts_used,
      std::vector<FailureRecord> failures = {},
      TimePoint not_before = TimePoint(),
      std::map<int, HostIdentity> previous_hosts = {},
      std::map<int, std::chrono::milliseconds> previous_run_on = {});

  // Accepts an agent, or says why not (duplicate or out-of-range
  // machine_rank, a config that differs, a job that takes no agents now).
  // A machine that was lost may register again (rejoin).
  absl::Status Register(const AgentInfo& agent, TimePoint now);
  // Registers any agent: a machine (as Register), a spare, or a machine
  // whose place a spare has taken (it becomes a spare). Returns the key
  // its events come under: its machine_rank, or a spare's key (< 0).
  absl::StatusOr<int> Admit(const AgentInfo& agent, TimePoint now);
  // Clears a cordoned host (trl-coord uncordon); NotFound if it is not.
  absl::Status Uncordon(const std::string& hostname);
  void Heartbeat(int machine_rank, TimePoint now);
  Decision AgentDisconnected(int machine_rank, TimePoint now);
  // The agent that machine `machine_rank` lost last is gone with every
  // worker it started (its guardian's word): what waited for its lease
  // waits no more (its run-on ends now, or where an agent before it
  // still may run, then). Tick to act on it.
  void LostAgentGone(int machine_rank, TimePoint now);

  // Checks timeouts (heartbeats, rejoin) and whether a generation can start.
  // Call it after every event and periodically.
  Decision Tick(TimePoint now);
  // When, after `now`, Tick next has something to do that no event will
  // bring (an agent's silence, the end of a restart backoff, a rejoin or
  // registration timeout), if anything; the edge may tick then instead of
  // at its regular interval. Always later than `now`.
  std::optional<TimePoint> NextDeadline(TimePoint now) const;
  // Assigns ranks for the next generation. Only after a Decision said
  // start_generation.
  GenerationStart StartGeneration(TimePoint now);

  void WorkerStarted(int machine_rank, int64_t generation, int local_rank,
                     int pid, TimePoint now);
  Decision WorkerExited(int machine_rank, int64_t generation, int local_rank,
                        const WorkerExit& exit, TimePoint now);
  // Rank `rank` of machine `machine_rank` printed `line` (one line, already
  // made safe to show) at `at`: kept as its newest line of this generation.
  // A rank of another machine or generation is ignored (fencing).
  void RankPrinted(int machine_rank, int64_t generation, int rank,
                   const std::string& line, TimePoint at);
  // Its agent found a running worker hung (`reason`: the detector and where
  // it stood) and left it alive: the generation fails for it, as for an
  // exit, and is stopped. The rank stays live until its exit comes, which
  // counts as the hang's, not the stop's. While the generation stops, the
  // rank is marked so and nothing more is done.
  Decision WorkerHung(int machine_rank, int64_t generation, int local_rank,
                      const std::string& reason, TimePoint now);
  // Stops the job (a signal, an operator): stop workers, then end as
  // kStopped with `exit_code`.
  // Machine `m`'s agent checked the command on its machine: `problem` is
  // empty if it runs there. If not, the job fails with exit code 2, naming
  // the machine and the problem, before anything starts where it can.
  Decision CommandChecked(int m, const std::string& problem, TimePoint now);
  Decision StopRequested(const std::string& reason, int exit_code,
                         TimePoint now);
  // What `key`'s agent found in its node health checks (empty: healthy).
  // An unhealthy host is cordoned: its machines get no ranks from the next
  // generation on (a running one goes on); Tick hands them to spares.
  // Returns false if nothing changed (the agent said so already).
  bool HealthReported(int key, const std::string& problem) {
    return !IsFinished(phase_) && membership_.HealthReported(key, problem);
  }

  const JobSettings& settings() const { return settings_; }
  JobPhase phase() const { return phase_; }
  int64_t generation() const { return generation_; }
  int restarts_used() const { return budget_.used(); }
  // The earliest time the next generation may start (a restart backoff).
  TimePoint next_start_not_before() const { return budget_.not_before(); }
  int world_size() const { return ranks_.size(); }
  TimePoint created_at() const { return created_at_; }
  // The sum of the coordinator's own stalls excused so far.
  std::chrono::steady_clock::duration own_stalls() const {
    return timeouts_.stalls_excused();
  }
  const std::map<int, NodeRecord>& nodes() const {
    return membership_.machines().all();
  }
  const std::vector<RankRecord>& ranks() const { return ranks_.all(); }
  // The machines of the current (or last) generation, in GROUP_RANK order.
  const std::vector<int>& members() const { return members_; }
  // Where the next generation's rank 0 would run (the first machine that
  // would be a member if it started now); empty if none.
  std::string NextMasterAddr() const;
  const std::vector<FailureRecord>& failures() const { return failures_; }
  const std::map<int, SpareRecord>& spares() const {
    return membership_.spares().all();
  }
  const std::map<std::string, Cordon>& cordoned() const {
    return membership_.cordons().cordoned();
  }
  // For a restarted coordinator: hosts cordoned before it.
  void RestoreCordons(std::map<std::string, Cordon> cordoned) {
    membership_.cordons().Restore(std::move(cordoned));
  }
  const std::optional<JobOutcome>& outcome() const { return outcome_; }
  // Every generation this machine started, oldest first (one entry per
  // restart: bounded by the restart budget and kFreeRestarts).
  const std::vector<GenerationTimes>& timeline() const {
    return timeline_.all();
  }
  const std::optional<TimePoint>& first_registration_at() const {
    return membership_.first_registration_at();
  }
  // Whether a generation may start now: every machine registered,
  // connected and its command checked, no backoff or old lease ahead (what
  // Tick decides start_generation on; for a start prepared earlier).
  bool ReadyToStart(TimePoint now) const;

 private:
  // job/state_machine.cc: registration, heartbeats, ticks, the start.
  RankRecord* FindRank(int machine_rank, int64_t generation, int local_rank);
  // job/state_machine_endings.cc: how a generation ends.
  Decision LoseAgent(int machine_rank, const std::string& why, TimePoint now);
  // Marks a machine lost; returns how many of its ranks were still pending
  // or running (they are lost with it).
  int MarkLost(int machine_rank, const std::string& why, TimePoint now);
  // What losing these machines (machine -> ranks lost with it), found at
  // one moment, means for the job.
  Decision AfterLosses(const std::vector<std::pair<int, int>>& lost,
                       TimePoint now);
  Decision FailForLoss(int machine_rank, const std::string& why, TimePoint now);
  // Machines lost while the rest of their generation had exited 0 may have
  // finished too: their agents' reports, when they rejoin, decide.
  Decision SettleAwaitedReport(TimePoint now);
  Decision Fail(FailureRecord failure, int exit_code, TimePoint now);
  // The generation starts to stop (its timeline says when).
  void EnterStopping(TimePoint now);
  void Finish(JobOutcome outcome, Decision& decision);
  // Once nothing of the current generation is alive: restart or end.
  void MaybeFinish(Decision& decision, TimePoint now);
  // --rescale_on_join: stops the running generation for a ready joiner.
  Decision MaybeRescale(TimePoint now);

  JobSettings settings_;
  TimePoint created_at_;
  JobPhase phase_ = JobPhase::kWaitingForAgents;
  int64_t generation_ = -1;  // none assigned yet
  // Who is in the job: machines, spares, cordons, joiners.
  JobMembership membership_;
  // Who did not register, rejoin or beat in time; the owner's stalls.
  MembershipTimeouts timeouts_;
  RankTable ranks_;
  std::vector<FailureRecord> failures_;
  GenerationTimeline timeline_;
  // Set when stopping starts: what the job ends as once workers are gone,
  // or nothing when it restarts.
  std::optional<JobOutcome> pending_outcome_;
  RestartBudget budget_;
  // The machines whose reports on their last workers the job waits for.
  AwaitedReports awaited_;
  // The current generation's machines, in GROUP_RANK order.
  std::vector<int> members_;
  std::optional<JobOutcome> outcome_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_STATE_MACHINE_H_

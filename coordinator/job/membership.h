// Who is in the job: each machine's agent (MachineTable), the spares that
// wait to take a machine's place (SparePool), the hosts cordoned for
// failing too often (CordonList) and an elastic job's joiners
// (ElasticMembership). It admits agents, hears them, hands a lost or
// cordoned machine's place to a spare, says whether every machine a
// generation needs is there, and places a generation's ranks on the
// members. It knows nothing of ranks' states or how a generation ends: the
// job state machine passes its phase in.
//
// Pure: every call that needs the time carries it. Not thread-safe: the
// job state machine's owner serialises calls.
#ifndef TRL_COORDINATOR_JOB_MEMBERSHIP_H_
#define TRL_COORDINATOR_JOB_MEMBERSHIP_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/job/cordon_list.h"
#include "coordinator/job/elastic_membership.h"
#include "coordinator/job/machine_table.h"
#include "coordinator/job/records.h"
#include "coordinator/job/spare_pool.h"

namespace trl {

class JobMembership {
 public:
  JobMembership(JobSettings settings, TimePoint created_at);

  // A restarted coordinator's job: where each machine's agent was before
  // (machine -> host), and how long its workers may run on after its last
  // word (AgentInfo::RunOn). An agent of another host gets the machine
  // only once that, counted from created_at, has run out.
  void Resume(std::map<int, HostIdentity> previous_hosts,
              std::map<int, std::chrono::milliseconds> previous_run_on = {});

  // Accepts a machine's agent (new, or back after it was lost), or says
  // why not.
  absl::Status Register(const AgentInfo& agent, JobPhase phase, TimePoint now);
  // Accepts any agent: a machine's, a spare, or a machine's own agent
  // whose place a spare holds (a spare now). Returns its key.
  absl::StatusOr<int> Admit(const AgentInfo& agent, JobPhase phase,
                            TimePoint now);
  absl::Status Uncordon(const std::string& hostname) {
    return cordons_.Uncordon(hostname);
  }
  // A heartbeat of a machine (key >= 0) or a spare (key < 0).
  void Heard(int key, TimePoint now);
  // The coordinator's own stall of `late`: nobody's silence.
  void ExcuseStall(std::chrono::steady_clock::duration late, TimePoint now);
  // The command check of `key`'s agent (`problem` empty: the command runs
  // there). A spare that cannot run it takes no place; a machine that can
  // is checked. Returns why the job fails for a machine that cannot
  // (nothing once the job has finished).
  std::optional<std::string> CommandChecked(int key, const std::string& problem,
                                            JobPhase phase);
  // What the health checks of `key`'s agent found (empty: it is fit). An
  // unhealthy agent's host is cordoned at once; it is cleared once no
  // agent of the host has a problem.
  // Returns false if it said so already (nothing changed).
  bool HealthReported(int key, const std::string& problem);
  // Machine `m` lost its agent (`why`). Before any generation it goes
  // altogether (nullptr); otherwise its record, kept for a rejoin or a
  // spare. nullptr too if it was not connected, or `m` is a spare's key
  // (the spare goes).
  const NodeRecord* Lose(int m, const std::string& why, JobPhase phase,
                         TimePoint now);
  // The agent machine `m` lost last is gone with its workers
  // (JobStateMachine::LostAgentGone).
  void LostAgentGone(int m, TimePoint now);

  // Ready spares take vacant machines' places (not those whose reports are
  // `awaited`), and cordoned machines' while no generation runs; spares
  // silent for the heartbeat timeout are dropped. What the edge must do is
  // added to `decision`.
  void FillFromSpares(JobPhase phase, const std::set<int>& awaited,
                      Decision& decision, TimePoint now);
  void DropSilentSpares(Decision& decision, TimePoint now);
  // Counts a failure against its host, unless it is no fault of the
  // host's (a shortage of resources, a spare's).
  void NoteHostFailure(const FailureRecord& failure, TimePoint now);

  // Whether every machine the next generation needs is there: registered,
  // connected, command checked, on a healthy host, no old agent's lease
  // ahead (an elastic job: enough of them, see ElasticMembership).
  bool ReadyToStart(JobPhase phase, TimePoint now) const;
  // Machines that could be given ranks now: ready (MachineTable::IsReady)
  // and not on an unhealthy host.
  int CountReady() const;
  // The next generation's members, ranks placed on them: every field of
  // GenerationStart but the generation.
  GenerationStart Place();
  // Where the next generation's rank 0 would run; empty if nowhere.
  std::string NextMasterAddr() const;
  // --rescale_on_join: a ready joiner that running generation `generation`
  // stops to take in, if there is one: its rescale starts, and the stop's
  // reason comes back.
  std::optional<std::string> StartRescale(int64_t generation, TimePoint now);
  // A failure of machine `m` in `generation`, its host named; of `rank`
  // as it exited.
  FailureRecord MachineFailure(int64_t generation, int m,
                               std::string why) const;
  FailureRecord RankFailure(int64_t generation, const RankRecord& rank) const;

  const MachineTable& machines() const { return machines_; }
  MachineTable& machines() { return machines_; }
  ElasticMembership& elastic() { return elastic_; }
  const ElasticMembership& elastic() const { return elastic_; }
  const SparePool& spares() const { return spares_; }
  // Whether a spare stands ready to take a lost machine's place.
  bool SpareStandsReady() const {
    return spares_.NextReady(cordons_).has_value();
  }
  CordonList& cordons() { return cordons_; }
  const CordonList& cordons() const { return cordons_; }
  const std::optional<TimePoint>& first_registration_at() const {
    return first_registration_at_;
  }

 private:
  bool Cordoned(const NodeRecord& node) const {
    return cordons_.Cordoned(node.info.hostname);
  }
  absl::StatusOr<int> AdmitSpare(const AgentInfo& agent, TimePoint now);
  // The host's cordon for its health, from `problem` (an agent of it just
  // said) and what its other connected agents said last.
  void UpdateHostHealth(const std::string& host, const std::string& problem);
  // An agent of `host` that may have held its health cordon left: the
  // agents still there decide (if none is, the cordon stays until one
  // says the host is healthy).
  void RecheckHostHealth(const std::string& host);
  // How long machine m's agent before a coordinator restart may have run
  // its workers on after its last word from the old coordinator.
  std::chrono::milliseconds PreviousRunOn(int m,
                                          const AgentInfo& newcomer) const;
  // Spare `key` takes machine `m`'s place (`why` said in the handover).
  void TakePlace(int key, int m, const std::string& why, JobPhase phase,
                 Decision& decision);
  // A cordoned machine's agent gives its place to a ready spare and
  // becomes one.
  void SwapOutCordoned(JobPhase phase, Decision& decision, TimePoint now);

  JobSettings settings_;
  TimePoint created_at_;
  MachineTable machines_;
  SparePool spares_;
  CordonList cordons_;
  ElasticMembership elastic_;
  std::optional<TimePoint> first_registration_at_;
  bool resumed_ = false;
  std::map<int, HostIdentity> previous_hosts_;
  std::map<int, std::chrono::milliseconds> previous_run_on_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_MEMBERSHIP_H_

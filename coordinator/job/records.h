// What the job state machine speaks in: what an agent brings
// (AgentInfo), what it keeps of each machine, rank and spare, what it
// decides (Decision, GenerationStart, Handover), how the job ends, and the
// job's settings and policy. Plain data, pure.
#ifndef TRL_COORDINATOR_JOB_RECORDS_H_
#define TRL_COORDINATOR_JOB_RECORDS_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/job/restart_policy.h"

namespace trl {

using TimePoint = std::chrono::steady_clock::time_point;

struct WorkerExit {
  int exit_code = 0;
  int signal = 0;
  std::string start_error;        // the worker never ran
  bool out_of_resources = false;  // ... for want of resources
  std::string reason;             // why the agent ended it (a hang), if it did
  std::vector<std::string> last_lines;
  // Where it stood when it was stopped for a failure or found hung, if
  // its agent captured that (agent/core/stack_summary.h).
  std::string where;
  // The program that ran, as its agent resolved it (empty: not said).
  std::string executable;

  bool Succeeded() const {
    return exit_code == 0 && signal == 0 && start_error.empty();
  }
  // "exited with code 3", "was killed by signal 9 (SIGKILL)", ...
  std::string Describe() const;
  // The exit status a launcher reports for it (128+signal for signals).
  int LauncherExitCode() const;
};

// Which machine and process namespace an agent runs in: its hostname, and
// the kernel's boot id with its pid namespace (common/host_identity.h). Two
// agents are on the same host only if both agree: then a new agent can see,
// and kill, what an old one left (agent/cleanup/stale_workers.h). A hostname
// alone is not enough (cloned machines, containers named alike).
struct HostIdentity {
  std::string hostname;
  std::string host_id;  // empty: unknown (never the same host as anything)

  bool SameHostAs(const HostIdentity& other) const {
    return !host_id.empty() && host_id == other.host_id &&
           hostname == other.hostname;
  }
};

struct AgentInfo {
  int machine_rank = 0;
  std::string hostname;
  std::string host_id;  // see HostIdentity
  std::string advertise_addr;
  std::string interface_name;
  int local_world_size = 0;
  int local_device_count = 0;
  std::map<std::string, std::string> config_fingerprint;
  // Which agent process this is, and how long it keeps its workers without
  // a word from us (its lease).
  int agent_pid = 0;
  std::chrono::milliseconds lease{0};
  // Once its lease has run out, its workers are surely gone within this
  // long (agent/fence_page.h); 0: it has no fence.
  std::chrono::milliseconds fence{0};
  // A rejoining agent's word on its workers of `report_generation` that
  // exited on their own before it lost its connection: local rank -> exit.
  int64_t report_generation = -1;
  std::map<int, WorkerExit> reported_exits;
  // It checks that the command runs on its machine, and says so
  // (CommandChecked) before its ranks may start.
  bool checks_command = false;
  // It answers a capture_only stop (StacksCaptured): a failure's stop may
  // come in two phases.
  bool captures_before_stop = false;
  // A spare (trl-agent --spare): it waits without ranks until it takes a
  // lost machine's place. machine_rank is then -1, or the machine it
  // stood for when it lost its connection (it takes that one back if it is
  // still vacant).
  bool spare = false;
  // What its node health checks last found (empty: fit for ranks).
  std::string health_problem;

  HostIdentity host() const { return HostIdentity{hostname, host_id}; }
  // How long after its last word from us its workers may still run: the
  // lease, then the fence; without a fence, the stop grace and 2 s for
  // SIGKILLed processes to go.
  std::chrono::milliseconds RunOn(std::chrono::milliseconds stop_grace) const {
    return lease + (fence > std::chrono::milliseconds(0)
                        ? fence
                        : stop_grace + std::chrono::seconds(2));
  }
};

enum class JobPhase {
  kWaitingForAgents,
  kRunning,
  kStopping,
  kRestarting,
  kSucceeded,
  kFailed,
  kStopped,
};
const char* JobPhaseName(JobPhase phase);
bool IsFinished(JobPhase phase);

enum class RankState {
  kPending,
  kRunning,
  kSucceeded,
  kFailed,
  kStopped,
  kLost
};
const char* RankStateName(RankState state);

struct RankRecord {
  int rank = 0;
  int local_rank = 0;
  int machine_rank = 0;
  int pid = 0;
  // The host whose agent started it (empty before): a machine handed to a
  // spare names the spare's host, but its old ranks ran on the lost one.
  std::string hostname;
  RankState state = RankState::kPending;
  WorkerExit exit;
  // Its agent found it hung (the reason), before it exited: its exit,
  // whatever ended it, is a failure with that reason.
  std::string hung;
  // Its newest output line in this generation, and when it was printed
  // (progress in view; null before any). Shared and never changed once
  // made: a status copied under the owner's lock takes a reference, not
  // the bytes (at 131,072 ranks of 240-byte lines a search copied 31 MB
  // under the lock).
  std::shared_ptr<const std::string> last_line;
  TimePoint last_line_at;
};

struct NodeRecord {
  AgentInfo info;
  bool connected = true;
  std::string lost_reason;  // why it was declared lost, while it is
  // Until when the ranks of a machine declared lost may still run on its
  // old agent (its lease, then the stop grace): another agent that
  // registers for it gets its ranks only after this.
  TimePoint old_agent_may_run_until;
  // The part of it that agents on hosts other than this one's agent's may
  // run until (those it took over from): an agent of this host that
  // registers again still waits for it.
  TimePoint others_may_run_until;
  // old_agent_may_run_until as it was before its last loss: what the
  // agents before the lost one may run (a guardian's word for the lost one
  // leaves it standing).
  TimePoint run_on_before_loss;
  TimePoint last_heartbeat;
  // When one of its ranks last printed a line (as its agent reported it),
  // if any did: a machine whose ranks all went silent shows in /metrics.
  std::optional<TimePoint> last_output_at;
  // Its agent has said the command runs there (or does not check).
  bool command_checked = true;
  int rank_offset = 0;
  // Its place in the current generation's members (GROUP_RANK), -1 while
  // it is not one (an elastic job's joiner or a machine left out).
  int group_rank = -1;
  // Its place in the machines ordered by last heartbeat, while connected.
  std::list<int>::iterator by_heartbeat;
  bool SameHostAs(const AgentInfo& agent) const {
    return info.host().SameHostAs(agent.host());
  }
  // Its agent is a spare that took the machine's place: the machine's own
  // agent, when it comes back, becomes a spare instead of a duplicate.
  bool from_spare = false;
};

// A spare agent, registered under a key below zero (docs/elastic.md).
struct SpareRecord {
  AgentInfo info;
  TimePoint last_heartbeat;
  bool command_checked = true;
  std::string unusable;  // why it may not take a place (its command check)
};

// An agent's stream now stands for another key: a spare taking a machine's
// place (from < 0, to >= 0), or a machine's agent becoming a spare (from >=
// 0, to < 0). The edge re-keys the stream and tells the agent.
struct Handover {
  int from = 0;
  int to = 0;
  std::string reason;
};

struct FailureRecord {
  int64_t generation = 0;
  int rank = -1;  // -1: not a worker's failure (a lost agent, a signal)
  int machine_rank = -1;
  std::string hostname;
  WorkerExit exit;
  std::string reason;
  // A lost machine whose place a ready spare takes: a handover, which
  // spends no restart (the spares are its budget: each takes one place).
  bool spare_takes_over = false;
};

struct NodeAssignment {
  int machine_rank = 0;
  int rank_offset = 0;
  int local_world_size = 0;
  // Its place among the generation's machines (GROUP_RANK); the machine
  // rank itself unless an elastic generation runs without some machines.
  int group_rank = 0;
};

struct GenerationStart {
  int64_t generation = 0;
  int world_size = 0;
  // The generation's machines (GROUP_WORLD_SIZE).
  int num_machines = 0;
  // The first member's advertised address (machine 0's in a fixed-size
  // job): its rank 0 serves the rendezvous.
  std::string master_addr;
  std::vector<NodeAssignment> nodes;
  // Members whose host is cordoned: the generation could not start
  // without them (no spare to take their place, fewer than MIN left).
  std::vector<int> cordoned_members;
};

// When a generation reached each step of its life, for the status page's
// timeline and the rendezvous and restart durations in /metrics. Kept per
// generation as it happens (a few assignments), never computed by a walk.
struct GenerationTimes {
  int64_t generation = 0;
  TimePoint assigned_at;
  std::optional<TimePoint> running_at;   // every rank started
  std::optional<TimePoint> stopping_at;  // a failure or stop began its end
  std::optional<TimePoint> ended_at;     // no rank of it alive
};

struct JobOutcome {
  JobPhase phase = JobPhase::kSucceeded;
  int exit_code = 0;
  std::string summary;
};

// What the edge must do after an event. Several fields may be set at once.
struct Decision {
  // Every machine is there: prepare the rendezvous and call
  // StartGeneration.
  bool start_generation = false;
  // Machines declared lost (missed heartbeats): close their streams.
  std::vector<int> drop_agents;
  // Tell every agent to stop the current generation, with this reason.
  std::optional<std::string> stop_generation;
  // ... for a failure: the agents first keep where each rank stood.
  bool capture_stacks = false;
  // The job ended: tell every agent and finish.
  std::optional<JobOutcome> finished;
  // Streams that stand for another machine or spare now, all at once (a
  // swap is two).
  std::vector<Handover> handovers;
  // Spares gone silent: close their streams.
  std::vector<int> drop_spares;
};

// How the job behaves, as the operator set it (trl-coord start's flags).
// Declared once, here: the daemon's options hold it
// (CoordinatorOptions::policy) and the state machine reads it through
// JobSettings. Every duration is in milliseconds.
struct JobPolicy {
  RestartPolicy restart;
  // An agent silent for longer than this is lost; zero disables the check.
  std::chrono::milliseconds agent_heartbeat_timeout{3000};
  // How long a restart waits for a lost machine to come back.
  std::chrono::milliseconds rejoin_timeout{300000};
  // How long the job waits for every machine to register at first.
  std::chrono::milliseconds registration_timeout{900000};
  // SIGTERM to SIGKILL when workers are stopped.
  std::chrono::milliseconds stop_grace{30000};
  // The caller ticks at least this often (zero: no promise). A longer gap
  // between two ticks is the coordinator's own stall (frozen, starved):
  // agents' silence during it is not held against them.
  std::chrono::milliseconds tick_interval{0};
  // Elastic jobs (docs/elastic.md): the first generation starts at once
  // when every machine is there, and this long after min_machines are,
  // with those there by then.
  std::chrono::milliseconds elastic_wait{10000};
  // A machine that registers while a generation runs stops it at once to
  // be taken in (a rescale, not a failure: no restart spent, no backoff).
  bool rescale_on_join = false;
  // A host with this many failures (a worker failing there, its agent
  // lost) within cordon_window is cordoned: given no ranks until Uncordon.
  // 0: never.
  int cordon_after = 3;
  std::chrono::milliseconds cordon_window{600000};
  // At most this many spares (0: as many as machines).
  int max_spares = 0;
};

// The job's shape and identity, with its policy.
struct JobSettings : JobPolicy {
  std::string job_id;
  int num_machines = 1;
  // Workers per machine every agent must bring (num_processes /
  // num_machines); 0 accepts any count (tests of uneven layouts).
  int local_world_size = 0;
  // Settings every agent's config must agree on, key -> value.
  std::map<std::string, std::string> config_fingerprint;
  std::vector<std::string> command;
  // Elastic membership (docs/elastic.md): a generation may run on as few
  // as min_machines machines (0: num_machines, a fixed-size job).
  int min_machines = 0;
  int MaxSpares() const { return max_spares > 0 ? max_spares : num_machines; }
  int MinMachines() const {
    return min_machines > 0 ? std::min(min_machines, num_machines)
                            : num_machines;
  }
  bool Elastic() const { return MinMachines() < num_machines; }
};

// Whether `agent` may take part in the job: its config's fingerprint is
// the job's, and it brings the workers each machine must.
absl::Status CheckAgentFitsJob(const AgentInfo& agent,
                               const JobSettings& settings);

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_RECORDS_H_

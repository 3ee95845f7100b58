// The job's machines, by machine_rank: each one's record (its agent,
// whether it is connected, when it was last heard, whether its command is
// checked, until when an earlier agent may still run its workers), kept in
// the order they were last heard, with what a start decision needs kept as
// events happen: at 16,384 machines and their heartbeats, a walk over every
// machine at each event took most of the owner's time during the
// rendezvous. A machine that lost its agent stays (disconnected, vacant
// for a spare) until an agent registers for it again.
//
// Pure: every call that needs the time carries it. Not thread-safe: the
// job state machine's owner serialises calls.
#ifndef TRL_COORDINATOR_JOB_MACHINE_TABLE_H_
#define TRL_COORDINATOR_JOB_MACHINE_TABLE_H_

#include <algorithm>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "coordinator/job/records.h"

namespace trl {

class MachineTable {
 public:
  MachineTable() = default;
  // Records hold iterators into by_heartbeat_: movable, not copyable.
  MachineTable(const MachineTable&) = delete;
  MachineTable& operator=(const MachineTable&) = delete;
  MachineTable(MachineTable&&) = default;
  MachineTable& operator=(MachineTable&&) = default;

  const std::map<int, NodeRecord>& all() const { return nodes_; }
  // The record of machine `m`, or nullptr. A caller may change its fields
  // but not connected, last_heartbeat, old_agent_may_run_until or a
  // command check it clears: those go through the methods below.
  NodeRecord* Find(int m);
  const NodeRecord* Find(int m) const;
  NodeRecord& at(int m) { return nodes_.at(m); }
  const NodeRecord& at(int m) const { return nodes_.at(m); }
  bool contains(int m) const { return nodes_.count(m) > 0; }
  int size() const { return static_cast<int>(nodes_.size()); }
  int connected() const { return connected_; }
  // Machines that lost their agent, waiting for one (a spare may take it).
  const std::set<int>& vacant() const { return vacant_; }

  // `node` is machine `m`'s (in place of any earlier record), connected,
  // heard last of all.
  void Add(int m, NodeRecord node);
  // A disconnected record for machine `m`, which has not registered, whose
  // earlier agent may run workers until `old_agent_may_run_until`; the
  // caller fills it in and connects it with Reconnect.
  NodeRecord& AddUnregistered(int m, TimePoint old_agent_may_run_until);
  // Machine `m`'s record, filled in by the caller with a new agent,
  // connected again, in the order of its last_heartbeat.
  void Reconnect(int m);
  // Machine `m` is no longer connected (its record stays). `vacant`: a
  // spare may take its place.
  void Disconnect(int m, bool vacant);
  // Machine `m` goes altogether (before any generation: it may register
  // again as new).
  void Erase(int m);
  void Heard(int m, TimePoint now);
  // Machine `m`'s old agent may run its workers until `until` at least.
  void OldAgentMayRunUntil(int m, TimePoint until);
  // ... and no later than `until`: its workers are known to have ended.
  void OldAgentRanUntil(int m, TimePoint until);

  // Connected machines silent for longer than `timeout`, most silent first.
  std::vector<int> SilentFor(std::chrono::steady_clock::duration timeout,
                             TimePoint now) const;
  // The last heartbeat of the most silent connected machine, if any.
  std::optional<TimePoint> EarliestHeartbeat() const;
  // Moves every heartbeat forward by `late` (the coordinator's own stall),
  // capped at `now`, which keeps their order.
  void ExcuseStall(std::chrono::steady_clock::duration late, TimePoint now);

  // When every machine's ranks may be handed out again: the latest end of
  // an old agent's lease and grace.
  TimePoint ReplacementsAllowedAt() const;
  // Whether machines 0..`num_machines`-1 all have their command checked.
  bool AllCommandsChecked(int num_machines) const;
  // Machines a generation would take now: connected, command checked.
  int CountReady() const;
  static bool IsReady(const NodeRecord& node) {
    return node.connected && node.command_checked;
  }

 private:
  std::map<int, NodeRecord> nodes_;
  int connected_ = 0;
  // Connected machines, least recently heard first: the silent ones are
  // found at the front, and the next heartbeat deadline is the front's.
  std::list<int> by_heartbeat_;
  std::set<int> vacant_;
  // The latest old_agent_may_run_until (none: to be found again), and a
  // machine rank below which every machine's command is checked.
  mutable std::optional<TimePoint> replacements_allowed_at_;
  mutable int commands_checked_below_ = 0;
  void NoteCommand(int m, const NodeRecord& node);
};

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_MACHINE_TABLE_H_

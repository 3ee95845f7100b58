// Hot spares (trl-agent --spare, docs/elastic.md): agents that hold no
// ranks and wait to take a machine's place. Each is kept under a key below
// zero (-1, -2, ...), in the order it came; the one that came first and is
// ready (its command checked and usable, its host not cordoned) is taken
// first. The job state machine decides when a spare takes a place and what
// that does to the machine; this pool only admits, hears, drops and hands
// them out. Pure: every call carries `now`.
#ifndef TRL_COORDINATOR_JOB_SPARE_POOL_H_
#define TRL_COORDINATOR_JOB_SPARE_POOL_H_

#include <chrono>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/job/cordon_list.h"
#include "coordinator/job/records.h"

namespace trl {

class SparePool {
 public:
  // At most `max` spares admitted (each costs a little on every tick and
  // in every status: a token holder may not register them without end).
  explicit SparePool(int max) : max_(max) {}

  // Admits `agent` (checked by the caller) as a spare; returns its key.
  // ResourceExhausted at the cap.
  absl::StatusOr<int> Admit(AgentInfo agent, TimePoint now);
  // The same without the cap: a machine's agent made a spare.
  int Add(AgentInfo agent, TimePoint now);

  // Null if `key` is no spare.
  SpareRecord* Find(int key);
  void Heard(int key, TimePoint now);
  void Erase(int key) { spares_.erase(key); }
  // The spare that came first of those ready to take a place.
  std::optional<int> NextReady(const CordonList& cordons) const;
  // Out of the pool, to take a place.
  SpareRecord Take(int key);

  // The coordinator's own stall of `late`: every spare's silence is
  // forgiven as much, capped at `now`.
  void ExcuseStall(TimePoint::duration late, TimePoint now);
  // The spares silent for longer than `timeout`, dropped; their keys.
  std::vector<int> DropSilent(std::chrono::milliseconds timeout, TimePoint now);

  const std::map<int, SpareRecord>& all() const { return spares_; }
  bool empty() const { return spares_.empty(); }
  size_t size() const { return spares_.size(); }

 private:
  int max_;
  int next_key_ = -1;
  std::map<int, SpareRecord> spares_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_SPARE_POOL_H_

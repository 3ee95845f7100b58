// Hosts that fail too often or fail their health checks (docs/elastic.md,
// docs/health.md). Each failure is counted against its host; a host with
// `after` failures within `window` is cordoned, given no ranks, until an
// operator uncordons it (its count then starts again). A host whose agent
// reports a failed health check is cordoned at once, and the cordon ends
// by itself once its agents report it healthy (as Slurm's node health
// check brings back the nodes it drained itself). The job state machine
// decides which failures count (a start short of resources does not) and
// what a cordon means for the machines on that host; this list only counts
// and remembers. Pure: every call carries `now`.
#ifndef TRL_COORDINATOR_JOB_CORDON_LIST_H_
#define TRL_COORDINATOR_JOB_CORDON_LIST_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace trl {

struct Cordon {
  int failures = 0;
  std::string reason;  // the failures' cordon; empty if only unhealthy
  std::string health;  // the failed health check; empty if healthy
  bool ForFailures() const { return !reason.empty(); }
  // What `ps` and the events say.
  std::string Why() const;
};

class CordonList {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // `after` <= 0: never cordon.
  CordonList(int after, std::chrono::milliseconds window)
      : after_(after), window_(window) {}

  // Counts a failure of `host` at `now` (`reason`: what failed, for the
  // cordon's own reason). Returns true if this failure cordoned the host.
  bool NoteFailure(const std::string& host, const std::string& reason,
                   TimePoint now);
  // An agent of `host` found `problem` in its health checks (empty: they
  // pass). Returns true if the host's cordon came or went.
  bool SetHealth(const std::string& host, const std::string& problem);
  bool Unhealthy(const std::string& host) const {
    auto it = cordoned_.find(host);
    return it != cordoned_.end() && !it->second.health.empty();
  }
  bool AnyUnhealthy() const { return unhealthy_ > 0; }
  // NotFound, naming the cordoned hosts, if `host` is not cordoned.
  // Clears a health cordon too (the operator's word: it holds until the
  // host's agents report another change).
  absl::Status Uncordon(const std::string& host);
  bool Cordoned(const std::string& host) const {
    return cordoned_.count(host) > 0;
  }
  // Cordoned host -> its cordon (`host` must be cordoned).
  const Cordon& At(const std::string& host) const { return cordoned_.at(host); }
  const std::map<std::string, Cordon>& cordoned() const { return cordoned_; }
  bool empty() const { return cordoned_.empty(); }
  // For a restarted coordinator: the hosts cordoned before it for their
  // failures (their health comes again with their agents' registrations).
  void Restore(std::map<std::string, Cordon> cordoned);

 private:
  int after_;
  std::chrono::milliseconds window_;
  // Failures within the window, per host not cordoned yet.
  std::map<std::string, std::vector<TimePoint>> failures_;
  std::map<std::string, Cordon> cordoned_;
  int unhealthy_ = 0;  // cordons with a health problem
};

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_CORDON_LIST_H_

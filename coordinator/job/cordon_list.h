// Hosts that fail too often (docs/elastic.md): each failure is counted
// against its host; a host with `after` failures within `window` is
// cordoned, given no ranks, until an operator uncordons it (its count then
// starts again). The job state machine decides which failures count (a
// start short of resources does not) and what a cordon means for the
// machines on that host; this list only counts and remembers. Pure: every
// call carries `now`.
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
  std::string reason;
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
  // NotFound, naming the cordoned hosts, if `host` is not cordoned.
  absl::Status Uncordon(const std::string& host);
  bool Cordoned(const std::string& host) const {
    return cordoned_.count(host) > 0;
  }
  // Cordoned host -> its cordon (`host` must be cordoned).
  const Cordon& At(const std::string& host) const { return cordoned_.at(host); }
  const std::map<std::string, Cordon>& cordoned() const { return cordoned_; }
  bool empty() const { return cordoned_.empty(); }
  // For a restarted coordinator: the hosts cordoned before it.
  void Restore(std::map<std::string, Cordon> cordoned) {
    cordoned_ = std::move(cordoned);
  }

 private:
  int after_;
  std::chrono::milliseconds window_;
  // Failures within the window, per host not cordoned yet.
  std::map<std::string, std::vector<TimePoint>> failures_;
  std::map<std::string, Cordon> cordoned_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_JOB_CORDON_LIST_H_

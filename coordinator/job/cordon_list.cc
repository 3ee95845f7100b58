#include "coordinator/job/cordon_list.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace trl {

std::string Cordon::Why() const {
  if (health.empty()) return reason;
  const std::string unhealthy = absl::StrCat("health check failed: ", health);
  return reason.empty() ? unhealthy : absl::StrCat(unhealthy, "; ", reason);
}

bool CordonList::NoteFailure(const std::string& host, const std::string& reason,
                             TimePoint now) {
  if (after_ <= 0 || host.empty()) return false;
  auto existing = cordoned_.find(host);
  if (existing != cordoned_.end() && existing->second.ForFailures()) {
    return false;
  }
  std::vector<TimePoint>& times = failures_[host];
  times.push_back(now);
  const TimePoint since = now - window_;
  times.erase(std::remove_if(times.begin(), times.end(),
                             [&](TimePoint at) { return at < since; }),
              times.end());
  if (static_cast<int>(times.size()) < after_) return false;
  Cordon& cordon = cordoned_[host];  // an unhealthy host's keeps its health
  cordon.failures = static_cast<int>(times.size());
  cordon.reason = absl::StrFormat(
      "%d failures within %.0f s, the last: %s", cordon.failures,
      std::chrono::duration<double>(window_).count(), reason);
  failures_.erase(host);
  return true;
}

bool CordonList::SetHealth(const std::string& host,
                           const std::string& problem) {
  auto it = cordoned_.find(host);
  if (problem.empty()) {
    if (it == cordoned_.end() || it->second.health.empty()) return false;
    --unhealthy_;
    if (it->second.ForFailures()) {
      it->second.health.clear();
      return false;  // still cordoned for its failures
    }
    cordoned_.erase(it);
    return true;
  }
  if (it == cordoned_.end()) {
    cordoned_[host].health = problem;
    ++unhealthy_;
    return true;
  }
  if (it->second.health.empty()) ++unhealthy_;
  it->second.health = problem;
  return false;
}

void CordonList::Restore(std::map<std::string, Cordon> cordoned) {
  cordoned_.clear();
  unhealthy_ = 0;
  for (auto& [host, cordon] : cordoned) {
    cordon.health.clear();
    if (cordon.ForFailures()) cordoned_[host] = std::move(cordon);
  }
}

absl::Status CordonList::Uncordon(const std::string& host) {
  auto it = cordoned_.find(host);
  if (it == cordoned_.end()) {
    std::vector<std::string> hosts;
    for (const auto& [cordoned, cordon] : cordoned_) hosts.push_back(cordoned);
    return absl::NotFoundError(
        absl::StrCat("host ", host, " is not cordoned (cordoned: ",
                     hosts.empty() ? "none" : absl::StrJoin(hosts, ", "), ")"));
  }
  if (!it->second.health.empty()) --unhealthy_;
  cordoned_.erase(it);
  failures_.erase(host);  // its count starts again
  return absl::OkStatus();
}

}  // namespace trl

#include "coordinator/job/cordon_list.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace trl {

bool CordonList::NoteFailure(const std::string& host, const std::string& reason,
                             TimePoint now) {
  if (after_ <= 0 || host.empty() || cordoned_.count(host)) return false;
  std::vector<TimePoint>& times = failures_[host];
  times.push_back(now);
  const TimePoint since = now - window_;
  times.erase(std::remove_if(times.begin(), times.end(),
                             [&](TimePoint at) { return at < since; }),
              times.end());
  if (static_cast<int>(times.size()) < after_) return false;
  Cordon cordon;
  cordon.failures = static_cast<int>(times.size());
  cordon.reason = absl::StrFormat(
      "%d failures within %.0f s, the last: %s", cordon.failures,
      std::chrono::duration<double>(window_).count(), reason);
  cordoned_[host] = std::move(cordon);
  failures_.erase(host);
  return true;
}

absl::Status CordonList::Uncordon(const std::string& host) {
  if (cordoned_.erase(host) == 0) {
    std::vector<std::string> hosts;
    for (const auto& [cordoned, cordon] : cordoned_) hosts.push_back(cordoned);
    return absl::NotFoundError(
        absl::StrCat("host ", host, " is not cordoned (cordoned: ",
                     hosts.empty() ? "none" : absl::StrJoin(hosts, ", "), ")"));
  }
  failures_.erase(host);  // its count starts again
  return absl::OkStatus();
}

}  // namespace trl

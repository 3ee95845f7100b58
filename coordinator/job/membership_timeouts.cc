#include "coordinator/job/membership_timeouts.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace trl {

MembershipTimeouts::MembershipTimeouts(JobSettings settings,
                                       TimePoint created_at)
    : settings_(std::move(settings)), created_at_(created_at) {}

std::optional<std::chrono::steady_clock::duration> MembershipTimeouts::OwnStall(
    TimePoint now) {
  const auto interval = settings_.tick_interval;
  const std::optional<TimePoint> last = last_tick_;
  last_tick_ = std::max(now, last.value_or(now));
  if (interval.count() <= 0 || !last || now <= *last) return std::nullopt;
  // Late by more than a tick (or 250 ms, for a loaded machine): stalled.
  const auto slack = std::max<std::chrono::steady_clock::duration>(
      interval, std::chrono::milliseconds(250));
  const auto late = (now - *last) - interval;
  if (late <= slack) return std::nullopt;
  stalls_excused_ += late;
  return late;
}

std::vector<std::pair<int, std::string>> MembershipTimeouts::Silent(
    const MachineTable& machines, TimePoint now) const {
  std::vector<std::pair<int, std::string>> silent;
  for (int m : machines.SilentFor(settings_.agent_heartbeat_timeout, now)) {
    const double seconds =
        std::chrono::duration<double>(now - machines.at(m).last_heartbeat)
            .count();
    silent.emplace_back(
        m, absl::StrFormat("sent no heartbeat for %.1f s", seconds));
  }
  return silent;
}

std::optional<FailureRecord> MembershipTimeouts::Overdue(
    const JobMembership& membership, JobPhase phase, int64_t generation,
    TimePoint now) const {
  if (std::optional<std::string> why =
          RegistrationOverdue(membership, phase, now)) {
    FailureRecord failure;
    failure.reason = std::move(*why);
    return failure;
  }
  if (auto overdue = RejoinOverdue(membership, phase, now)) {
    return membership.MachineFailure(generation, overdue->first,
                                     std::move(overdue->second));
  }
  return std::nullopt;
}

std::optional<std::string> MembershipTimeouts::RegistrationOverdue(
    const JobMembership& membership, JobPhase phase, TimePoint now) const {
  if (phase != JobPhase::kWaitingForAgents ||
      now - created_at_ <= settings_.registration_timeout) {
    return std::nullopt;
  }
  std::vector<std::string> missing;
  for (int m = 0; m < settings_.num_machines; ++m) {
    if (!membership.machines().contains(m)) {
      missing.push_back(std::to_string(m));
    }
  }
  // An elastic job needs only MIN of them.
  if (missing.empty() ||
      membership.machines().size() >= settings_.MinMachines()) {
    return std::nullopt;
  }
  return absl::StrCat(
      "machine(s) ", absl::StrJoin(missing, ", "), " did not register within ",
      settings_.registration_timeout.count() / 1000.0, " s",
      settings_.Elastic() ? absl::StrCat(" (the job needs at least ",
                                         settings_.MinMachines(), ")")
                          : "");
}

std::optional<std::pair<int, std::string>> MembershipTimeouts::RejoinOverdue(
    const JobMembership& membership, JobPhase phase, TimePoint now) const {
  // An elastic job goes on without lost machines while MIN are ready.
  const MachineTable& machines = membership.machines();
  if (phase != JobPhase::kRestarting || now <= rejoin_deadline_ ||
      (settings_.Elastic() &&
       membership.CountReady() >= settings_.MinMachines())) {
    return std::nullopt;
  }
  for (const auto& [m, node] : machines.all()) {
    if (node.connected) continue;
    return std::make_pair(
        m, absl::StrCat("machine ", m, " (host ", node.info.hostname, ") ",
                        node.lost_reason, " and did not rejoin within ",
                        settings_.rejoin_timeout.count() / 1000.0, " s",
                        settings_.Elastic()
                            ? absl::StrCat(" (", membership.CountReady(),
                                           " machines left; the job needs "
                                           "at least ",
                                           settings_.MinMachines(), ")")
                            : ""));
  }
  return std::nullopt;
}

std::optional<TimePoint> MembershipTimeouts::Next(
    const JobMembership& membership, JobPhase phase, TimePoint now) const {
  std::optional<TimePoint> next;
  auto consider = [&](TimePoint at) {
    if (at > now && (!next || at < *next)) next = at;
  };
  const MachineTable& machines = membership.machines();
  if (phase == JobPhase::kWaitingForAgents) {
    consider(created_at_ + settings_.registration_timeout + kPast);
    const auto& hold = membership.elastic().hold_until();
    if (hold) consider(*hold);
    consider(machines.ReplacementsAllowedAt());  // a resumed job's old agents
  }
  if (phase == JobPhase::kRestarting) {
    consider(rejoin_deadline_ + kPast);
    consider(machines.ReplacementsAllowedAt());
  }
  const auto timeout = settings_.agent_heartbeat_timeout;
  const std::optional<TimePoint> earliest = machines.EarliestHeartbeat();
  if (timeout.count() > 0 && phase != JobPhase::kWaitingForAgents &&
      !IsFinished(phase) && earliest) {
    consider(*earliest + timeout + kPast);  // silence of the timeout is OK
  }
  if (timeout.count() > 0 && !IsFinished(phase)) {
    for (const auto& [key, spare] : membership.spares().all()) {
      consider(spare.last_heartbeat + timeout + kPast);
    }
  }
  return next;
}

}  // namespace trl

#include "agent/core/hang_watch.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace trl {

namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

std::chrono::milliseconds HangSettings::SamplePeriod() const {
  std::chrono::milliseconds shortest = std::chrono::hours(1);
  for (auto timeout : {output_timeout, cpu_timeout, heartbeat_timeout}) {
    if (timeout.count() > 0) shortest = std::min(shortest, timeout);
  }
  return std::clamp<std::chrono::milliseconds>(shortest / 10,
                                               std::chrono::milliseconds(100),
                                               std::chrono::milliseconds(5000));
}

HangWatch::HangWatch(HangSettings settings, const std::vector<int>& local_ranks,
                     Time start)
    : settings_(settings), last_output_(start) {
  for (int local : local_ranks) {
    Watched& w = workers_[local];
    w.cpu_since = start;
    w.last_heartbeat = start;
  }
}

void HangWatch::Sample(int local_rank, const WorkerSample& sample, Time now) {
  auto it = workers_.find(local_rank);
  if (it == workers_.end() || it->second.exited) return;
  Watched& w = it->second;
  const bool printed = sample.output_bytes != w.output_bytes;
  if (printed) {
    w.output_bytes = sample.output_bytes;
    last_output_ = now;
  }
  if (sample.cpu_seconds) {
    // A total that fell (a child's time left the tree with it: reparented
    // to the subreaper) says nothing of idleness: the window starts again.
    if (!w.cpu_at_since || printed || *sample.cpu_seconds < *w.cpu_at_since) {
      // A worker that prints is not idle, however little CPU that takes.
      // The first reading opens the window; the time before it counts as
      // idle only from here.
      w.cpu_at_since = sample.cpu_seconds;
      w.cpu_since = now;
    } else {
      // Busier than the idle share over a whole window: it works; the
      // window starts again from here.
      const double allowance =
          settings_.idle_cpu_share *
          Seconds(std::max<std::chrono::steady_clock::duration>(
              settings_.cpu_timeout, now - w.cpu_since));
      if (*sample.cpu_seconds - *w.cpu_at_since > allowance) {
        w.cpu_at_since = sample.cpu_seconds;
        w.cpu_since = now;
      }
    }
  }
  if (sample.heartbeat_mtime_ns &&
      sample.heartbeat_mtime_ns != w.heartbeat_mtime_ns) {
    w.heartbeat_mtime_ns = sample.heartbeat_mtime_ns;
    w.last_heartbeat = now;
  }
}

void HangWatch::Exited(int local_rank) {
  auto it = workers_.find(local_rank);
  if (it != workers_.end()) it->second.exited = true;
}

std::optional<Hang> HangWatch::Check(Time now) {
  if (said_) return std::nullopt;
  std::optional<Hang> hang = CheckHeartbeat(now);
  if (!hang) hang = CheckCpu(now);
  if (!hang) hang = CheckOutput(now);
  if (hang) said_ = true;
  return hang;
}

std::optional<Hang> HangWatch::CheckOutput(Time now) const {
  if (settings_.output_timeout.count() <= 0) return std::nullopt;
  const auto silent = now - last_output_;
  if (silent < settings_.output_timeout) return std::nullopt;
  Hang hang;
  hang.detector = "output";
  for (const auto& [local, w] : workers_) {
    if (!w.exited) hang.local_ranks.push_back(local);
  }
  if (hang.local_ranks.empty()) return std::nullopt;
  hang.reason = absl::StrFormat(
      "hung: no output from any rank of this machine for %.1f s "
      "(--hang_output_timeout %g)",
      Seconds(silent), settings_.output_timeout.count() / 1000.0);
  return hang;
}

std::optional<Hang> HangWatch::CheckCpu(Time now) const {
  if (settings_.cpu_timeout.count() <= 0) return std::nullopt;
  Hang hang;
  std::chrono::steady_clock::duration idle{};
  for (const auto& [local, w] : workers_) {
    if (w.exited || !w.cpu_at_since) continue;
    if (now - w.cpu_since >= settings_.cpu_timeout) {
      hang.local_ranks.push_back(local);
      idle = std::max(idle, now - w.cpu_since);
    }
  }
  if (hang.local_ranks.empty()) return std::nullopt;
  hang.detector = "cpu";
  hang.reason = absl::StrFormat(
      "hung: its processes used less than %g%% of a core for %.1f s "
      "(--hang_cpu_timeout %g)",
      settings_.idle_cpu_share * 100, Seconds(idle),
      settings_.cpu_timeout.count() / 1000.0);
  return hang;
}

std::optional<Hang> HangWatch::CheckHeartbeat(Time now) const {
  if (settings_.heartbeat_timeout.count() <= 0) return std::nullopt;
  Hang hang;
  std::chrono::steady_clock::duration silent{};
  for (const auto& [local, w] : workers_) {
    if (w.exited) continue;
    if (now - w.last_heartbeat > settings_.heartbeat_timeout) {
      hang.local_ranks.push_back(local);
      silent = std::max(silent, now - w.last_heartbeat);
    }
  }
  if (hang.local_ranks.empty()) return std::nullopt;
  hang.detector = "heartbeat_file";
  hang.reason = absl::StrFormat(
      "hung: no heartbeat in TRL_HEARTBEAT_FILE for %.1f s (timeout %.1f s)",
      Seconds(silent), settings_.heartbeat_timeout.count() / 1000.0);
  return hang;
}

}  // namespace trl

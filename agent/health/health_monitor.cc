#include "agent/health/health_monitor.h"

#include <system_error>
#include <utility>

namespace trl {

HealthMonitor::HealthMonitor(HealthCheckOptions options,
                             std::chrono::milliseconds interval)
    : options_(std::move(options)), interval_(interval) {}

HealthMonitor::~HealthMonitor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wakeup_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string HealthMonitor::CheckNow() {
  std::string verdict = CheckNodeHealth(options_);
  std::lock_guard<std::mutex> lock(mutex_);
  latest_ = verdict;
  return verdict;
}

bool HealthMonitor::Start(std::function<void(const std::string&)> on_change) {
  if (interval_.count() <= 0 || thread_.joinable()) return true;
  on_change_ = std::move(on_change);
  try {
    thread_ = std::thread([this] { Loop(); });
  } catch (const std::system_error&) {
    return false;  // out of threads (EAGAIN): the caller says so
  }
  return true;
}

std::string HealthMonitor::Latest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return latest_;
}

void HealthMonitor::Loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (wakeup_.wait_for(lock, interval_, [this] { return stopping_; })) {
        return;
      }
    }
    std::string verdict = CheckNodeHealth(options_);
    bool changed = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      changed = verdict != latest_;
      latest_ = verdict;
    }
    if (changed && on_change_) on_change_(verdict);
  }
}

}  // namespace trl

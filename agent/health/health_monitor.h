// The agent's node health checks over its life (agent/health/node_health.h):
// once when it starts, before it first registers, then every interval on a
// thread of its own; a change of the verdict is handed to `on_change`
// (which tells the coordinator). Spans the agent's sessions.
#ifndef TRL_AGENT_HEALTH_HEALTH_MONITOR_H_
#define TRL_AGENT_HEALTH_HEALTH_MONITOR_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "agent/health/node_health.h"

namespace trl {

class HealthMonitor {
 public:
  HealthMonitor(HealthCheckOptions options, std::chrono::milliseconds interval);
  ~HealthMonitor();  // stops the thread (a running check ends at its bound)

  // Checks now, on the calling thread; returns the verdict (also Latest).
  std::string CheckNow();
  // Checks every interval from now on (none if the interval is 0); a new
  // verdict goes to `on_change`, on the monitor's thread. False if no
  // thread could be made for it (the checks ran once, at CheckNow).
  bool Start(std::function<void(const std::string&)> on_change);
  // The last verdict: empty if healthy.
  std::string Latest() const;

 private:
  void Loop();

  const HealthCheckOptions options_;
  const std::chrono::milliseconds interval_;
  std::function<void(const std::string&)> on_change_;
  mutable std::mutex mutex_;
  std::condition_variable wakeup_;
  bool stopping_ = false;  // guarded by mutex_
  std::string latest_;     // guarded by mutex_
  std::thread thread_;
};

}  // namespace trl

#endif  // TRL_AGENT_HEALTH_HEALTH_MONITOR_H_

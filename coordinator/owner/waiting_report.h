// Nothing waits in silence: while the job waits for its machines, every
// `interval` the coordinator says which it still waits for, how long it
// has, when the wait ends, and what to run on them. Pure: the owner asks
// on each tick (at least every second).
#ifndef TRL_COORDINATOR_OWNER_WAITING_REPORT_H_
#define TRL_COORDINATOR_OWNER_WAITING_REPORT_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/accelerate_config.h"
#include "common/launch_options.h"
#include "coordinator/job/records.h"

namespace trl {

// The command to run on machine N, as `trl-coord start` was told to run
// the job: the same config file (or --num_machines and --num_processes),
// the coordinator's address and port, and "--machine_rank N".
std::string AgentCommandFor(const LaunchOptions& launch,
                            const AccelerateConfig& config);

class WaitingReport {
 public:
  // `interval` zero: never said. `agent_command` ends in "--machine_rank".
  WaitingReport(std::chrono::milliseconds interval, std::string agent_command,
                std::chrono::milliseconds wait_ends_after);

  // The line to log now, if one is due. `waiting`: the job waits for
  // machines to register (its first generation); `missing`: the machine
  // ranks not here; `needed`: how many must be (num_machines, or an
  // elastic job's minimum).
  std::optional<std::string> Due(bool waiting, const std::vector<int>& missing,
                                 int needed, int num_machines, TimePoint now);

 private:
  const std::chrono::milliseconds interval_;
  const std::string agent_command_;
  const std::chrono::milliseconds wait_ends_after_;
  std::optional<TimePoint> since_;
  TimePoint next_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_WAITING_REPORT_H_

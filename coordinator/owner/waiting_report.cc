#include "coordinator/owner/waiting_report.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace trl {

std::string AgentCommandFor(const LaunchOptions& launch,
                            const AccelerateConfig& config) {
  std::string command = "trl-agent";
  if (!launch.config_file.empty()) {
    absl::StrAppend(&command, " --config_file ", launch.config_file);
  } else {
    absl::StrAppend(&command, " --num_machines ", config.num_machines,
                    " --num_processes ", config.num_processes);
  }
  absl::StrAppend(&command, " --main_process_ip ", config.main_process_ip,
                  " --main_process_port ", config.main_process_port,
                  " --machine_rank");
  return command;
}

WaitingReport::WaitingReport(std::chrono::milliseconds interval,
                             std::string agent_command,
                             std::chrono::milliseconds wait_ends_after)
    : interval_(interval),
      agent_command_(std::move(agent_command)),
      wait_ends_after_(wait_ends_after) {}

std::optional<std::string> WaitingReport::Due(bool waiting,
                                              const std::vector<int>& missing,
                                              int needed, int num_machines,
                                              TimePoint now) {
  if (!waiting || interval_.count() <= 0) {
    since_.reset();
    return std::nullopt;
  }
  if (!since_) {
    since_ = now;
    next_ = now + interval_;
    return std::nullopt;
  }
  if (now < next_ || missing.empty()) return std::nullopt;
  next_ = now + interval_;
  const long waited =
      std::lround(std::chrono::duration<double>(now - *since_).count());
  const long left = std::lround(
      std::chrono::duration<double>(*since_ + wait_ends_after_ - now).count());
  std::string line = absl::StrCat(
      "still waiting for machine", missing.size() == 1 ? " " : "s ",
      absl::StrJoin(missing, ", "), " of ", num_machines);
  if (needed < num_machines) {
    absl::StrAppend(&line, " (", needed, " needed to start)");
  }
  absl::StrAppend(&line, " after ", waited, " s; the wait ends in ",
                  std::max(0L, left), " s (--rdzv_timeout). On ",
                  missing.size() == 1 ? "its host" : "each one's host",
                  ", run: ", agent_command_, " ",
                  missing.size() == 1 ? absl::StrCat(missing.front()) : "N");
  return line;
}

}  // namespace trl

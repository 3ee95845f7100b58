#include "coordinator/job/records.h"

#include <string.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace trl {

const char* JobPhaseName(JobPhase phase) {
  switch (phase) {
    case JobPhase::kWaitingForAgents:
      return "waiting_for_agents";
    case JobPhase::kRunning:
      return "running";
    case JobPhase::kStopping:
      return "stopping";
    case JobPhase::kRestarting:
      return "restarting";
    case JobPhase::kSucceeded:
      return "succeeded";
    case JobPhase::kFailed:
      return "failed";
    case JobPhase::kStopped:
      return "stopped";
  }
  return "unknown";
}

bool IsFinished(JobPhase phase) {
  return phase == JobPhase::kSucceeded || phase == JobPhase::kFailed ||
         phase == JobPhase::kStopped;
}

const char* RankStateName(RankState state) {
  switch (state) {
    case RankState::kPending:
      return "pending";
    case RankState::kRunning:
      return "running";
    case RankState::kSucceeded:
      return "succeeded";
    case RankState::kFailed:
      return "failed";
    case RankState::kStopped:
      return "stopped";
    case RankState::kLost:
      return "lost";
  }
  return "unknown";
}

std::string WorkerExit::Describe() const {
  if (!start_error.empty())
    return absl::StrCat("could not start: ", start_error);
  if (!reason.empty()) return reason;
  if (signal != 0) {
    const char* name = sigabbrev_np(signal);
    return absl::StrCat("was killed by signal ", signal,
                        name ? absl::StrCat(" (SIG", name, ")") : "");
  }
  return absl::StrCat("exited with code ", exit_code);
}

int WorkerExit::LauncherExitCode() const {
  if (!start_error.empty()) return 127;
  if (signal != 0) return 128 + signal;
  return exit_code;
}

absl::Status CheckAgentFitsJob(const AgentInfo& agent,
                               const JobSettings& settings) {
  std::vector<std::string> differences;
  for (const auto& [key, expected] : settings.config_fingerprint) {
    auto found = agent.config_fingerprint.find(key);
    const std::string actual =
        found == agent.config_fingerprint.end() ? "<unset>" : found->second;
    if (actual != expected) {
      differences.push_back(absl::StrCat(key, " is ", actual,
                                         " on the agent but ", expected,
                                         " on the coordinator"));
    }
  }
  if (!differences.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the agent's config differs from the coordinator's: ",
                     absl::StrJoin(differences, "; ")));
  }
  if (agent.local_world_size < 1 ||
      (settings.local_world_size > 0 &&
       agent.local_world_size != settings.local_world_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("local_world_size ", agent.local_world_size, " must be ",
                     settings.local_world_size > 0
                         ? std::to_string(settings.local_world_size)
                         : std::string("at least 1"),
                     " (num_processes / num_machines)"));
  }
  return absl::OkStatus();
}

}  // namespace trl

// `trl-coord events`: the job's history (registrations, generations, lost
// and rejoined machines, stops and their cause, the end), read from the
// file the coordinator keeps beside its state file. Run on the
// coordinator's machine, during the job or after it; from elsewhere, the
// status page serves the same as /api/events.
#ifndef TRL_COORDINATOR_CLI_EVENTS_H_
#define TRL_COORDINATOR_CLI_EVENTS_H_

#include <string>

#include "absl/status/statusor.h"

namespace CLI {
class App;
}

namespace trl {

struct EventsFlags {
  std::string config_file;
  std::string state_file;  // overrides the config's default
  bool json = false;
};

void AddEventsFlags(CLI::App& app, EventsFlags& flags);

// The events file of the job whose state is kept in `state_file`, else of
// the coordinator of `config_file` (main_process_ip:port) on this machine;
// an error names what could not be resolved.
absl::StatusOr<std::string> JobEventsFile(const std::string& config_file,
                                          const std::string& state_file);

// Returns the process exit code: 0, 1 when no history is kept there, 2 for
// bad flags or config.
int RunEvents(const EventsFlags& flags);

}  // namespace trl

#endif  // TRL_COORDINATOR_CLI_EVENTS_H_

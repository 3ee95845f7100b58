// `trl-coord events`: the job's history (registrations, generations, lost
// and rejoined machines, stops and their cause, the end). Read from the
// file the coordinator keeps beside its state file when this machine has
// it (during the job or after it), else asked of the running coordinator
// over the network, with the token, as `ps` asks (and always with
// --address). The job is named as for every command: --config_file with
// the --main_process_ip/--main_process_port overrides, or --address.
#ifndef TRL_COORDINATOR_CLI_EVENTS_H_
#define TRL_COORDINATOR_CLI_EVENTS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/cli/coordinator_client.h"
#include "proto/trl_launch.pb.h"

namespace CLI {
class App;
}

namespace trl {

struct EventsFlags {
  CoordinatorConnectionFlags connection;
  std::string state_file;  // overrides the config's default
  bool json = false;
  double timeout_s = 10;
};

void AddEventsFlags(CLI::App& app, EventsFlags& flags);

// The events file of the job whose state is kept in `state_file`, else of
// the coordinator the flags name (main_process_ip:port) on this machine;
// an error names what could not be resolved.
absl::StatusOr<std::string> JobEventsFile(
    const CoordinatorConnectionFlags& connection,
    const std::string& state_file);

// A job's events and where they were found ("FILE", or "the coordinator
// at ADDRESS"); or, when none could be had, the exit code (1: no history
// here and no coordinator answered; 2: bad flags, config or token) and
// what went wrong.
struct JobEventsLookup {
  std::optional<launch::v1::JobEvents> events;
  std::string from;
  int exit_code = 0;
  std::string error;
};
JobEventsLookup LookUpJobEvents(const CoordinatorConnectionFlags& connection,
                                const std::string& state_file,
                                double timeout_s);

// "12 s", "5 min", "3 h", "2 days": how long ago `unix_ms` was.
std::string AgeOf(int64_t unix_ms);

// Returns the process exit code: 0, 1 when no history could be read, 2 for
// bad flags or config.
int RunEvents(const EventsFlags& flags);

}  // namespace trl

#endif  // TRL_COORDINATOR_CLI_EVENTS_H_

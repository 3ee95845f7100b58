// `trl-coord ps`: asks a running coordinator for the job's status and
// prints it as a table or as JSON.
#ifndef TRL_COORDINATOR_CLI_PS_H_
#define TRL_COORDINATOR_CLI_PS_H_

#include <string>

#include "coordinator/cli/coordinator_client.h"

namespace CLI {
class App;
}

namespace trl {

struct PsFlags {
  CoordinatorConnectionFlags connection;
  bool json = false;
  bool every_row = false;  // --ranks
  bool summary = false;    // --summary
  double timeout_s = 5;
};

void AddPsFlags(CLI::App& app, PsFlags& flags);

// Returns the process exit code: 0, 1 when the coordinator cannot be
// reached, 2 for bad flags or config.
int RunPs(const PsFlags& flags);

}  // namespace trl

#endif  // TRL_COORDINATOR_CLI_PS_H_

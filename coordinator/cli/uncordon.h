// `trl-coord uncordon HOST`: tells a running coordinator that a host it
// cordoned (too many failures within --cordon_window) may be given ranks
// again.
#ifndef TRL_COORDINATOR_CLI_UNCORDON_H_
#define TRL_COORDINATOR_CLI_UNCORDON_H_

#include <string>

#include "coordinator/cli/coordinator_client.h"

namespace CLI {
class App;
}

namespace trl {

struct UncordonFlags {
  CoordinatorConnectionFlags connection;
  std::string hostname;
  double timeout_s = 5;
};

void AddUncordonFlags(CLI::App& app, UncordonFlags& flags);

// Returns the process exit code: 0 when cleared, 1 when the host was not
// cordoned or the coordinator cannot be reached, 2 for bad flags.
int RunUncordon(const UncordonFlags& flags);

}  // namespace trl

#endif  // TRL_COORDINATOR_CLI_UNCORDON_H_

// `trl-coord ui`: the status page of a remote job on the operator's own
// machine. It reaches the coordinator like `trl-coord ps` (the same
// address and credential flags: the token's derived identity, or
// certificates) and serves the same page, /api/status, /api/events and
// /metrics (status/routes.h) on a loopback port of this machine, asking
// the coordinator over gRPC for each request (ui_client.h). No token ever
// travels in a URL, and nothing is served beyond this machine.
#ifndef TRL_COORDINATOR_CLI_UI_H_
#define TRL_COORDINATOR_CLI_UI_H_

#include <string>

#include "coordinator/cli/coordinator_client.h"

namespace CLI {
class App;
}

namespace trl {

struct UiFlags {
  CoordinatorConnectionFlags connection;
  std::string listen_address = "127.0.0.1";  // loopback only
  int port = 0;                              // 0: a free port
  double timeout_s = 5;                      // per call to the coordinator
};

void AddUiFlags(CLI::App& app, UiFlags& flags);

// Serves until SIGINT or SIGTERM, then returns 0. Line 1 of stdout is the
// page's URL (`http://127.0.0.1:PORT/`). Returns 1 when the coordinator
// refuses this side's credentials (checked once, at start), 2 for bad
// flags, config or token, or a port that cannot be bound. A coordinator
// that cannot be reached is not an error: its answers are 503 until it
// can.
int RunUi(const UiFlags& flags);

}  // namespace trl

#endif  // TRL_COORDINATOR_CLI_UI_H_

// The status page and /metrics of `trl-coord start` (routes.h, served by
// http_server.h), from its flags. The page has no authentication of its
// own, so it listens on a loopback address only; a port that cannot be
// bound costs a warning, never the job.
#ifndef TRL_COORDINATOR_STATUS_STATUS_SERVICE_H_
#define TRL_COORDINATOR_STATUS_STATUS_SERVICE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "coordinator/status/http_server.h"
#include "coordinator/status/routes.h"

namespace trl {

struct StatusServiceFlags {
  // -1: main_process_port + 1; 0: a free port.
  int port = -1;
  std::string address = "127.0.0.1";
  bool off = false;  // --no_status
};

// InvalidArgument, saying what to do instead, for an address that is not
// loopback (unless the page is off).
absl::Status CheckStatusAddress(const StatusServiceFlags& flags);

// The server, or null when it is off or its port cannot be bound (a
// warning says why). `sources.nonce` is filled in if unset.
std::unique_ptr<StatusHttpServer> StartStatusService(
    const StatusServiceFlags& flags, int main_process_port,
    StatusSources sources);

}  // namespace trl

#endif  // TRL_COORDINATOR_STATUS_STATUS_SERVICE_H_

#include "coordinator/status/status_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/network.h"
#include "coordinator/status/page.h"

namespace trl {

absl::Status CheckStatusAddress(const StatusServiceFlags& flags) {
  if (flags.off || IsLoopbackIp(flags.address)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--status_address ", flags.address,
      " is not a loopback address (127.0.0.0/8 or ::1): the status page has "
      "no authentication of its own, so it is served on this machine only; "
      "from elsewhere run `trl-coord ui --address HOST:PORT` there (the "
      "daemons' authentication, the page on its loopback), or pass "
      "--no_status"));
}

std::unique_ptr<StatusHttpServer> StartStatusService(
    const StatusServiceFlags& flags, int main_process_port,
    StatusSources sources) {
  auto log = ComponentLogger("coord");
  if (flags.off) return nullptr;
  const int port = flags.port >= 0 ? flags.port : main_process_port + 1;
  if (!sources.nonce) sources.nonce = NewPageNonce;
  auto server =
      port > 65535
          ? absl::StatusOr<std::unique_ptr<StatusHttpServer>>(
                absl::OutOfRangeError(
                    absl::StrCat("port ", port, " is out of range")))
          : StatusHttpServer::Start(
                flags.address, port, [sources](const HttpRequest& request) {
                  return HandleStatusRequest(request, sources);
                });
  if (!server.ok()) {
    log->warn(
        "no status page: {} (the job runs without it; choose another "
        "--status_port, or --no_status)",
        std::string(server.status().message()));
    return nullptr;
  }
  log->info(
      "status page on http://{}/ (JSON at /api/status, Prometheus at "
      "/metrics)",
      JoinHostPort(flags.address, (*server)->port()));
  return *std::move(server);
}

}  // namespace trl

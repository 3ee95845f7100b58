#include "coordinator/cli/ui.h"

#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>

#include "common/network.h"
#include "coordinator/cli/ui_client.h"
#include "coordinator/status/http_server.h"
#include "coordinator/status/routes.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

// As `trl-coord ps`: the whole status of a large job is tens of MB.
constexpr int kMaxStatusBytes = 256 << 20;
// A coordinator that comes back is found again within this.
constexpr int kMaxReconnectBackoffMs = 2000;

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "trl-coord ui: error: %s\n", message.c_str());
  return code;
}

}  // namespace

void AddUiFlags(CLI::App& app, UiFlags& flags) {
  AddAddressFlags(app, flags.connection);
  app.add_option("--port", flags.port,
                 "Port of this machine to serve the page on (default 0: a "
                 "free one; the URL is stdout's first line)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--listen_address,--listen-address", flags.listen_address,
                 "Loopback address to serve the page on (default 127.0.0.1)");
  app.add_option("--timeout", flags.timeout_s,
                 "Seconds to wait for each answer of the coordinator");
  AddCredentialFlags(app, flags.connection);
}

int RunUi(const UiFlags& flags) {
  // The page is served without authentication of its own: to this
  // machine's users only, as the coordinator's own status page.
  if (!IsLoopbackIp(flags.listen_address)) {
    return Fail(2, "--listen_address " + flags.listen_address +
                       " is not a loopback address (127.0.0.0/8 or ::1): "
                       "the page is served to this machine only");
  }
  if (!(flags.timeout_s > 0)) return Fail(2, "--timeout must be positive");
  // SIGINT and SIGTERM end it (main blocks them in every thread already).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  auto connected = ConnectToCoordinator(flags.connection, kMaxStatusBytes,
                                        kMaxReconnectBackoffMs);
  if (!connected.ok())
    return Fail(2, std::string(connected.status().message()));
  auto client =
      std::make_shared<const CoordinatorClient>(*std::move(connected));
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(flags.timeout_s * 1000));
  const StatusSources sources = RemoteStatusSources(client, timeout);
  const ChannelKeeper keeper(client->channel);

  // Once, at start: credentials the coordinator refuses will not get
  // better by retrying. A coordinator not up yet may come.
  pb::JobStatusRequest facts;
  facts.mutable_nodes()->set_limit(0);
  if (auto first = sources.status(facts); !first.ok()) {
    if (absl::IsUnauthenticated(first.status())) {
      return Fail(1, std::string(first.status().message()));
    }
    std::fprintf(stderr, "trl-coord ui: %s\n",
                 std::string(first.status().message()).c_str());
  }

  auto server = StatusHttpServer::Start(
      flags.listen_address, flags.port, [sources](const HttpRequest& request) {
        return HandleStatusRequest(request, sources);
      });
  if (!server.ok()) return Fail(2, std::string(server.status().message()));
  std::printf("http://%s/\n",
              JoinHostPort(flags.listen_address, (*server)->port()).c_str());
  std::fflush(stdout);
  std::fprintf(stderr,
               "trl-coord ui: the status page of the job at %s; Ctrl-C ends "
               "it\n",
               client->address.c_str());

  int signal_number = 0;
  while (sigwait(&stop, &signal_number) != 0) {
  }
  return 0;
}

}  // namespace trl

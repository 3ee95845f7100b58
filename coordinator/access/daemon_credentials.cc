#include "coordinator/access/daemon_credentials.h"

#include "absl/strings/str_cat.h"
#include "common/auth_token.h"
#include "common/daemon_process.h"
#include "common/logging.h"
#include "common/network.h"

namespace trl {

absl::StatusOr<DaemonCredentials> ResolveDaemonCredentials(
    const LaunchOptions& o, const std::string& host) {
  if (o.insecure && !IsLoopbackAddress(host)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--insecure is refused on ", host,
        ": without authentication anyone who reaches the port can run "
        "commands on every node; it is allowed on a loopback address only"));
  }
  DaemonCredentials credentials;
  auto auth_token = ResolveAuthToken(o.auth_token_file, o.insecure,
                                     /*create_if_missing=*/true);
  if (!auth_token.ok()) return auth_token.status();
  credentials.auth_token = *std::move(auth_token);
  ForgetTokenFromEnvironment();
  if (o.insecure)
    ComponentLogger("coord")->warn("no authentication (--insecure)");
  credentials.user_tls = TlsFiles{o.tls_cert, o.tls_key, o.tls_ca};
  if (!o.insecure && !credentials.user_tls.enabled()) {
    auto derived = DeriveIdentity(credentials.auth_token);
    if (!derived.ok()) return derived.status();
    credentials.identity = *std::move(derived);
  }
  auto server = credentials.identity
                    ? absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>>(
                          DerivedServerCredentials(*credentials.identity, true))
                    : ServerCredentials(credentials.user_tls);
  if (!server.ok()) return server.status();
  credentials.server = *std::move(server);
  return credentials;
}

}  // namespace trl

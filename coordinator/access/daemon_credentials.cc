#include "coordinator/access/daemon_credentials.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/auth_token.h"
#include "common/daemon_process.h"
#include "common/logging.h"
#include "common/network.h"

namespace trl {

std::string TokenAdvice(const std::string& token_origin, bool created) {
  if (token_origin == "TRL_AUTH_TOKEN") {
    return "auth token from TRL_AUTH_TOKEN: every agent of this job needs "
           "the same value (in its TRL_AUTH_TOKEN, or in a file given with "
           "--auth_token_file)";
  }
  return absl::StrCat(
      "auth token: ", token_origin, created ? " (created now)" : "",
      ". Every machine of this job needs this same file: copy it (mode "
      "0600) to ~/.trl/token of the user that runs trl-agent there, share "
      "the home directory, or give each agent --auth_token_file");
}

absl::StatusOr<DaemonCredentials> ResolveDaemonCredentials(
    const LaunchOptions& o, const std::string& host) {
  if (o.insecure && !IsLoopbackAddress(host)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--insecure is refused on ", host,
        ": without authentication anyone who reaches the port can run "
        "commands on every node; it is allowed on a loopback address only"));
  }
  DaemonCredentials credentials;
  if (!o.insecure) {
    credentials.token_origin = TokenOrigin(o.auth_token_file);
    credentials.token_created =
        credentials.token_origin == DefaultTokenPath() &&
        access(credentials.token_origin.c_str(), F_OK) != 0;
  }
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

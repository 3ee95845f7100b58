// How `trl-coord start` proves itself and checks its callers, from its
// flags: by default TLS with the identity derived from the token (mutual:
// the token itself never crosses the network); given certificates, TLS
// with them and the token as a bearer over it; --insecure, plaintext on a
// loopback address only. Reads the token (creating it if missing) and
// removes it from the environment that child processes inherit.
#ifndef TRL_COORDINATOR_ACCESS_DAEMON_CREDENTIALS_H_
#define TRL_COORDINATOR_ACCESS_DAEMON_CREDENTIALS_H_

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/derived_identity.h"
#include "common/launch_options.h"
#include "common/tls_credentials.h"

namespace trl {

struct DaemonCredentials {
  std::string auth_token;  // empty under --insecure
  // Where it came from (a path, or TRL_AUTH_TOKEN); whether this start
  // created the file.
  std::string token_origin;
  bool token_created = false;
  // The token's identity (the default); unset with certificates or
  // --insecure.
  std::optional<DerivedIdentity> identity;
  TlsFiles user_tls;  // --tls_cert, --tls_key, --tls_ca
  std::shared_ptr<grpc::ServerCredentials> server;
};

// What `trl-coord start` says about its token: where it is, and that every
// machine needs the same (never the token itself).
std::string TokenAdvice(const std::string& token_origin, bool created);

// `host`: the address the coordinator listens on. InvalidArgument for
// --insecure on an address other than loopback; the token's or the
// certificates' own errors otherwise.
absl::StatusOr<DaemonCredentials> ResolveDaemonCredentials(
    const LaunchOptions& flags, const std::string& host);

}  // namespace trl

#endif  // TRL_COORDINATOR_ACCESS_DAEMON_CREDENTIALS_H_

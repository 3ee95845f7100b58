// The TLS identity every daemon of a job derives from the shared token, so
// that both ends of a connection prove they hold the token without ever
// sending it: an Ed25519 key pair whose private key is HMAC-SHA256 of the
// token, and a self-signed certificate for it (name "trl-launch", fixed
// dates and serial: the same bytes on every machine). Each side presents
// it and trusts only it (pinned): TLS 1.3 mutual authentication then
// proves possession of the private key, hence of the token, in both
// directions, and encrypts everything after the handshake. The token never
// crosses the network, not even to the real coordinator; a peer without it
// fails the handshake and never gets an HTTP/2 stream.
//
// The certificate is public (workers get it to verify the coordinator's
// store); the private key never leaves the daemons.
#ifndef TRL_COMMON_DERIVED_IDENTITY_H_
#define TRL_COMMON_DERIVED_IDENTITY_H_

#include <string>

#include "absl/status/statusor.h"

namespace trl {

// The name in the certificate; clients check the server against it
// (GRPC_SSL_TARGET_NAME_OVERRIDE_ARG) whatever address they dial.
inline constexpr char kDerivedServerName[] = "trl-launch";

struct DerivedIdentity {
  std::string private_key_pem;  // secret: as good as the token
  std::string certificate_pem;  // public
};

// The same identity for the same token, on every machine and every run.
absl::StatusOr<DerivedIdentity> DeriveIdentity(const std::string& token);

}  // namespace trl

#endif  // TRL_COMMON_DERIVED_IDENTITY_H_

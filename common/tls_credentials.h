// TLS and mutual TLS for the coordinator's gRPC port, from PEM files:
// --tls_cert and --tls_key (this daemon's certificate), --tls_ca (the CA
// that signs the peers'). A server given a CA requires and verifies client
// certificates (mutual TLS); a client given a CA verifies the server.
// Without any of them, connections are plaintext (the token still applies).
#ifndef TRL_COMMON_TLS_CREDENTIALS_H_
#define TRL_COMMON_TLS_CREDENTIALS_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace trl {

struct TlsFiles {
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
  bool enabled() const {
    return !cert_file.empty() || !key_file.empty() || !ca_file.empty();
  }
};

// Errors name the file or the flag that is missing or unreadable.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const TlsFiles& files);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const TlsFiles& files);

}  // namespace trl

#endif  // TRL_COMMON_TLS_CREDENTIALS_H_

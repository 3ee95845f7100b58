// TLS and mutual TLS for the coordinator's gRPC port, from PEM files:
// --tls_cert and --tls_key (this daemon's certificate), --tls_ca (the CA
// that signs the peers'). A server given a CA requires and verifies client
// certificates (mutual TLS); a client given a CA verifies the server.
// Without any of them, connections are plaintext (the token still applies).
#ifndef TRL_COMMON_TLS_CREDENTIALS_H_
#define TRL_COMMON_TLS_CREDENTIALS_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/derived_identity.h"

namespace trl {

struct TlsFiles {
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
  bool enabled() const {
    return !cert_file.empty() || !key_file.empty() || !ca_file.empty();
  }
};

// TLS with the identity every daemon derives from the token
// (derived_identity.h): the server presents it and, with
// `require_client_identity`, requires clients to present it too; clients
// trust only it, and present it when they hold the private key (workers
// verify the store with the certificate alone).
std::shared_ptr<grpc::ServerCredentials> DerivedServerCredentials(
    const DerivedIdentity& identity, bool require_client_identity);
std::shared_ptr<grpc::ChannelCredentials> DerivedClientCredentials(
    const DerivedIdentity& identity);
// Clients check the server's certificate against kDerivedServerName,
// whatever address they dial.
void SetDerivedServerName(grpc::ChannelArguments* args);

// How a client (ps, the agent simulator) reaches the coordinator: with
// certificate files, TLS with them and the token as a bearer; with no
// token (--insecure), plaintext; otherwise (the default) TLS with the
// token's derived identity and no bearer.
struct ClientSecurity {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  bool derived_identity = false;  // call SetDerivedServerName on the channel
  std::string bearer_token;       // to send as "authorization", if any
};
absl::StatusOr<ClientSecurity> ClientSecurityFor(const TlsFiles& files,
                                                 const std::string& token);

// Errors name the file or the flag that is missing or unreadable.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const TlsFiles& files);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const TlsFiles& files);

}  // namespace trl

#endif  // TRL_COMMON_TLS_CREDENTIALS_H_

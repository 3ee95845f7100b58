#include "common/tls_credentials.h"

#include <grpcpp/security/server_credentials.h>

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace trl {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& flag,
                                    const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("--", flag, " '", path, "' cannot be read"));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " '", path, "' is not a PEM file"));
  }
  return text.str();
}

}  // namespace

std::shared_ptr<grpc::ServerCredentials> DerivedServerCredentials(
    const DerivedIdentity& identity, bool require_client_identity) {
  grpc::SslServerCredentialsOptions options(
      require_client_identity
          ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
          : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_root_certs = identity.certificate_pem;
  options.pem_key_cert_pairs.push_back(
      {identity.private_key_pem, identity.certificate_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> DerivedClientCredentials(
    const DerivedIdentity& identity) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = identity.certificate_pem;
  if (!identity.private_key_pem.empty()) {
    options.pem_cert_chain = identity.certificate_pem;
    options.pem_private_key = identity.private_key_pem;
  }
  return grpc::SslCredentials(options);
}

void SetDerivedServerName(grpc::ChannelArguments* args) {
  args->SetSslTargetNameOverride(kDerivedServerName);
}

absl::StatusOr<ClientSecurity> ClientSecurityFor(const TlsFiles& files,
                                                 const std::string& token) {
  ClientSecurity security;
  if (files.enabled() || token.empty()) {
    auto credentials = ClientCredentials(files);
    if (!credentials.ok()) return credentials.status();
    security.credentials = *credentials;
    security.bearer_token = token;
    return security;
  }
  auto identity = DeriveIdentity(token);
  if (!identity.ok()) return identity.status();
  security.credentials = DerivedClientCredentials(*identity);
  security.derived_identity = true;
  return security;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const TlsFiles& files) {
  if (!files.enabled()) return grpc::InsecureServerCredentials();
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS on the coordinator needs both --tls_cert and --tls_key");
  }
  auto cert = ReadPem("tls_cert", files.cert_file);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("tls_key", files.key_file);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!files.ca_file.empty()) {
    auto ca = ReadPem("tls_ca", files.ca_file);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const TlsFiles& files) {
  if (!files.enabled()) return grpc::InsecureChannelCredentials();
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs both --tls_cert and --tls_key");
  }
  grpc::SslCredentialsOptions options;
  if (!files.ca_file.empty()) {
    auto ca = ReadPem("tls_ca", files.ca_file);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
  }
  if (!files.cert_file.empty()) {
    auto cert = ReadPem("tls_cert", files.cert_file);
    if (!cert.ok()) return cert.status();
    auto key = ReadPem("tls_key", files.key_file);
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *cert;
    options.pem_private_key = *key;
  }
  return grpc::SslCredentials(options);
}

}  // namespace trl

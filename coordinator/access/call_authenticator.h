// Checks a call's credential on its headers, before gRPC reads its body:
// a caller without the token (or, on the store, without the current
// generation's credential) never reaches a handler, nor gets a buffer for a
// message of up to 4 MiB sent as slowly as it likes. Installed on the
// credentials of the ports where TLS alone does not prove the caller: the
// main port with certificates of your own (the token travels as a bearer
// inside their TLS), and the workers' store port. (With the token's derived
// identity, the main port's mutual TLS already refuses a stranger before
// HTTP/2 starts.)
#ifndef TRL_COORDINATOR_ACCESS_CALL_AUTHENTICATOR_H_
#define TRL_COORDINATOR_ACCESS_CALL_AUTHENTICATOR_H_

#include <grpcpp/security/auth_metadata_processor.h>

#include <functional>
#include <string>

#include "coordinator/access/refused_calls.h"

namespace trl {

class CallAuthenticator : public grpc::AuthMetadataProcessor {
 public:
  // `expected_bearer`: "Bearer TOKEN" for the calls that are not the
  // store's; empty: only store calls are taken on this port.
  // `store_token_ok`: whether a store call's bearer token is the current
  // generation's.
  CallAuthenticator(std::string expected_bearer,
                    std::function<bool(const std::string&)> store_token_ok);

  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata,
                       grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

  // The path prefix of the store's calls.
  static constexpr char kStorePrefix[] = "/trl.launch.v1.Store/";

 private:
  const std::string expected_bearer_;
  const std::function<bool(const std::string&)> store_token_ok_;
  RefusedCallLog refused_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_ACCESS_CALL_AUTHENTICATOR_H_

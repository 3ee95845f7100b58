#include "coordinator/access/call_authenticator.h"

#include "common/auth_token.h"

namespace trl {

namespace {

std::string ValueOf(const grpc::AuthMetadataProcessor::InputMetadata& metadata,
                    const std::string& key) {
  auto found = metadata.find(key);
  if (found == metadata.end()) return "";
  return std::string(found->second.data(), found->second.size());
}

}  // namespace

CallAuthenticator::CallAuthenticator(
    std::string expected_bearer,
    std::function<bool(const std::string&)> store_token_ok)
    : expected_bearer_(std::move(expected_bearer)),
      store_token_ok_(std::move(store_token_ok)) {}

grpc::Status CallAuthenticator::Process(const InputMetadata& auth_metadata,
                                        grpc::AuthContext* context,
                                        OutputMetadata* consumed_auth_metadata,
                                        OutputMetadata* response_metadata) {
  (void)context;
  (void)consumed_auth_metadata;
  (void)response_metadata;
  const std::string path = ValueOf(auth_metadata, ":path");
  const std::string given = ValueOf(auth_metadata, kAuthMetadataKey);
  const char* problem = nullptr;
  if (path.rfind(kStorePrefix, 0) == 0) {
    const std::string prefix = "Bearer ";
    if (given.rfind(prefix, 0) != 0 || !store_token_ok_ ||
        !store_token_ok_(given.substr(prefix.size()))) {
      problem = "no credential of the current generation";
    }
  } else if (expected_bearer_.empty()) {
    problem = "this port serves the workers' store only";
  } else if (given.empty()) {
    problem = "no auth token";
  } else if (!TokensEqual(expected_bearer_, given)) {
    problem = "wrong auth token";
  }
  if (problem == nullptr) return grpc::Status::OK;
  refused_.Log("an unproven caller (" + path + ")", problem);
  return grpc::Status(
      grpc::StatusCode::UNAUTHENTICATED,
      std::string(problem) + " (refused on its headers, before its body)");
}

}  // namespace trl

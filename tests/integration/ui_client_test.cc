// How `trl-coord ui` reads a failed call: a credential the coordinator
// does not take (the ui exits 1 at start; 502 later) against a coordinator
// that cannot be reached now (503, tried again). gRPC 1.51 reports a
// failed TLS handshake as UNAVAILABLE, in words only.
#include "coordinator/cli/ui_client.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

TEST(UiClientTest, AFailedHandshakeIsACredentialMismatchARefusedConnectNot) {
  const grpc::Status wrong_token(
      grpc::StatusCode::UNAVAILABLE,
      "failed to connect to all addresses; last error: UNAVAILABLE: "
      "ipv4:127.0.0.1:29500: Socket closed");
  const grpc::Status handshake(grpc::StatusCode::UNAVAILABLE,
                               "last error: UNKNOWN: Handshake read failed");
  const grpc::Status bearer(grpc::StatusCode::UNAUTHENTICATED,
                            "wrong auth token");
  const grpc::Status away(
      grpc::StatusCode::UNAVAILABLE,
      "failed to connect to all addresses; last error: UNKNOWN: "
      "ipv4:127.0.0.1:29500: Failed to connect to remote host: Connection "
      "refused");
  const grpc::Status slow(grpc::StatusCode::DEADLINE_EXCEEDED,
                          "Deadline Exceeded");
  for (const auto& status : {wrong_token, handshake, bearer}) {
    EXPECT_TRUE(IsCredentialMismatch(status)) << status.error_message();
    const absl::Status failure = RpcFailure(status, "node0:29500");
    EXPECT_TRUE(absl::IsUnauthenticated(failure)) << failure;
    EXPECT_NE(failure.message().find("the credentials differ"),
              std::string::npos);
    EXPECT_NE(failure.message().find("node0:29500"), std::string::npos);
  }
  for (const auto& status : {away, slow}) {
    EXPECT_FALSE(IsCredentialMismatch(status)) << status.error_message();
    const absl::Status failure = RpcFailure(status, "node0:29500");
    EXPECT_EQ(static_cast<int>(failure.code()),
              static_cast<int>(status.error_code()));
    EXPECT_NE(failure.message().find("cannot be reached now"),
              std::string::npos)
        << failure;
  }
}

}  // namespace
}  // namespace trl

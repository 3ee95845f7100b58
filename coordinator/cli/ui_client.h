// Where `trl-coord ui` gets what it serves: a running coordinator, asked
// over gRPC with the same credentials as `trl-coord ps` (GetJobStatus for
// the page, /api/status and /metrics; GetJobEvents for /api/events). Each
// call is bounded by a deadline; a call that fails makes that one answer
// 503 (the coordinator cannot be reached now) or 502 (status/routes.h),
// and the next request tries again.
#ifndef TRL_COORDINATOR_CLI_UI_CLIENT_H_
#define TRL_COORDINATOR_CLI_UI_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "coordinator/cli/coordinator_client.h"
#include "coordinator/status/routes.h"

namespace trl {

// `client` is shared by the sources (its stub is thread-safe).
StatusSources RemoteStatusSources(
    std::shared_ptr<const CoordinatorClient> client,
    std::chrono::milliseconds timeout);

// Keeps `channel` connecting while it lives. gRPC moves a connection on
// (TCP, then the TLS handshake) only while some thread polls for it, and
// the ui's calls fail at once while the coordinator is away: without this
// a coordinator that came back would be found only by gRPC's backup
// poller (every 5 s), too late for the coordinator's handshake timeout.
class ChannelKeeper {
 public:
  explicit ChannelKeeper(std::shared_ptr<grpc::Channel> channel);
  ~ChannelKeeper();
  ChannelKeeper(const ChannelKeeper&) = delete;
  ChannelKeeper& operator=(const ChannelKeeper&) = delete;

 private:
  const std::shared_ptr<grpc::Channel> channel_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Whether a call failed because this side's credential is not the one the
// coordinator takes (a token that differs, one side --insecure, other
// certificates): UNAUTHENTICATED, or a TLS handshake that failed. Not a
// coordinator that cannot be reached, which may come back.
bool IsCredentialMismatch(const grpc::Status& status);

// An RPC's failure as a Status whose text names the coordinator's address
// and, for a credential mismatch, what to check; its code is the RPC's,
// but UNAUTHENTICATED for any credential mismatch.
absl::Status RpcFailure(const grpc::Status& status, const std::string& address);

}  // namespace trl

#endif  // TRL_COORDINATOR_CLI_UI_CLIENT_H_

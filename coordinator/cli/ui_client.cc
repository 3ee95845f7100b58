#include "coordinator/cli/ui_client.h"

#include "absl/strings/str_cat.h"
#include "coordinator/status/page.h"

namespace trl {

namespace pb = trl::launch::v1;

ChannelKeeper::ChannelKeeper(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)) {
  thread_ = std::thread([this] {
    while (!stop_) {
      // Polls the channel for up to 100 ms, asking it to connect if idle.
      const grpc_connectivity_state state =
          channel_->GetState(/*try_to_connect=*/true);
      channel_->WaitForStateChange(state, std::chrono::system_clock::now() +
                                              std::chrono::milliseconds(100));
    }
  });
}

ChannelKeeper::~ChannelKeeper() {
  stop_ = true;
  thread_.join();
}

bool IsCredentialMismatch(const grpc::Status& status) {
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) return true;
  // gRPC 1.51 reports a failed handshake as UNAVAILABLE, in words only.
  const std::string& why = status.error_message();
  return status.error_code() == grpc::StatusCode::UNAVAILABLE &&
         (why.find("andshake") != std::string::npos ||
          why.find("Socket closed") != std::string::npos);
}

absl::Status RpcFailure(const grpc::Status& status,
                        const std::string& address) {
  const bool mismatch = IsCredentialMismatch(status);
  const bool unreachable =
      !mismatch && (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                    status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  return absl::Status(
      mismatch ? absl::StatusCode::kUnauthenticated
               : static_cast<absl::StatusCode>(status.error_code()),
      absl::StrCat(
          "the coordinator at ", address,
          unreachable ? " cannot be reached now (trl-coord ui keeps trying): "
                      : " refused: ",
          status.error_message(),
          mismatch ? " (the credentials differ: this token is not the "
                     "coordinator's, or one side runs --insecure or other "
                     "certificates)"
                   : ""));
}

StatusSources RemoteStatusSources(
    std::shared_ptr<const CoordinatorClient> client,
    std::chrono::milliseconds timeout) {
  StatusSources sources;
  sources.status = [client, timeout](const pb::JobStatusRequest& request)
      -> absl::StatusOr<pb::JobStatus> {
    pb::JobStatus status;
    const grpc::Status rpc = client->stub->GetJobStatus(
        CallContext(*client, timeout).get(), request, &status);
    if (!rpc.ok()) return RpcFailure(rpc, client->address);
    return status;
  };
  sources.snapshot = [status = sources.status] {
    return status(pb::JobStatusRequest());
  };
  sources.events = [client, timeout]() -> absl::StatusOr<pb::JobEvents> {
    pb::JobEvents events;
    const grpc::Status rpc = client->stub->GetJobEvents(
        CallContext(*client, timeout).get(), pb::JobEventsRequest(), &events);
    if (!rpc.ok()) return RpcFailure(rpc, client->address);
    return events;
  };
  sources.nonce = NewPageNonce;
  return sources;
}

}  // namespace trl

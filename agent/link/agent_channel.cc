#include "agent/link/agent_channel.h"

#include <cstdlib>
#include <cstring>

#include "common/tls_credentials.h"

namespace trl {

void SetAgentKeepalive(grpc::ChannelArguments* args) {
  // Pings find a TCP connection that died quietly (the coordinator's
  // liveness is the lease's business): every 30 s is enough for that, and
  // at 4096 agents every 10 s cost the coordinator 2 % of a core.
  args->SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  args->SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args->SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
}

std::shared_ptr<grpc::Channel> AgentChannel(
    const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    bool derived_identity, std::chrono::milliseconds first_backoff) {
  grpc::ChannelArguments args;
  if (derived_identity) SetDerivedServerName(&args);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              static_cast<int>(first_backoff.count()));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 20);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(kMaxReconnectBackoff.count()));
  SetAgentKeepalive(&args);
  args.SetMaxReceiveMessageSize(4 << 20);
  // A connection of its own: after a lost session the agent starts afresh
  // instead of reusing a TCP connection that a partition left stale.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, credentials, args);
}

bool ChannelPoller::DrivesChannels() {
  // gRPC 1.51 on Linux: "epoll1,poll" unless the variable says otherwise.
  const char* strategy = std::getenv("GRPC_POLL_STRATEGY");
  return strategy == nullptr || std::strncmp(strategy, "epoll1", 6) == 0 ||
         std::strcmp(strategy, "all") == 0;
}

ChannelPoller::~ChannelPoller() {
  queue_.Shutdown();
  void* tag;
  bool ok;
  while (queue_.Next(&tag, &ok)) {
  }
}

void ChannelPoller::PollFor(std::chrono::milliseconds time) {
  void* tag;
  bool ok;
  queue_.AsyncNext(
      &tag, &ok,
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                   gpr_time_from_millis(time.count(), GPR_TIMESPAN)));
}

}  // namespace trl

// The channel an agent talks to the coordinator on: its own connection,
// fast reconnects, keepalive pings.
#ifndef TRL_AGENT_LINK_AGENT_CHANNEL_H_
#define TRL_AGENT_LINK_AGENT_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

namespace trl {

// The longest wait of AgentChannel before it tries a failed connection
// again (its backoff), and how long a caller lets one fail before it takes
// a fresh channel instead: gRPC times the backoff on the wall clock, which
// may have stepped back (agent.cc, WaitForCoordinator).
inline constexpr std::chrono::milliseconds kMaxReconnectBackoff{1000};
inline constexpr std::chrono::milliseconds kFreshChannelAfter{1500};

// `derived_identity`: the credentials are the token's derived identity
// (common/derived_identity.h), checked against its name.
// `first_backoff`: its first wait before trying a failed connection again
// (then x1.6 up to kMaxReconnectBackoff); a channel that replaces a failing
// one starts at the cap, so that replacing it does not retry faster.
std::shared_ptr<grpc::Channel> AgentChannel(
    const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    bool derived_identity,
    std::chrono::milliseconds first_backoff = std::chrono::milliseconds(20));

// Drives this process's gRPC I/O (a channel's connection, its handshake)
// for a while timed on the monotonic clock, by polling a completion queue
// with nothing in it; then the caller reads the channel's state. gRPC's
// own waits (WaitForStateChange's deadline, the reconnect backoff) are
// timers that sleep until a wall-clock deadline (absl 20220623): they came
// as late as the wall clock had stepped back.
//
// Polling an empty queue drives every connection only with gRPC's epoll1
// poller (Linux's default: one epoll set for all), not under
// GRPC_POLL_STRATEGY=poll, where a queue polls only what was added to it:
// DrivesChannels says which.
class ChannelPoller {
 public:
  static bool DrivesChannels();

  ChannelPoller() = default;
  ~ChannelPoller();
  ChannelPoller(const ChannelPoller&) = delete;
  ChannelPoller& operator=(const ChannelPoller&) = delete;

  void PollFor(std::chrono::milliseconds time);

 private:
  grpc::CompletionQueue queue_;
};

// The keepalive pings of AgentChannel, for the agent simulator: it must
// cost the coordinator what real agents cost. (It keeps gRPC's default
// reconnect backoff: thousands of channels in one process retrying every
// 20 ms would swamp it.)
void SetAgentKeepalive(grpc::ChannelArguments* args);

}  // namespace trl

#endif  // TRL_AGENT_LINK_AGENT_CHANNEL_H_

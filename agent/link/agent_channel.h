// The channel an agent talks to the coordinator on: its own connection,
// fast reconnects, keepalive pings.
#ifndef TRL_AGENT_LINK_AGENT_CHANNEL_H_
#define TRL_AGENT_LINK_AGENT_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace trl {

// `derived_identity`: the credentials are the token's derived identity
// (common/derived_identity.h), checked against its name.
std::shared_ptr<grpc::Channel> AgentChannel(
    const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    bool derived_identity);

// The keepalive pings of AgentChannel, for the agent simulator: it must
// cost the coordinator what real agents cost. (It keeps gRPC's default
// reconnect backoff: thousands of channels in one process retrying every
// 20 ms would swamp it.)
void SetAgentKeepalive(grpc::ChannelArguments* args);

}  // namespace trl

#endif  // TRL_AGENT_LINK_AGENT_CHANNEL_H_

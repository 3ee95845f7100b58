// The coordinator's handle on one connected agent: a way to send it
// messages and to end its stream. The gRPC stream implements it; tests use
// an in-memory one. Implementations must not call back into the
// Coordinator from Send or Close.
#ifndef TRL_COORDINATOR_AGENT_LINK_H_
#define TRL_COORDINATOR_AGENT_LINK_H_

#include <string>

#include "proto/trl_launch.pb.h"

namespace trl {

class AgentLink {
 public:
  virtual ~AgentLink() = default;
  // Queues a message; never blocks on the network.
  virtual void Send(const trl::launch::v1::CoordinatorMessage& message) = 0;
  // Ends the stream once queued messages are written.
  virtual void Close() = 0;
  // The peer's address, for messages.
  virtual std::string Peer() const = 0;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_AGENT_LINK_H_

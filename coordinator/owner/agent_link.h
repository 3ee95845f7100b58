// The coordinator's handle on one connected agent: a way to send it
// messages, to end its stream and to read from it again once the owner
// paused it (Coordinator::OnMessage). The gRPC stream implements it; tests
// use an in-memory one. Implementations must not call back into the
// Coordinator from Send, Close or ResumeReading.
#ifndef TRL_COORDINATOR_OWNER_AGENT_LINK_H_
#define TRL_COORDINATOR_OWNER_AGENT_LINK_H_

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
  // The stream may read its next message: Coordinator::OnMessage returned
  // false (this stream has its share of the owner's queue) and the owner
  // has since handled enough of it. Called by the owner, once per pause,
  // between two events; may come before the stream has seen OnMessage's
  // false (it must then not pause). Never blocks; the next message is read
  // on another thread. Links that never see false need not care.
  virtual void ResumeReading() {}
  // The agent's machine was declared lost: what the link sends from now on
  // vouches for nothing the agent says after this
  // (CoordinatorMessage.agent_messages_read stays where it is), so that no
  // word keeps the lease of a machine whose ranks go elsewhere.
  virtual void Fenced() {}
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_AGENT_LINK_H_

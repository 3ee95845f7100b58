// The coordinator's UDP port for heartbeat datagrams (see
// common/heartbeat_datagram.h): one thread reads them in batches
// (recvmmsg), hands each batch to the Coordinator and sends its acks back
// in one call (sendmmsg). The same port number as the gRPC service, on the
// same address.
#ifndef TRL_COORDINATOR_PORTS_UDP_HEARTBEAT_SERVER_H_
#define TRL_COORDINATOR_PORTS_UDP_HEARTBEAT_SERVER_H_

#include <sys/socket.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/owner/coordinator.h"

namespace trl {

class UdpHeartbeatServer {
 public:
  // Binds host:port (a numeric address) for UDP and starts reading; an
  // error names the address when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<UdpHeartbeatServer>> Start(
      const std::string& host, int port, Coordinator* core);
  // Stops the reading thread and closes the socket.
  ~UdpHeartbeatServer();
  UdpHeartbeatServer(const UdpHeartbeatServer&) = delete;
  UdpHeartbeatServer& operator=(const UdpHeartbeatServer&) = delete;

  // The socket's receive buffer as the kernel accounts it: what holds the
  // datagrams that arrive while the owner is busy.
  int receive_buffer_bytes() const;

 private:
  UdpHeartbeatServer(int fd, Coordinator* core);
  void Serve();
  // Sends each reply to the sender of the datagram it answers.
  void SendAcks(const mmsghdr* in, sockaddr_storage* senders,
                const std::vector<Coordinator::DatagramReply>& replies);

  const int fd_;
  Coordinator* const core_;
  int wake_[2] = {-1, -1};  // a pipe that ends the thread
  std::thread thread_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_PORTS_UDP_HEARTBEAT_SERVER_H_

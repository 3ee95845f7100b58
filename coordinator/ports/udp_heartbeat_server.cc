#include "coordinator/ports/udp_heartbeat_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <string_view>
#include <vector>

#include "common/heartbeat_datagram.h"
#include "common/network.h"
#include "common/thread_name.h"

namespace trl {
namespace {

// Datagrams read per call: 4096 agents at 1 Hz arrive at ~4 per ms.
constexpr int kBatch = 64;
// After a batch that did not fill up, the thread waits this long before it
// reads again, so that datagrams are read several at a time: a wake-up per
// datagram cost more than everything else together (a context switch
// each). Heartbeats are seen up to this much later, against timeouts of
// seconds; the socket's buffer holds hundreds of datagrams meanwhile.
constexpr auto kGather = std::chrono::milliseconds(2);
// 16 MiB of the kernel's accounting (it doubles what is asked): about
// 20,000 heartbeat datagrams, a second of 16,384 agents'.
constexpr int kReceiveBufferBytes = 8 << 20;

void EnlargeReceiveBuffer(int fd, int bytes) {
  // Beyond net.core.rmem_max only with CAP_NET_ADMIN (SO_RCVBUFFORCE);
  // otherwise as much as that allows.
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<UdpHeartbeatServer>> UdpHeartbeatServer::Start(
    const std::string& host, int port, Coordinator* core) {
  auto fd = OpenUdpSocket(host, port, UdpEnd::kBound);
  if (!fd.ok()) return fd.status();
  // The datagrams that arrive while the owner is busy with something long
  // (a generation's 16,384 assignments) wait here: the default buffer
  // (208 KiB, about 270 datagrams) held 17 ms of 16,384 agents' heartbeats,
  // and every one past it was dropped (UDP RcvbufErrors), which left leases
  // without acks.
  EnlargeReceiveBuffer(*fd, kReceiveBufferBytes);
  return std::unique_ptr<UdpHeartbeatServer>(new UdpHeartbeatServer(*fd, core));
}

int UdpHeartbeatServer::receive_buffer_bytes() const {
  int bytes = 0;
  socklen_t size = sizeof(bytes);
  getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, &size);
  return bytes;
}

UdpHeartbeatServer::UdpHeartbeatServer(int fd, Coordinator* core)
    : fd_(fd), core_(core) {
  if (pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
  thread_ = std::thread([this] { Serve(); });
}

UdpHeartbeatServer::~UdpHeartbeatServer() {
  if (wake_[1] >= 0) {
    char byte = 1;
    ssize_t ignored = write(wake_[1], &byte, 1);
    (void)ignored;
  }
  thread_.join();
  for (int fd : {fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) close(fd);
  }
}

void UdpHeartbeatServer::Serve() {
  NameThisThread("trl-udp-beats");
  std::array<std::array<char, kHeartbeatDatagramSize + 1>, kBatch> buffers;
  std::array<sockaddr_storage, kBatch> senders;
  std::array<iovec, kBatch> in_iov;
  std::array<mmsghdr, kBatch> in;
  while (true) {
    pollfd polls[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(polls, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (polls[1].revents != 0) return;  // being destroyed
    for (int i = 0; i < kBatch; ++i) {
      // One byte more than a datagram: a longer one shows as too long.
      in_iov[i] = {buffers[i].data(), buffers[i].size()};
      in[i] = {};
      in[i].msg_hdr.msg_iov = &in_iov[i];
      in[i].msg_hdr.msg_iovlen = 1;
      in[i].msg_hdr.msg_name = &senders[i];
      in[i].msg_hdr.msg_namelen = sizeof(senders[i]);
    }
    const int received =
        recvmmsg(fd_, in.data(), kBatch, MSG_DONTWAIT, nullptr);
    if (received <= 0) continue;
    std::vector<std::string_view> datagrams;
    datagrams.reserve(received);
    for (int i = 0; i < received; ++i) {
      datagrams.emplace_back(buffers[i].data(), in[i].msg_len);
    }
    const auto replies = core_->OnHeartbeatDatagrams(datagrams);
    if (!replies.empty()) SendAcks(in.data(), senders.data(), replies);
    if (received < kBatch) std::this_thread::sleep_for(kGather);
  }
}

void UdpHeartbeatServer::SendAcks(
    const mmsghdr* in, sockaddr_storage* senders,
    const std::vector<Coordinator::DatagramReply>& replies) {
  std::vector<iovec> out_iov(replies.size());
  std::vector<mmsghdr> out(replies.size());
  for (size_t r = 0; r < replies.size(); ++r) {
    const size_t from = replies[r].index;
    out_iov[r] = {const_cast<char*>(replies[r].bytes.data()),
                  replies[r].bytes.size()};
    out[r] = {};
    out[r].msg_hdr.msg_iov = &out_iov[r];
    out[r].msg_hdr.msg_iovlen = 1;
    out[r].msg_hdr.msg_name = &senders[from];
    out[r].msg_hdr.msg_namelen = in[from].msg_hdr.msg_namelen;
  }
  // Acks that do not fit the socket's buffer are dropped: the agent's
  // lease tolerates a lost one, and this thread must not block.
  sendmmsg(fd_, out.data(), static_cast<unsigned>(out.size()), MSG_DONTWAIT);
}

}  // namespace trl

// Where a port picked for a listener that is not bound at once (the
// workers' store, MASTER_PORT; a coordinator's main_process_port 0) comes
// from. bind(0) returns one of the kernel's ephemeral ports, which any
// outgoing connection on the machine may take between the pick and the
// listener's bind: rank 0's TCPStore then fails with EADDRINUSE and the
// generation is lost (seen in CI: "The server socket has failed to listen
// ... port: 44035 ... address already in use", with tests connecting side
// by side). A port below the ephemeral range is never given to an outgoing
// connection. Pure: the caller reads the range and binds.
#ifndef TRL_COMMON_LISTEN_PORT_RANGE_H_
#define TRL_COMMON_LISTEN_PORT_RANGE_H_

#include <optional>
#include <string_view>

namespace trl {

struct PortRange {
  int first = 0;
  int last = 0;  // inclusive
  int size() const { return last - first + 1; }
  bool Contains(int port) const { return port >= first && port <= last; }
};

// /proc/sys/net/ipv4/ip_local_port_range ("32768\t60999\n"); nullopt when
// it is not two ports, the first no greater than the second.
std::optional<PortRange> ParsePortRange(std::string_view text);

// The ports to pick a listener's from: the kListenSpan below the ephemeral
// range, from 1025 up (1024 and below are privileged, and the reserved
// ones). nullopt when fewer than kMinListenSpan are there (an ephemeral
// range that starts low): the caller falls back to bind(0).
inline constexpr int kListenSpan = 8192;
inline constexpr int kMinListenSpan = 256;
std::optional<PortRange> ListenPortsBelow(PortRange ephemeral);

// The i-th candidate of `ports` for a pick that starts at `seed` (any
// value): every port of the range once in `ports.size()` calls.
int CandidatePort(PortRange ports, unsigned seed, int i);

// Ports that other launchers listen on by default, which a pick skips: a
// generation may hold its MASTER_PORT for days, and torchrun's c10d
// rendezvous (29400) or Accelerate's and torch.distributed's MASTER_PORT
// (29500) started on the machine meanwhile would find theirs taken.
bool IsAnotherLaunchersDefault(int port);

}  // namespace trl

#endif  // TRL_COMMON_LISTEN_PORT_RANGE_H_

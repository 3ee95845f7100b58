// Caps on the TCP connections to one of the coordinator's ports: at most
// `per_peer` from one address, and at most `total` that have not proved
// themselves. gRPC 1.51 has no such cap, and a peer without the token holds
// a descriptor until its handshake times out (5 s) or, with the token,
// until its connection idles out: a flood of them used up the
// coordinator's descriptors. Over a cap, the oldest connections that have
// not proved themselves go first (the kernel numbers sockets in the order
// they are made): a client with the token does so within milliseconds (a
// registered agent, a worker's authenticated store call), so what lingers
// unproven is a flood, and a new agent still gets in while one holds the
// port. Proven connections are never cut, and do not count against the
// total; instead the total shrinks as they grow (UnprovenConnectionCap,
// counted on all the ports at each look), so that proven and unproven
// together stay under the descriptor limit.
//
// ConnectionsToCut is the pure rule; ConnectionGovernor applies it to the
// process's own sockets (the kernel's socket diagnostics, socket_diag.h,
// or /proc/net/tcp* where those cannot be had; /proc/self/fd) with
// shutdown(2).
#ifndef TRL_COORDINATOR_ACCESS_CONNECTION_LIMITS_H_
#define TRL_COORDINATOR_ACCESS_CONNECTION_LIMITS_H_

#include <dirent.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/monotonic_cond_var.h"
#include "coordinator/access/governor_schedule.h"
#include "coordinator/access/socket_diag.h"
#include "coordinator/access/tcp_passive_opens.h"

namespace trl {

// One established connection to the port.
struct PortConnection {
  uint64_t socket_inode = 0;  // higher: made later
  std::string peer_address;   // "10.0.0.2" (no port)
  std::string peer;           // "10.0.0.2:41234"
};

struct ConnectionLimits {
  int per_peer = 64;  // connections from one address, proven or not
  int total = 16384;  // connections that have not proved themselves
};

// The total for each of `ports` ports: half of what the descriptor limit
// leaves past `proven` connections (on all the ports: registered agents,
// spares, workers that made an authenticated store call) and a reserve of
// 1024 (files, pipes, the governor's lag), shared between the ports;
// within [128, 65536]. Then proven + unproven stays under the limit less
// the reserve, however many proved themselves. At 20,000 descriptors and
// two ports: 4,744 with none proven, 648 with 16,384 agents registered.
int UnprovenConnectionCap(uint64_t open_files_limit, int proven, int ports);
// UnprovenConnectionCap's reserve and least share.
inline constexpr int64_t kDescriptorReserve = 1024;
inline constexpr int kLeastUnprovenShare = 128;

// What the coordinator says at start when its descriptor limit is low, or
// nothing. Two ways to be low: under 16,384, gRPC 1.51 stops listening
// for good when an accept fails for want of descriptors, so a flood that
// outruns the caps could leave agents unable to connect; and under what
// `num_machines` agents' connections, the reserve and the least share of
// unproven ones on each of `ports` take, the job's own agents would be
// cut. The advice is one figure: 65536, or twice the agents' connections
// and the reserve if more.
std::optional<std::string> DescriptorLimitWarning(uint64_t open_files_limit,
                                                  int num_machines, int ports);

// What to cut on all the governed ports at one look: `by_port` holds each
// port's connections; the total of each is UnprovenConnectionCap with the
// proven connections counted on all of them.
std::vector<uint64_t> ConnectionsToCutOnPorts(
    const std::vector<std::vector<PortConnection>>& by_port,
    const std::set<std::string>& protected_peers, int per_peer,
    uint64_t open_files_limit);

// The sockets to close so that both caps hold, keeping the connections of
// `protected_peers` ("ADDRESS:PORT") and, among the rest, the newest.
std::vector<uint64_t> ConnectionsToCut(
    const std::vector<PortConnection>& connections,
    const std::set<std::string>& protected_peers, ConnectionLimits limits);

// Whether some address holds more than `limits.per_peer` of `connections`,
// or all of them more than `limits.total`: only then can ConnectionsToCut
// cut anything, whichever peers are protected.
bool OverACap(const std::vector<PortConnection>& connections,
              ConnectionLimits limits);

// gRPC's name of a peer ("ipv4:10.0.0.2:41234", "ipv6:%5B::1%5D:41234")
// as PortConnection::peer ("10.0.0.2:41234", "[::1]:41234").
std::string PeerFromGrpc(const std::string& grpc_peer);

// What the caps read, opened once: a process at its descriptor limit (what
// a flood brings about) could not open them again. The connections come
// from the kernel's socket diagnostics; /proc/net/tcp and /proc/net/tcp6
// (every socket of the namespace, formatted as text) only if its netlink
// socket cannot be opened or a dump fails (logged once).
class ProcSockets {
 public:
  ProcSockets();
  ~ProcSockets();
  ProcSockets(const ProcSockets&) = delete;
  ProcSockets& operator=(const ProcSockets&) = delete;

  // See ReadPortConnections and CutSockets.
  std::vector<PortConnection> Connections(int port);
  // From /proc/net/tcp* only, even when the diagnostics work.
  std::vector<PortConnection> ConnectionsFromProc(int port);
  int Cut(const std::vector<uint64_t>& inodes);
  // Whether Connections asks the kernel's socket diagnostics.
  bool reads_socket_diag() const { return diag_ != nullptr; }

 private:
  std::unique_ptr<SocketDiag> diag_;  // null: /proc/net/tcp* instead
  bool diag_failure_logged_ = false;
  int tcp_ = -1;
  int tcp6_ = -1;
  DIR* fds_ = nullptr;
};

// The established connections to local port `port` (IPv4-mapped addresses
// as IPv4), as ProcSockets finds them.
std::vector<PortConnection> ReadPortConnections(int port);

// The same, from /proc/net/tcp and /proc/net/tcp6 only (for tests: both
// ways must agree).
std::vector<PortConnection> ReadPortConnectionsFromProc(int port);

// Closes (shutdown(2), which gRPC then sees as the peer's close) this
// process's sockets with these inodes; returns how many it found.
int CutSockets(const std::vector<uint64_t>& inodes);

// A thread that enforces the caps on `ports`. It wakes every `interval`
// (every 20 ms while it is cutting) and looks at the sockets when there is
// reason to (governor_schedule.h): a connection accepted since its last
// look, a port over a cap, or else every 10 intervals.
class ConnectionGovernor {
 public:
  // `open_files_limit`: the process's descriptor limit, which sizes the
  // share of unproven connections at each look.
  ConnectionGovernor(std::vector<int> ports, int per_peer,
                     uint64_t open_files_limit,
                     std::function<std::set<std::string>()> protected_peers,
                     std::chrono::milliseconds interval);
  ~ConnectionGovernor();
  ConnectionGovernor(const ConnectionGovernor&) = delete;
  ConnectionGovernor& operator=(const ConnectionGovernor&) = delete;

  // Connections closed so far.
  int64_t cut() const { return cut_.load(); }

 private:
  void Run();
  // One look at the sockets; returns how many it closed.
  int Enforce(std::optional<uint64_t> passive_opens);

  const std::vector<int> ports_;
  const int per_peer_;
  const uint64_t open_files_limit_;
  const std::function<std::set<std::string>()> protected_peers_;
  const std::chrono::milliseconds interval_;
  ProcSockets proc_;
  TcpPassiveOpens passive_opens_;
  GovernorSchedule schedule_;
  std::atomic<int64_t> cut_{0};
  // Logged at most every 10 s (a flood must not flood the log too).
  int64_t unreported_ = 0;
  bool flooded_ = false;  // the last round cut something
  std::chrono::steady_clock::time_point last_trim_;
  std::chrono::steady_clock::time_point last_report_;
  // The wait between looks follows the monotonic clock: a clock step must
  // not hold the governor's next look (common/monotonic_cond_var.h).
  absl::Mutex mutex_;
  MonotonicCondVar wakeup_;
  bool stop_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_ACCESS_CONNECTION_LIMITS_H_

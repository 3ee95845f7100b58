#include "coordinator/access/connection_limits.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/logging.h"
#include "common/thread_name.h"
#include "common/tsan_visible_mutex.h"

namespace trl {

std::vector<uint64_t> ConnectionsToCut(
    const std::vector<PortConnection>& connections,
    const std::set<std::string>& protected_peers, ConnectionLimits limits) {
  std::map<std::string, std::vector<const PortConnection*>> by_address;
  for (const auto& connection : connections) {
    by_address[connection.peer_address].push_back(&connection);
  }
  std::vector<uint64_t> cut;
  std::vector<const PortConnection*> kept_unprotected;
  for (auto& [address, group] : by_address) {
    // Newest first: over the cap, the oldest unproven go.
    std::sort(group.begin(), group.end(), [](auto* a, auto* b) {
      return a->socket_inode > b->socket_inode;
    });
    int kept_here = 0;
    for (const PortConnection* c : group) {
      if (protected_peers.count(c->peer)) ++kept_here;
    }
    for (const PortConnection* c : group) {
      if (protected_peers.count(c->peer)) continue;
      if (kept_here < limits.per_peer) {
        ++kept_here;
        kept_unprotected.push_back(c);
      } else {
        cut.push_back(c->socket_inode);
      }
    }
  }
  // More unproven than the total: the oldest of them go.
  std::sort(kept_unprotected.begin(), kept_unprotected.end(),
            [](auto* a, auto* b) { return a->socket_inode < b->socket_inode; });
  const size_t allowed = static_cast<size_t>(std::max(limits.total, 0));
  const size_t over =
      kept_unprotected.size() > allowed ? kept_unprotected.size() - allowed : 0;
  for (size_t i = 0; i < over; ++i) {
    cut.push_back(kept_unprotected[i]->socket_inode);
  }
  return cut;
}

int UnprovenConnectionCap(uint64_t open_files_limit, int proven, int ports) {
  const int64_t limit = static_cast<int64_t>(
      std::min<uint64_t>(open_files_limit, uint64_t{1} << 30));
  const int64_t left = limit - std::max(proven, 0) - kDescriptorReserve;
  const int64_t share = left / 2 / std::max(ports, 1);
  return static_cast<int>(
      std::clamp<int64_t>(share, kLeastUnprovenShare, 65536));
}

std::optional<std::string> DescriptorLimitWarning(uint64_t open_files_limit,
                                                  int num_machines, int ports) {
  const uint64_t machines = static_cast<uint64_t>(std::max(num_machines, 0));
  const uint64_t job_needs =
      machines + kDescriptorReserve +
      2 * kLeastUnprovenShare * static_cast<uint64_t>(std::max(ports, 1));
  const bool flood_could_stop_accepting = open_files_limit < 16384;
  const bool agents_could_be_cut = open_files_limit < job_needs;
  if (!flood_could_stop_accepting && !agents_could_be_cut) return std::nullopt;
  const uint64_t advice =
      std::max<uint64_t>(65536, 2 * (machines + kDescriptorReserve));
  std::string why;
  if (agents_could_be_cut) {
    why = absl::StrCat("too few for ", machines,
                       " agents' connections and room for new ones");
  }
  if (flood_could_stop_accepting) {
    absl::StrAppend(&why, why.empty() ? "" : "; ",
                    "a flood of connections could stop the coordinator "
                    "from accepting agents");
  }
  return absl::StrCat("this process may open only ", open_files_limit,
                      " files: ", why,
                      ". Raise the limit (ulimit -Hn, systemd LimitNOFILE=) "
                      "to ",
                      advice, " or more");
}

std::vector<uint64_t> ConnectionsToCutOnPorts(
    const std::vector<std::vector<PortConnection>>& by_port,
    const std::set<std::string>& protected_peers, int per_peer,
    uint64_t open_files_limit) {
  int proven = 0;
  for (const auto& connections : by_port) {
    for (const auto& connection : connections) {
      proven += protected_peers.count(connection.peer) ? 1 : 0;
    }
  }
  const ConnectionLimits limits{
      per_peer, UnprovenConnectionCap(open_files_limit, proven,
                                      static_cast<int>(by_port.size()))};
  std::vector<uint64_t> cut;
  for (const auto& connections : by_port) {
    for (uint64_t inode :
         ConnectionsToCut(connections, protected_peers, limits)) {
      cut.push_back(inode);
    }
  }
  return cut;
}

bool OverACap(const std::vector<PortConnection>& connections,
              ConnectionLimits limits) {
  const int count = static_cast<int>(connections.size());
  if (count > limits.total) return true;
  if (count <= limits.per_peer) return false;
  std::unordered_map<std::string, int> by_address;
  for (const auto& connection : connections) {
    if (++by_address[connection.peer_address] > limits.per_peer) return true;
  }
  return false;
}

std::string PeerFromGrpc(const std::string& grpc_peer) {
  std::string peer = grpc_peer;
  const size_t scheme = peer.find(':');
  if (scheme != std::string::npos) peer = peer.substr(scheme + 1);
  return absl::StrReplaceAll(peer, {{"%5B", "["}, {"%5D", "]"}});
}

namespace {

// An address in network byte order (4 or 16 bytes) as text, an
// IPv4-mapped IPv6 address (an IPv4 peer of a dual-stack listener) as IPv4.
std::string AddressText(const unsigned char* bytes, bool v6) {
  char out[INET6_ADDRSTRLEN] = {};
  static const unsigned char kMapped[12] = {0, 0, 0, 0, 0,    0,
                                            0, 0, 0, 0, 0xff, 0xff};
  if (!v6) {
    inet_ntop(AF_INET, bytes, out, sizeof(out));
  } else if (std::equal(kMapped, kMapped + 12, bytes)) {
    inet_ntop(AF_INET, bytes + 12, out, sizeof(out));
  } else {
    inet_ntop(AF_INET6, bytes, out, sizeof(out));
  }
  return out;
}

PortConnection Connection(uint64_t inode, const std::string& peer_address,
                          int peer_port) {
  PortConnection connection;
  connection.socket_inode = inode;
  connection.peer_address = peer_address;
  connection.peer = peer_address.find(':') == std::string::npos
                        ? absl::StrCat(peer_address, ":", peer_port)
                        : absl::StrCat("[", peer_address, "]:", peer_port);
  return connection;
}

// "0100007F:1F90" (IPv4, little-endian words) or 32 hex digits (IPv6).
bool ParseProcAddress(const std::string& text, bool v6, std::string* address,
                      int* port) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return false;
  const std::string hex = text.substr(0, colon);
  if (!absl::SimpleHexAtoi(text.substr(colon + 1), port)) return false;
  unsigned char bytes[16];
  const size_t words = v6 ? 4 : 1;
  if (hex.size() != words * 8) return false;
  for (size_t w = 0; w < words; ++w) {
    uint32_t word = 0;
    if (!absl::SimpleHexAtoi(hex.substr(w * 8, 8), &word)) return false;
    // The kernel prints each 32-bit word in host (little-endian) order.
    for (int b = 0; b < 4; ++b) bytes[w * 4 + b] = (word >> (8 * b)) & 0xff;
  }
  *address = AddressText(bytes, v6);
  return true;
}

// The whole of a /proc file through a descriptor kept open: at the
// descriptor limit, opening it again would fail.
std::string ReadAll(int fd) {
  std::string text;
  if (fd < 0 || lseek(fd, 0, SEEK_SET) != 0) return text;
  char buffer[65536];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) text.append(buffer, n);
  return text;
}

void ParseTable(const std::string& text, bool v6, int port,
                std::vector<PortConnection>* out) {
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid,
        timeout, inode;
    fields >> slot >> local >> remote >> state >> queues >> timer >>
        retransmits >> uid >> timeout >> inode;
    if (!fields || state != "01") continue;  // 01: ESTABLISHED
    std::string local_address, peer_address;
    int local_port = 0, peer_port = 0;
    if (!ParseProcAddress(local, v6, &local_address, &local_port) ||
        local_port != port ||
        !ParseProcAddress(remote, v6, &peer_address, &peer_port)) {
      continue;
    }
    uint64_t socket_inode = 0;
    if (!absl::SimpleAtoi(inode, &socket_inode) || socket_inode == 0) {
      continue;
    }
    out->push_back(Connection(socket_inode, peer_address, peer_port));
  }
}

}  // namespace

ProcSockets::ProcSockets()
    : tcp_(open("/proc/net/tcp", O_RDONLY | O_CLOEXEC)),
      tcp6_(open("/proc/net/tcp6", O_RDONLY | O_CLOEXEC)),
      fds_(opendir("/proc/self/fd")) {
  auto diag = SocketDiag::Open();
  if (diag.ok()) {
    diag_ = *std::move(diag);
  } else {
    ComponentLogger("coord")->warn(
        "{}; the connection caps read /proc/net/tcp instead, which costs "
        "more CPU the more sockets the machine has",
        std::string(diag.status().message()));
  }
}

ProcSockets::~ProcSockets() {
  if (tcp_ >= 0) close(tcp_);
  if (tcp6_ >= 0) close(tcp6_);
  if (fds_ != nullptr) closedir(fds_);
}

std::vector<PortConnection> ProcSockets::Connections(int port) {
  if (diag_ == nullptr) return ConnectionsFromProc(port);
  std::vector<PortConnection> connections;
  for (int family : {AF_INET, AF_INET6}) {
    auto sockets = diag_->Established(family, static_cast<uint16_t>(port));
    if (!sockets.ok()) {
      if (!diag_failure_logged_) {
        diag_failure_logged_ = true;
        ComponentLogger("coord")->warn(
            "{}; the connection caps read /proc/net/tcp instead when that "
            "happens (logged once)",
            std::string(sockets.status().message()));
      }
      return ConnectionsFromProc(port);
    }
    for (const DiagSocket& socket : *sockets) {
      // The kernel filtered on the port; the check costs nothing.
      if (socket.local_port != port || socket.inode == 0) continue;
      connections.push_back(Connection(
          socket.inode,
          AddressText(socket.peer_address.data(), family == AF_INET6),
          socket.peer_port));
    }
  }
  return connections;
}

std::vector<PortConnection> ProcSockets::ConnectionsFromProc(int port) {
  std::vector<PortConnection> connections;
  ParseTable(ReadAll(tcp_), false, port, &connections);
  ParseTable(ReadAll(tcp6_), true, port, &connections);
  return connections;
}

int ProcSockets::Cut(const std::vector<uint64_t>& inodes) {
  if (inodes.empty() || fds_ == nullptr) return 0;
  const std::unordered_set<uint64_t> wanted(inodes.begin(), inodes.end());
  int found = 0;
  rewinddir(fds_);
  while (dirent* entry = readdir(fds_)) {
    int fd = 0;
    if (!absl::SimpleAtoi(entry->d_name, &fd)) continue;
    char target[64] = {};
    const ssize_t n =
        readlinkat(dirfd(fds_), entry->d_name, target, sizeof(target) - 1);
    if (n <= 0) continue;
    const std::string link(target, n);
    uint64_t inode = 0;
    if (link.rfind("socket:[", 0) != 0 || link.back() != ']' ||
        !absl::SimpleAtoi(link.substr(8, link.size() - 9), &inode) ||
        !wanted.count(inode)) {
      continue;
    }
    if (shutdown(fd, SHUT_RDWR) == 0) ++found;
  }
  return found;
}

std::vector<PortConnection> ReadPortConnections(int port) {
  return ProcSockets().Connections(port);
}

std::vector<PortConnection> ReadPortConnectionsFromProc(int port) {
  return ProcSockets().ConnectionsFromProc(port);
}

int CutSockets(const std::vector<uint64_t>& inodes) {
  return ProcSockets().Cut(inodes);
}

ConnectionGovernor::ConnectionGovernor(
    std::vector<int> ports, int per_peer, uint64_t open_files_limit,
    std::function<std::set<std::string>()> protected_peers,
    std::chrono::milliseconds interval)
    : ports_(std::move(ports)),
      per_peer_(per_peer),
      open_files_limit_(open_files_limit),
      protected_peers_(std::move(protected_peers)),
      interval_(interval),
      schedule_(interval * 10),
      thread_([this] { Run(); }) {}

ConnectionGovernor::~ConnectionGovernor() {
  {
    MutexLock lock(&mutex_);
    stop_ = true;
  }
  wakeup_.NotifyAll();
  thread_.join();
}

int ConnectionGovernor::Enforce(std::optional<uint64_t> passive_opens) {
  std::vector<std::vector<PortConnection>> by_port;
  // Cheap while nothing could be over a cap: the proven peers (a question
  // to the owner) are asked for only when some address is over its cap,
  // or a port holds more than the unproven share with none proven.
  const ConnectionLimits before_proof{
      per_peer_, UnprovenConnectionCap(open_files_limit_, 0,
                                       static_cast<int>(ports_.size()))};
  bool could_cut = false;
  for (int port : ports_) {
    by_port.push_back(proc_.Connections(port));
    could_cut = could_cut || OverACap(by_port.back(), before_proof);
  }
  std::vector<uint64_t> cut;
  if (could_cut) {
    cut = ConnectionsToCutOnPorts(by_port, protected_peers_(), per_peer_,
                                  open_files_limit_);
  }
  // Over a cap only if something was cut: a job whose agents alone pass
  // the pre-check above would otherwise have the governor look (and ask
  // the owner) five times a second for good.
  schedule_.Looked(std::chrono::steady_clock::now(), passive_opens,
                   !cut.empty());
  return proc_.Cut(cut);
}

void ConnectionGovernor::Run() {
  NameThisThread("trl-governor");
  auto wait = interval_;
  while (true) {
    {
      MutexLock lock(&mutex_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
        return stop_;
      };
      if (wakeup_.WaitFor(&mutex_, wait, stopping)) return;
    }
    // Read before the look: what is accepted during it is seen next time.
    const std::optional<uint64_t> passive_opens = passive_opens_.Read();
    int closed = 0;
    if (schedule_.Due(std::chrono::steady_clock::now(), passive_opens)) {
      closed = Enforce(passive_opens);
    }
    cut_ += closed;
    if (closed > 0) {
      const auto now = std::chrono::steady_clock::now();
      unreported_ += closed;
      if (now - last_report_ >= std::chrono::seconds(10)) {
        ComponentLogger("coord")->warn(
            "closed {} connection(s) over the caps ({} from one address; "
            "unproven ones: half of the {} descriptors that proven ones and "
            "a reserve of 1024 leave) since the last report",
            unreported_, per_peer_, open_files_limit_);
        unreported_ = 0;
        last_report_ = now;
      }
    }
    // A flood refills what was cut: look again soon while it lasts. Once
    // it is over, and every 10 s (handshakes that failed on their own, a
    // burst of calls), give freed memory back to the system: gRPC's
    // threads free into arenas of their own that glibc does not trim.
    const auto now = std::chrono::steady_clock::now();
    if ((closed == 0 && flooded_) ||
        now - last_trim_ >= std::chrono::seconds(10)) {
      malloc_trim(0);
      last_trim_ = now;
    }
    flooded_ = closed > 0;
    wait = closed > 0 ? std::chrono::milliseconds(20) : interval_;
  }
}

}  // namespace trl

// How many TCP connections this network namespace has accepted so far:
// the PassiveOpens counter of /proc/net/snmp (IPv4 and IPv6 alike; it
// counts each connection once its handshake completes, before accept(2)).
// The connection governor looks at the sockets only when it has changed
// (connection_limits.h): reading it costs the kernel a few counters,
// where a look at the sockets walks every socket of the namespace.
//
// Not thread-safe.
#ifndef TRL_COORDINATOR_ACCESS_TCP_PASSIVE_OPENS_H_
#define TRL_COORDINATOR_ACCESS_TCP_PASSIVE_OPENS_H_

#include <cstdint>
#include <optional>
#include <string>

namespace trl {

class TcpPassiveOpens {
 public:
  // Opens /proc/net/snmp, once: a process at its descriptor limit could
  // not open it again.
  TcpPassiveOpens();
  ~TcpPassiveOpens();
  TcpPassiveOpens(const TcpPassiveOpens&) = delete;
  TcpPassiveOpens& operator=(const TcpPassiveOpens&) = delete;

  // The counter now; nullopt if it cannot be read.
  std::optional<uint64_t> Read();

 private:
  int fd_ = -1;
};

// PassiveOpens from the text of /proc/net/snmp; nullopt if absent.
std::optional<uint64_t> ParsePassiveOpens(const std::string& snmp);

}  // namespace trl

#endif  // TRL_COORDINATOR_ACCESS_TCP_PASSIVE_OPENS_H_

// gRPC's own log lines (a failed TLS handshake, a refused connection) go
// through the daemon's logger at a bounded rate: a stranger's flood of bad
// handshakes costs a few lines, not one per connection.
//
// A failed TLS handshake is never shown raw (OpenSSL's words help nobody
// who holds the wrong token; the agent says it in its own): such lines are
// kept at debug level. TRL_GRPC_LOG=1 shows every line gRPC gives (with
// GRPC_VERBOSITY for those under ERROR), still bounded.
#ifndef TRL_COMMON_GRPC_LOGGING_H_
#define TRL_COMMON_GRPC_LOGGING_H_

#include <string>

namespace trl {

// Call once in main, before gRPC is used.
void RouteGrpcLogs();

// True for a gRPC or OpenSSL line about a failed TLS handshake.
bool IsHandshakeFailureLine(const std::string& line);

}  // namespace trl

#endif  // TRL_COMMON_GRPC_LOGGING_H_

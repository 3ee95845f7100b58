// gRPC's own log lines (a failed TLS handshake, a refused connection) go
// through the daemon's logger at a bounded rate: a stranger's flood of bad
// handshakes costs a few lines, not one per connection.
//
// A failed TLS handshake is never shown raw (OpenSSL's words help nobody
// who holds the wrong token): a daemon that says what it means by it
// (SayHandshakeFailuresAs) gets that line, at most once per 10 s with the
// count of those left out; one that does not (an agent, which says it in
// its own words) keeps them at debug level. TRL_GRPC_LOG=1 shows gRPC's
// lines as they come (still bounded).
#ifndef TRL_COMMON_GRPC_LOGGING_H_
#define TRL_COMMON_GRPC_LOGGING_H_

#include <string>

namespace trl {

// Call once in main, before gRPC is used.
void RouteGrpcLogs();

// What a failed handshake means to this daemon, e.g. "a client with another
// token ...". Thread-safe.
void SayHandshakeFailuresAs(const std::string& meaning);

// True for a gRPC or OpenSSL line about a failed TLS handshake.
bool IsHandshakeFailureLine(const std::string& line);

}  // namespace trl

#endif  // TRL_COMMON_GRPC_LOGGING_H_

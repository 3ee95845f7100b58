// gRPC's own log lines (a failed TLS handshake, a refused connection) go
// through the daemon's logger at a bounded rate: a stranger's flood of bad
// handshakes costs a few lines, not one per connection.
#ifndef TRL_COMMON_GRPC_LOGGING_H_
#define TRL_COMMON_GRPC_LOGGING_H_

namespace trl {

// Call once in main, before gRPC is used.
void RouteGrpcLogs();

}  // namespace trl

#endif  // TRL_COMMON_GRPC_LOGGING_H_

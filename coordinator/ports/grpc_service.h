// The coordinator's gRPC server: a thin adapter from gRPC's callback API to
// Coordinator. No thread per agent: each agent's stream is a reactor that
// gRPC's own thread pool drives.
#ifndef TRL_COORDINATOR_PORTS_GRPC_SERVICE_H_
#define TRL_COORDINATOR_PORTS_GRPC_SERVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/owner/coordinator.h"

namespace grpc {
class Server;
class ServerCredentials;
class Service;
}  // namespace grpc

namespace trl {

class LogRelay;

// Whether host:port can be bound now, and if not, why (gRPC's own failure
// to bind says little).
absl::Status CheckCanListen(const std::string& host, int port);

class CoordinatorServer {
 public:
  // Listens on host:port (exactly that address; a second server on the same
  // port fails), serving `core`, which must outlive the server. With an
  // `auth_token`, every RPC must carry it; without (--insecure), none does.
  // `store` (may be null; must outlive the server) is served beside it and
  // checks its own per-generation tokens. With `peer_identity`, the
  // credentials require the token's derived identity of every client
  // (common/derived_identity.h) and no bearer token is expected. `core`
  // may be null for a server of the store alone; port 0 picks a free one.
  // `logs` (may be null: StreamLogs is then unimplemented; must outlive the
  // server) serves `trl-coord logs` and takes the agents' log batches.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      const std::string& host, int port, Coordinator* core,
      const std::string& auth_token,
      std::shared_ptr<grpc::ServerCredentials> credentials,
      grpc::Service* store = nullptr, int idle_connection_ms = 60000,
      bool peer_identity = false, LogRelay* logs = nullptr);
  ~CoordinatorServer();

  int port() const { return port_; }
  // Stops accepting calls and ends open streams within `grace_ms`.
  void Shutdown(int grace_ms);

 private:
  class Service;
  CoordinatorServer() = default;

  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_PORTS_GRPC_SERVICE_H_

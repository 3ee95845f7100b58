// How `trl-coord ps` and `trl-coord logs` reach a running coordinator: its
// address (--address, else the config's main_process_ip:port) and the same
// credentials as the daemons (the token's derived identity, or TLS
// certificates and the token as a bearer, or --insecure).
#ifndef TRL_COORDINATOR_CLI_COORDINATOR_CLIENT_H_
#define TRL_COORDINATOR_CLI_COORDINATOR_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/accelerate_config.h"
#include "proto/trl_launch.grpc.pb.h"

namespace CLI {
class App;
}

namespace trl {

struct CoordinatorConnectionFlags {
  std::string config_file;
  // The same overrides as `trl-coord start` takes.
  std::string main_process_ip;
  int main_process_port = 0;
  std::string address;  // host:port; overrides all of the above
  std::string auth_token_file;
  bool insecure = false;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
};

// The coordinator's host:port: --address, else the config's
// main_process_ip:port with the flags' overrides (as `start` reads them).
absl::StatusOr<std::string> CoordinatorAddress(
    const CoordinatorConnectionFlags& flags);

// The config of the job named by the flags (for the state file kept for its
// main_process_ip:port), with the same overrides.
absl::StatusOr<AccelerateConfig> NamedJobConfig(
    const CoordinatorConnectionFlags& flags);

// --config_file, --main_process_ip, --main_process_port and --address,
// then (after the command's own flags) the
// credential flags, which AddCredentialFlags adds.
void AddAddressFlags(CLI::App& app, CoordinatorConnectionFlags& flags);
void AddCredentialFlags(CLI::App& app, CoordinatorConnectionFlags& flags);

struct CoordinatorClient {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;  // the stub's
  std::unique_ptr<trl::launch::v1::Coordinator::Stub> stub;
  std::string bearer;  // "Bearer TOKEN" or ""
};

// A stub on a channel that takes answers of up to `max_receive_bytes`; an
// error (a config or token that cannot be read) names what was wrong.
// `max_reconnect_backoff_ms` (0: gRPC's, up to 120 s) bounds how long a
// long-lived client waits between tries to reach a coordinator that went
// away.
// A call's context: the client's bearer (when it has one) and a deadline
// `timeout` from now.
std::unique_ptr<grpc::ClientContext> CallContext(
    const CoordinatorClient& client, std::chrono::milliseconds timeout);
// The same, `seconds` from now (a flag's value).
std::unique_ptr<grpc::ClientContext> CallContext(
    const CoordinatorClient& client, double seconds);

absl::StatusOr<CoordinatorClient> ConnectToCoordinator(
    const CoordinatorConnectionFlags& flags, int max_receive_bytes,
    int max_reconnect_backoff_ms = 0);

}  // namespace trl

#endif  // TRL_COORDINATOR_CLI_COORDINATOR_CLIENT_H_

#include "coordinator/cli/coordinator_client.h"

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "common/auth_token.h"
#include "common/launch_options.h"
#include "common/local_machine.h"
#include "common/network.h"
#include "common/tls_credentials.h"

namespace trl {

namespace pb = trl::launch::v1;

std::unique_ptr<grpc::ClientContext> CallContext(
    const CoordinatorClient& client, std::chrono::milliseconds timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  if (!client.bearer.empty()) {
    context->AddMetadata(kAuthMetadataKey, client.bearer);
  }
  context->set_deadline(std::chrono::system_clock::now() + timeout);
  return context;
}

std::unique_ptr<grpc::ClientContext> CallContext(
    const CoordinatorClient& client, double seconds) {
  return CallContext(
      client, std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
}

void AddAddressFlags(CLI::App& app, CoordinatorConnectionFlags& flags) {
  app.add_option("--config_file,--config-file", flags.config_file,
                 "Accelerate config of the job (main_process_ip:port)");
  app.add_option("--main_process_ip,--main-process-ip", flags.main_process_ip,
                 "The coordinator's address (overrides the config, as for "
                 "`start`)");
  app.add_option("--main_process_port,--main-process-port",
                 flags.main_process_port,
                 "The coordinator's port (overrides the config, as for "
                 "`start`)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--address", flags.address,
                 "The coordinator's host:port (overrides all of the above)");
}

absl::StatusOr<AccelerateConfig> NamedJobConfig(
    const CoordinatorConnectionFlags& flags) {
  LaunchOptions options;
  options.config_file = flags.config_file;
  options.main_process_ip = flags.main_process_ip;
  options.main_process_port = flags.main_process_port;
  return ResolveLaunchConfig(options, ReadLocalMachine());
}

absl::StatusOr<std::string> CoordinatorAddress(
    const CoordinatorConnectionFlags& flags) {
  if (!flags.address.empty()) return flags.address;
  auto config = NamedJobConfig(flags);
  if (!config.ok()) return config.status();
  return JoinHostPort(config->main_process_ip, config->main_process_port);
}

void AddCredentialFlags(CLI::App& app, CoordinatorConnectionFlags& flags) {
  app.add_option("--auth_token_file,--auth-token-file", flags.auth_token_file,
                 "File holding the shared auth token (default: "
                 "TRL_AUTH_TOKEN, else ~/.trl/token)");
  app.add_flag("--insecure", flags.insecure, "Send no auth token");
  app.add_option("--tls_cert,--tls-cert", flags.tls_cert,
                 "Client TLS certificate (PEM)");
  app.add_option("--tls_key,--tls-key", flags.tls_key,
                 "The private key of --tls_cert (PEM)");
  app.add_option("--tls_ca,--tls-ca", flags.tls_ca,
                 "CA certificate (PEM) of the coordinator's certificate");
}

absl::StatusOr<CoordinatorClient> ConnectToCoordinator(
    const CoordinatorConnectionFlags& flags, int max_receive_bytes,
    int max_reconnect_backoff_ms) {
  CoordinatorClient client;
  auto address = CoordinatorAddress(flags);
  if (!address.ok()) return address.status();
  client.address = *std::move(address);
  auto token = ResolveAuthToken(flags.auth_token_file, flags.insecure,
                                /*create_if_missing=*/false);
  if (!token.ok()) return token.status();
  auto security = ClientSecurityFor(
      TlsFiles{flags.tls_cert, flags.tls_key, flags.tls_ca}, *token);
  if (!security.ok()) return security.status();
  grpc::ChannelArguments args;
  if (security->derived_identity) SetDerivedServerName(&args);
  args.SetMaxReceiveMessageSize(max_receive_bytes);
  if (max_reconnect_backoff_ms > 0) {
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_reconnect_backoff_ms);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                std::min(1000, max_reconnect_backoff_ms));
    // gRPC waits at least this long (default 20 s) before a new attempt.
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
                std::min(1000, max_reconnect_backoff_ms));
  }
  client.channel =
      grpc::CreateCustomChannel(client.address, security->credentials, args);
  client.stub = pb::Coordinator::NewStub(client.channel);
  if (!security->bearer_token.empty()) {
    client.bearer = BearerValue(security->bearer_token);
  }
  return client;
}

}  // namespace trl

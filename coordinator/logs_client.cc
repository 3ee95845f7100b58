#include "coordinator/logs_client.h"

#include <grpcpp/grpcpp.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/auth_token.h"
#include "common/launch_options.h"
#include "common/local_machine.h"
#include "common/network.h"
#include "common/tls_credentials.h"

namespace trl {

namespace pb = trl::launch::v1;

void AddLogsFlags(CLI::App& app, LogsFlags& flags) {
  app.add_option("--config_file,--config-file", flags.config_file,
                 "Accelerate config of the job (main_process_ip:port)");
  app.add_option("--address", flags.address,
                 "The coordinator's host:port (overrides the config)");
  app.add_option("--rank", flags.rank, "Only this rank's output");
  app.add_option("--machine,--machine_rank,--machine-rank", flags.machine_rank,
                 "Only the output of this machine's ranks");
  app.add_flag("-f,--follow", flags.follow,
               "Keep printing new lines until the job ends (or Ctrl-C)");
  app.add_option("--timeout", flags.timeout_s,
                 "Without -f: seconds to wait for the retained lines");
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

absl::StatusOr<CoordinatorClient> ConnectToCoordinator(const LogsFlags& flags) {
  CoordinatorClient client;
  client.address = flags.address;
  if (client.address.empty()) {
    LaunchOptions options;
    options.config_file = flags.config_file;
    auto config = ResolveLaunchConfig(options, ReadLocalMachine());
    if (!config.ok()) return config.status();
    client.address =
        JoinHostPort(config->main_process_ip, config->main_process_port);
  }
  auto token = ResolveAuthToken(flags.auth_token_file, flags.insecure,
                                /*create_if_missing=*/false);
  if (!token.ok()) return token.status();
  auto security = ClientSecurityFor(
      TlsFiles{flags.tls_cert, flags.tls_key, flags.tls_ca}, *token);
  if (!security.ok()) return security.status();
  grpc::ChannelArguments args;
  if (security->derived_identity) SetDerivedServerName(&args);
  // Batches of up to 64 KiB of text and their framing.
  args.SetMaxReceiveMessageSize(4 << 20);
  client.stub = pb::Coordinator::NewStub(
      grpc::CreateCustomChannel(client.address, security->credentials, args));
  if (!security->bearer_token.empty()) {
    client.bearer = BearerValue(security->bearer_token);
  }
  return client;
}

std::string FormatLogLine(const pb::LogLine& line) {
  const int64_t ms = line.unix_ms();
  const time_t seconds = static_cast<time_t>(ms / 1000);
  struct tm utc;
  gmtime_r(&seconds, &utc);
  char stamp[64];
  std::snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour,
                utc.tm_min, utc.tm_sec, static_cast<int>(ms % 1000));
  if (line.dropped() > 0) {
    return absl::StrCat(stamp, " [", line.dropped(),
                        " lines dropped: a reader was too slow]\n");
  }
  return absl::StrCat(stamp, " [rank ", line.rank(), "] ", line.text(), "\n");
}

int RunLogs(const LogsFlags& flags) {
  auto client = ConnectToCoordinator(flags);
  if (!client.ok()) {
    std::fprintf(stderr, "trl-coord logs: error: %s\n",
                 std::string(client.status().message()).c_str());
    return 2;
  }
  pb::LogsRequest request;
  if (flags.rank) request.set_rank(*flags.rank);
  if (flags.machine_rank) request.set_machine_rank(*flags.machine_rank);
  request.set_follow(flags.follow);
  grpc::ClientContext context;
  if (!client->bearer.empty()) {
    context.AddMetadata(kAuthMetadataKey, client->bearer);
  }
  if (!flags.follow) {
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(
                             static_cast<int64_t>(flags.timeout_s * 1000)));
  }
  auto reader = client->stub->StreamLogs(&context, request);
  pb::LogBatch batch;
  std::string text;
  while (reader->Read(&batch)) {
    text.clear();
    for (const pb::LogLine& line : batch.lines()) {
      text += FormatLogLine(line);
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
  const grpc::Status status = reader->Finish();
  if (status.ok()) return 0;
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    std::fprintf(stderr, "trl-coord logs: error: %s\n",
                 status.error_message().c_str());
    return 2;
  }
  const std::string& why = status.error_message();
  const bool handshake = why.find("andshake") != std::string::npos ||
                         why.find("Socket closed") != std::string::npos;
  std::fprintf(stderr, "trl-coord logs: cannot get the logs from %s: %s%s\n",
               client->address.c_str(), why.c_str(),
               handshake ? " (the TLS handshake failed: this token differs "
                           "from the coordinator's, or one side runs "
                           "--insecure or other certificates)"
                         : "");
  return 1;
}

}  // namespace trl

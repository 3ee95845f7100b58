#include "coordinator/cli/uncordon.h"

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "proto/trl_launch.grpc.pb.h"

namespace trl {

namespace pb = trl::launch::v1;

void AddUncordonFlags(CLI::App& app, UncordonFlags& flags) {
  app.add_option("host", flags.hostname,
                 "The cordoned host, as `trl-coord ps` names it")
      ->required();
  AddAddressFlags(app, flags.connection);
  app.add_option("--timeout", flags.timeout_s, "Seconds to wait for an answer");
  AddCredentialFlags(app, flags.connection);
}

int RunUncordon(const UncordonFlags& flags) {
  auto client = ConnectToCoordinator(flags.connection, 1 << 20);
  if (!client.ok()) {
    std::fprintf(stderr, "trl-coord uncordon: error: %s\n",
                 std::string(client.status().message()).c_str());
    return 2;
  }
  pb::UncordonRequest request;
  request.set_hostname(flags.hostname);
  pb::UncordonReply reply;
  const grpc::Status rpc = client->stub->Uncordon(
      CallContext(*client, flags.timeout_s).get(), request, &reply);
  if (!rpc.ok()) {
    std::fprintf(stderr, "trl-coord uncordon: %s: %s\n",
                 client->address.c_str(), rpc.error_message().c_str());
    return 1;
  }
  std::printf("host %s is uncordoned: it may be given ranks again\n",
              flags.hostname.c_str());
  return 0;
}

}  // namespace trl

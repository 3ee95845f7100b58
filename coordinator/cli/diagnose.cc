#include "coordinator/cli/diagnose.h"

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "coordinator/cli/events.h"
#include "coordinator/record/diagnosis.h"
#include "coordinator/record/events.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

constexpr int kMaxEventsBytes = 64 << 20;

void Print(const std::string& text) {
  std::fputs(text.c_str(), stdout);
  if (!text.empty() && text.back() != '\n') std::fputc('\n', stdout);
}

}  // namespace

void AddDiagnoseFlags(CLI::App& app, DiagnoseFlags& flags) {
  AddAddressFlags(app, flags.connection);
  app.add_option("--state_file,--state-file", flags.state_file,
                 "The state file the coordinator was given (default: the "
                 "one it keeps for main_process_ip:port)")
      ->envname("TRL_STATE_FILE");
  app.add_option("--generation", flags.generation,
                 "Only this generation (default: every one)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 62));
  app.add_option("--timeout", flags.timeout_s,
                 "Seconds to wait for a running coordinator's answer")
      ->check(CLI::Range(0.001, 86400.0));
  AddCredentialFlags(app, flags.connection);
}

int RunDiagnose(const DiagnoseFlags& flags) {
  // This machine's file first: it outlives the job. With --address, the
  // coordinator named is asked, whatever this machine keeps.
  std::string missing;
  if (flags.connection.address.empty()) {
    const auto file =
        JobEventsFile(flags.connection.config_file, flags.state_file);
    if (!file.ok()) {
      std::fprintf(stderr, "trl-coord diagnose: error: %s\n",
                   std::string(file.status().message()).c_str());
      return 2;
    }
    const auto events = ReadJobEvents(*file);
    if (events.ok()) {
      Print(DiagnoseJob(*events, flags.generation));
      return 0;
    }
    if (!absl::IsNotFound(events.status()) || !flags.state_file.empty()) {
      std::fprintf(stderr, "trl-coord diagnose: %s\n",
                   absl::IsNotFound(events.status())
                       ? ("no job history in " + *file).c_str()
                       : std::string(events.status().message()).c_str());
      return 1;
    }
    missing = "no job history in " + *file + " on this machine, ";
  }
  auto client = ConnectToCoordinator(flags.connection, kMaxEventsBytes);
  if (!client.ok()) {
    std::fprintf(stderr, "trl-coord diagnose: error: %s\n",
                 std::string(client.status().message()).c_str());
    return 2;
  }
  pb::JobEvents events;
  const grpc::Status rpc =
      client->stub->GetJobEvents(CallContext(*client, flags.timeout_s).get(),
                                 pb::JobEventsRequest(), &events);
  if (!rpc.ok()) {
    std::fprintf(stderr,
                 "trl-coord diagnose: %sand the coordinator at %s did not "
                 "answer: %s (after the job, run this on the coordinator's "
                 "machine)\n",
                 missing.c_str(), client->address.c_str(),
                 rpc.error_message().c_str());
    return 1;
  }
  Print(DiagnoseJob(events, flags.generation));
  return 0;
}

}  // namespace trl

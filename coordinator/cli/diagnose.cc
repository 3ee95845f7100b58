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
  const JobEventsLookup lookup =
      LookUpJobEvents(flags.connection, flags.state_file, flags.timeout_s);
  if (!lookup.events) {
    std::fprintf(stderr, "trl-coord diagnose: %s\n", lookup.error.c_str());
    return lookup.exit_code;
  }
  Print(DiagnoseJob(*lookup.events, flags.generation));
  return 0;
}

}  // namespace trl

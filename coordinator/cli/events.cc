#include "coordinator/cli/events.h"

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/network.h"
#include "coordinator/record/events.h"
#include "coordinator/record/state_file.h"
#include "coordinator/status/json.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

constexpr int kMaxEventsBytes = 64 << 20;

}  // namespace

std::string AgeOf(int64_t unix_ms) {
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();
  const int64_t seconds = std::max<int64_t>(0, (now_ms - unix_ms) / 1000);
  if (seconds < 120) return absl::StrCat(seconds, " s");
  if (seconds < 7200) return absl::StrCat(seconds / 60, " min");
  if (seconds < 2 * 86400) return absl::StrCat(seconds / 3600, " h");
  return absl::StrCat(seconds / 86400, " days");
}

void AddEventsFlags(CLI::App& app, EventsFlags& flags) {
  AddAddressFlags(app, flags.connection);
  app.add_option("--state_file,--state-file", flags.state_file,
                 "The state file the coordinator was given (default: the "
                 "one it keeps for main_process_ip:port)")
      ->envname("TRL_STATE_FILE");
  app.add_flag("--json", flags.json, "Print JSON");
  app.add_option("--timeout", flags.timeout_s,
                 "Seconds to wait for a running coordinator's answer")
      ->check(CLI::Range(0.001, 86400.0));
  AddCredentialFlags(app, flags.connection);
}

absl::StatusOr<std::string> JobEventsFile(
    const CoordinatorConnectionFlags& connection,
    const std::string& state_file) {
  if (!state_file.empty()) return JobEventLog::PathFor(state_file);
  auto config = NamedJobConfig(connection);
  if (!config.ok()) return config.status();
  auto host = ResolveHost(config->main_process_ip);
  if (!host.ok()) return host.status();
  auto path = DefaultJobStatePath(*host, config->main_process_port);
  if (!path.ok()) return path.status();
  return JobEventLog::PathFor(*path);
}

JobEventsLookup LookUpJobEvents(const CoordinatorConnectionFlags& connection,
                                const std::string& state_file,
                                double timeout_s) {
  JobEventsLookup lookup;
  // This machine's file first: it outlives the job. With --address, the
  // coordinator named is asked, whatever this machine keeps.
  std::string missing;
  if (connection.address.empty()) {
    const auto file = JobEventsFile(connection, state_file);
    if (!file.ok()) {
      lookup.exit_code = 2;
      lookup.error = absl::StrCat("error: ", file.status().message());
      return lookup;
    }
    auto events = ReadJobEvents(*file);
    if (events.ok()) {
      lookup.events = *std::move(events);
      lookup.from = *file;
      return lookup;
    }
    if (!absl::IsNotFound(events.status()) || !state_file.empty()) {
      lookup.exit_code = 1;
      lookup.error = absl::IsNotFound(events.status())
                         ? "no job history in " + *file
                         : std::string(events.status().message());
      return lookup;
    }
    missing = "no job history in " + *file + " on this machine, ";
  }
  auto client = ConnectToCoordinator(connection, kMaxEventsBytes);
  if (!client.ok()) {
    lookup.exit_code = 2;
    lookup.error = missing.empty()
                       ? absl::StrCat("error: ", client.status().message())
                       : absl::StrCat("error: ", missing,
                                      "and the coordinator cannot be "
                                      "asked: ",
                                      client.status().message());
    return lookup;
  }
  pb::JobEvents events;
  const grpc::Status rpc = client->stub->GetJobEvents(
      CallContext(*client, timeout_s).get(), pb::JobEventsRequest(), &events);
  if (!rpc.ok()) {
    lookup.exit_code = 1;
    lookup.error = absl::StrCat(
        missing, "and the coordinator at ", client->address,
        " did not answer: ", rpc.error_message(),
        " (after the job, run this on the coordinator's machine, where its "
        "history stays)");
    return lookup;
  }
  lookup.events = std::move(events);
  lookup.from = "the coordinator at " + client->address;
  return lookup;
}

int RunEvents(const EventsFlags& flags) {
  const JobEventsLookup lookup =
      LookUpJobEvents(flags.connection, flags.state_file, flags.timeout_s);
  if (!lookup.events) {
    std::fprintf(stderr, "trl-coord events: %s\n", lookup.error.c_str());
    return lookup.exit_code;
  }
  const pb::JobEvents& events = *lookup.events;
  if (!flags.json) {
    // Where the history comes from and how old it is: a file left by an
    // older job on the same port is not taken for today's.
    std::fprintf(
        stderr, "trl-coord events: from %s%s\n", lookup.from.c_str(),
        events.events().empty()
            ? ""
            : absl::StrCat("; the newest event is ",
                           AgeOf(events.events().rbegin()->unix_ms()), " old")
                  .c_str());
  }
  const std::string text =
      flags.json ? MessageToJson(events) : FormatJobEvents(events);
  std::fputs(text.c_str(), stdout);
  if (!text.empty() && text.back() != '\n') std::fputc('\n', stdout);
  return 0;
}

}  // namespace trl

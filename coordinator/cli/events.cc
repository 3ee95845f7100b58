#include "coordinator/cli/events.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "common/launch_options.h"
#include "common/local_machine.h"
#include "common/network.h"
#include "coordinator/record/events.h"
#include "coordinator/record/state_file.h"
#include "coordinator/status/json.h"

namespace trl {

void AddEventsFlags(CLI::App& app, EventsFlags& flags) {
  app.add_option("--config_file,--config-file", flags.config_file,
                 "Accelerate config of the job (main_process_ip:port)");
  app.add_option("--state_file,--state-file", flags.state_file,
                 "The state file the coordinator was given (default: the "
                 "one it keeps for main_process_ip:port)")
      ->envname("TRL_STATE_FILE");
  app.add_flag("--json", flags.json, "Print JSON");
}

absl::StatusOr<std::string> JobEventsFile(const std::string& config_file,
                                          const std::string& state_file) {
  if (!state_file.empty()) return JobEventLog::PathFor(state_file);
  LaunchOptions options;
  options.config_file = config_file;
  auto config = ResolveLaunchConfig(options, ReadLocalMachine());
  if (!config.ok()) return config.status();
  auto host = ResolveHost(config->main_process_ip);
  if (!host.ok()) return host.status();
  auto path = DefaultJobStatePath(*host, config->main_process_port);
  if (!path.ok()) return path.status();
  return JobEventLog::PathFor(*path);
}

int RunEvents(const EventsFlags& flags) {
  const auto file = JobEventsFile(flags.config_file, flags.state_file);
  if (!file.ok()) {
    std::fprintf(stderr, "trl-coord events: error: %s\n",
                 std::string(file.status().message()).c_str());
    return 2;
  }
  const std::string& path = *file;
  const auto events = ReadJobEvents(path);
  if (absl::IsNotFound(events.status())) {
    std::fprintf(stderr,
                 "trl-coord events: no job history in %s: run this on the "
                 "coordinator's machine (elsewhere, its status page serves "
                 "/api/events)\n",
                 path.c_str());
    return 1;
  }
  if (!events.ok()) {  // not a file of ours to trust
    std::fprintf(stderr, "trl-coord events: %s\n",
                 std::string(events.status().message()).c_str());
    return 1;
  }
  const std::string text =
      flags.json ? MessageToJson(*events) : FormatJobEvents(*events);
  std::fputs(text.c_str(), stdout);
  if (!text.empty() && text.back() != '\n') std::fputc('\n', stdout);
  return 0;
}

}  // namespace trl

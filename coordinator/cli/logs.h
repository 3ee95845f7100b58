// `trl-coord logs`: the workers' output, from any machine, through the
// coordinator (log_relay.h): the lines each agent retained of the chosen
// ranks, then with -f every new line until the job ends or Ctrl-C. Each
// line is printed as `TIME [rank N] text` (TIME in UTC, when its agent read
// it); lines dropped for a slow reader are shown as `[N lines dropped]`;
// where the generation changes from one line to the next, a line
// `==== generation N ====` marks it. Followed to the job's end, it says how
// the job ended and exits with the job's code.
#ifndef TRL_COORDINATOR_CLI_LOGS_H_
#define TRL_COORDINATOR_CLI_LOGS_H_

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "coordinator/cli/coordinator_client.h"
#include "proto/trl_launch.grpc.pb.h"

namespace CLI {
class App;
}

namespace trl {

struct LogsFlags {
  CoordinatorConnectionFlags connection;
  std::optional<int> rank;
  std::optional<int> machine_rank;
  bool follow = false;
  double timeout_s = 10;  // without -f
};

void AddLogsFlags(CLI::App& app, LogsFlags& flags);

// Batches of up to 64 KiB of text and their framing.
inline constexpr int kMaxLogBatchBytes = 4 << 20;

std::string FormatLogLine(const trl::launch::v1::LogLine& line);

// The `==== generation N ====` line to print before `line`, or "": at the
// first line of a known generation and wherever the generation changes.
class LogGenerationMarks {
 public:
  std::string Before(const trl::launch::v1::LogLine& line);

 private:
  int64_t last_ = -1;
};

// Returns the process exit code: 0 when the retained lines were shown; with
// -f to the job's end, the job's own exit code (0 when it succeeded); 1
// when the coordinator cannot be reached or the stream broke; 2 for bad
// flags, config, or a rank or machine the job lacks.
int RunLogs(const LogsFlags& flags);

}  // namespace trl

#endif  // TRL_COORDINATOR_CLI_LOGS_H_

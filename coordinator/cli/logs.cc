#include "coordinator/cli/logs.h"

#include <grpcpp/grpcpp.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/auth_token.h"

namespace trl {

namespace pb = trl::launch::v1;

void AddLogsFlags(CLI::App& app, LogsFlags& flags) {
  AddAddressFlags(app, flags.connection);
  app.add_option("--rank", flags.rank, "Only this rank's output")
      ->check(CLI::Range(0, (1 << 24) - 1));
  app.add_option("--machine,--machine_rank,--machine-rank", flags.machine_rank,
                 "Only the output of this machine's ranks")
      ->check(CLI::Range(0, (1 << 24) - 1));
  app.add_flag("-f,--follow", flags.follow,
               "Keep printing new lines until the job ends (or Ctrl-C)");
  app.add_option("--timeout", flags.timeout_s,
                 "Without -f: seconds to wait for the retained lines");
  AddCredentialFlags(app, flags.connection);
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

std::string LogGenerationMarks::Before(const pb::LogLine& line) {
  if (line.dropped() > 0 || line.generation() < 0 ||
      line.generation() == last_) {
    return "";
  }
  last_ = line.generation();
  return absl::StrCat("==== generation ", line.generation(), " ====\n");
}

int RunLogs(const LogsFlags& flags) {
  auto client = ConnectToCoordinator(flags.connection, kMaxLogBatchBytes);
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
  LogGenerationMarks marks;
  std::optional<pb::JobEndForLogs> job_end;
  while (reader->Read(&batch)) {
    text.clear();
    for (const pb::LogLine& line : batch.lines()) {
      text += marks.Before(line);
      text += FormatLogLine(line);
    }
    if (batch.has_job_end()) job_end = batch.job_end();
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
  const grpc::Status status = reader->Finish();
  if (status.ok()) {
    if (!job_end) return 0;
    // Followed to the job's end: say how it ended, and exit with its code
    // (a script that runs `logs -f` learns the job's result).
    std::fprintf(stderr, "trl-coord logs: the job %s (exit code %d)\n",
                 job_end->summary().c_str(), job_end->exit_code());
    return job_end->exit_code();
  }
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

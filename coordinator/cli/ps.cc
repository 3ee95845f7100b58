#include "coordinator/cli/ps.h"

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/network.h"
#include "coordinator/cli/events.h"
#include "coordinator/record/diagnosis.h"
#include "coordinator/record/events.h"
#include "coordinator/status/table.h"
#include "coordinator/status/view.h"
#include "proto/trl_launch.grpc.pb.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

constexpr int kMaxStatusBytes = 256 << 20;
// The newest events looked at for the last stop: a stop and where its
// ranks stood come after the generation's start; a restarted generation
// adds its own start and a few more.
constexpr int kEventsForLastStop = 256;

// Why the newest stopped generation stopped and where its ranks stood
// (record/diagnosis.h), under the table; "" when none stopped among the
// newest events, or the coordinator does not answer (an older one).
std::string LastStop(const CoordinatorClient& client, double timeout_s) {
  pb::JobEventsRequest request;
  request.set_limit(kEventsForLastStop);
  pb::JobEvents events;
  if (!client.stub
           ->GetJobEvents(CallContext(client, timeout_s).get(), request,
                          &events)
           .ok()) {
    return "";
  }
  const int64_t generation = LastStoppedGeneration(events);
  if (generation < 0) return "";
  events.set_left_out(0);  // said by `trl-coord diagnose`, not here
  return absl::StrCat("\nLAST STOP (trl-coord diagnose says every one)\n",
                      DiagnoseJob(events, generation));
}

// When no coordinator answers (UNAVAILABLE, not a refused handshake):
// whether this machine keeps the history of a job on that address that has
// ended, and where to read it. "" when it does not.
std::string EndedJobHint(const CoordinatorConnectionFlags& connection,
                         const std::string& state_file) {
  if (!connection.address.empty() && state_file.empty()) return "";
  const auto file = JobEventsFile(connection, state_file);
  if (!file.ok()) return "";
  const auto events = ReadJobEvents(*file);
  if (!events.ok() || events->events().empty()) return "";
  const pb::JobEvent& last = *events->events().rbegin();
  if (last.kind() != "finished") return "";
  std::string state_path = *file;  // the events file is STATE.events
  if (absl::EndsWith(state_path, ".events")) {
    state_path.resize(state_path.size() - std::string(".events").size());
  }
  return absl::StrCat(
      "the job on it ended ", AgeOf(last.unix_ms()), " ago (", last.text(),
      "); its history: trl-coord events --state_file ", state_path);
}

// Why nothing answers at `address` ("host:port"), from one connection
// attempt: nothing listens (no job there now), no route, or no answer; or
// gRPC's own words when the port does answer.
std::string WhyNoAnswer(const std::string& address, const std::string& grpc) {
  const size_t colon = address.rfind(':');
  int port = 0;
  std::string host = address.substr(0, colon);
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return grpc;
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const auto numeric = ResolveHost(host);
  if (!numeric.ok()) return std::string(numeric.status().message());
  const TcpProbe probe = ProbeTcpPort(*numeric, port, 1000);
  switch (probe.outcome) {
    case TcpProbe::kRefused:
      return "nothing listens on that port: no job runs there now (it has "
             "ended, or not started; after a job, `trl-coord events` on the "
             "coordinator's machine shows its history)";
    case TcpProbe::kUnreachable:
      return absl::StrCat("no route to ", host, " (",
                          std::strerror(probe.error), "): check the address");
    case TcpProbe::kNoAnswer:
      return "no answer within 1 s: the machine is down, or a firewall drops "
             "the port";
    case TcpProbe::kAnswered:
      break;
  }
  return absl::StrCat("its port answers, but: ", grpc);
}

}  // namespace

void AddPsFlags(CLI::App& app, PsFlags& flags) {
  AddAddressFlags(app, flags.connection);
  app.add_flag("--json", flags.json, "Print JSON");
  app.add_flag("--ranks", flags.every_row,
               "List every machine and rank, however large the job (a job "
               "of more than 16 machines or 64 ranks is summarised)");
  app.add_flag("--summary", flags.summary,
               "Ask for the summary only (counts by state, the machines and "
               "ranks that need attention, the last failures), whatever the "
               "job's size; with --json, as JSON");
  app.add_option("--timeout", flags.timeout_s, "Seconds to wait for an answer")
      ->check(CLI::Range(0.001, 86400.0));
  AddCredentialFlags(app, flags.connection);
}

int RunPs(const PsFlags& flags) {
  // The whole status of 16,384 machines is about 4 MB, gRPC's default
  // bound on what a client takes: --json and --ranks would fail there.
  auto client = ConnectToCoordinator(flags.connection, kMaxStatusBytes);
  if (!client.ok()) {
    std::fprintf(stderr, "trl-coord ps: error: %s\n",
                 std::string(client.status().message()).c_str());
    return 2;
  }
  const std::string& address = client->address;
  auto ask = [&](const pb::JobStatusRequest& request, pb::JobStatus* status) {
    return client->stub->GetJobStatus(
        CallContext(*client, flags.timeout_s).get(), request, status);
  };
  // The whole status for --json and --ranks; otherwise the summary, which
  // carries the totals: a small job is then asked for whole, and printed
  // as a table. (A coordinator older than summaries sends the whole
  // status to any request; FormatJobTable summarises it here.)
  const bool whole = !flags.summary && (flags.json || flags.every_row);
  pb::JobStatus status;
  grpc::Status rpc =
      ask(whole ? pb::JobStatusRequest() : SummaryRequest(), &status);
  if (rpc.ok() && !whole && !flags.summary && status.has_summary() &&
      PrintedWhole(status.summary().machines(), status.summary().ranks())) {
    status.Clear();
    rpc = ask(pb::JobStatusRequest(), &status);
  }
  if (!rpc.ok()) {
    const std::string& why = rpc.error_message();
    const bool handshake = why.find("andshake") != std::string::npos ||
                           why.find("Socket closed") != std::string::npos;
    if (rpc.error_code() == grpc::StatusCode::UNAVAILABLE && !handshake) {
      const std::string ended = EndedJobHint(flags.connection, "");
      std::fprintf(
          stderr, "trl-coord ps: no coordinator answers at %s: %s\n",
          address.c_str(),
          ended.empty() ? WhyNoAnswer(address, why).c_str() : ended.c_str());
      return 1;
    }
    std::fprintf(stderr,
                 "trl-coord ps: cannot get the job's status from %s: %s%s\n",
                 address.c_str(), why.c_str(),
                 handshake ? " (the TLS handshake failed: this token differs "
                             "from the coordinator's, or one side runs "
                             "--insecure or other certificates)"
                           : "");
    return 1;
  }
  std::string text = flags.json ? FormatJobJson(status)
                                : FormatJobTable(status, flags.every_row);
  if (!flags.json) text += LastStop(*client, flags.timeout_s);
  std::fputs(text.c_str(), stdout);
  if (!text.empty() && text.back() != '\n') std::fputc('\n', stdout);
  return 0;
}

}  // namespace trl

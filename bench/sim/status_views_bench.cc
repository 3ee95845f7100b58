// trl-status-bench: what each view of the job's status costs the
// coordinator, without a cluster: a state machine of N machines x 8
// running ranks (one lost), and for each view the time under the
// coordinator's lock (CopyJobStatus), the time after it (FinishJobStatus),
// the answer's size on the wire and as JSON (/api/status), and the time
// `ps` takes to print it (FormatJobTable: for the whole status of a large
// job, the summary made on the client, as before the views); DescribeJob
// is what the whole status held the lock for before the views. Prints one JSON
// object; medians of --runs.
//   trl-status-bench --machines 16384 --runs 20
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "coordinator/status/job_status.h"
#include "coordinator/status/metrics.h"
#include "coordinator/status/table.h"
#include "coordinator/status/view.h"

namespace {

namespace pb = trl::launch::v1;
using Clock = std::chrono::steady_clock;

double MedianMs(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  return seconds.empty() ? -1 : seconds[seconds.size() / 2] * 1000;
}

double Time(const std::function<void()>& what) {
  const auto start = Clock::now();
  what();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("The cost of each view of the job's status");
  int machines = 4096;
  int runs = 10;
  app.add_option("--machines", machines, "Machines, 8 ranks each");
  app.add_option("--runs", runs, "Runs of each view");
  int line_bytes = 0;
  app.add_option("--line_bytes", line_bytes,
                 "Each rank's newest output line, of this many bytes (0: "
                 "none; a rank's line is at most 256)");
  CLI11_PARSE(app, argc, argv);

  trl::TimePoint now = trl::TimePoint() + std::chrono::seconds(100);
  trl::JobSettings settings;
  settings.job_id = "bench";
  settings.num_machines = machines;
  settings.local_world_size = 8;
  settings.command = {"train.py"};
  trl::JobStateMachine job(settings, now);
  for (int m = 0; m < machines; ++m) {
    trl::AgentInfo agent;
    agent.machine_rank = m;
    agent.hostname = "node" + std::to_string(m);
    agent.advertise_addr =
        "10.0." + std::to_string(m / 256) + "." + std::to_string(m % 256);
    agent.local_world_size = 8;
    if (!job.Register(agent, now).ok()) return 1;
  }
  const trl::GenerationStart start = job.StartGeneration(now);
  for (int m = 0; m < machines; ++m) {
    for (int local = 0; local < 8; ++local) {
      job.WorkerStarted(m, start.generation, local, 1000 + m * 8 + local, now);
    }
  }
  if (line_bytes > 0) {
    for (int m = 0; m < machines; ++m) {
      for (int local = 0; local < 8; ++local) {
        std::string line =
            absl::StrFormat("rank %d {'loss': 0.42} ", m * 8 + local);
        line.resize(static_cast<size_t>(line_bytes), 'x');
        job.RankPrinted(m, start.generation, m * 8 + local, line, now);
      }
    }
  }
  now += std::chrono::seconds(1);
  job.AgentDisconnected(machines / 2, now);
  const trl::HeartbeatVia via = [](int) -> const char* { return "udp"; };

  pb::JobStatusRequest page;
  page.set_summary(true);
  page.mutable_ranks()->set_limit(50);
  page.mutable_nodes()->set_limit(50);
  pb::JobStatusRequest search = page;
  search.mutable_ranks()->set_filter("machine " + std::to_string(machines / 2) +
                                     " ");
  const std::vector<std::pair<std::string, pb::JobStatusRequest>> views = {
      {"summary", trl::SummaryRequest()},
      {"page", page},
      {"page_search", search},
      {"whole", pb::JobStatusRequest()}};

  std::vector<std::string> json = {
      absl::StrFormat("\"machines\": %d, \"ranks\": %d, \"line_bytes\": %d",
                      machines, machines * 8, line_bytes)};
  for (const auto& [name, request] : views) {
    std::vector<double> locked, after, serialize, render;
    size_t bytes = 0, json_bytes = 0;
    for (int i = 0; i < runs; ++i) {
      trl::JobStatusCopy copy;
      locked.push_back(
          Time([&] { copy = trl::CopyJobStatus(job, now, request, via); }));
      pb::JobStatus status;
      after.push_back(
          Time([&] { status = trl::FinishJobStatus(std::move(copy)); }));
      std::string wire;
      serialize.push_back(Time([&] { status.SerializeToString(&wire); }));
      bytes = wire.size();
      json_bytes = trl::FormatJobJson(status).size();
      render.push_back(Time([&] {
        const std::string text = trl::FormatJobTable(status);
        if (text.empty()) std::abort();
      }));
    }
    json.push_back(absl::StrFormat(
        "\"%s\": {\"locked_ms\": %.2f, \"after_ms\": %.2f, "
        "\"serialize_ms\": %.2f, \"wire_bytes\": %d, \"json_bytes\": %d, "
        "\"render_ms\": %.2f}",
        name, MedianMs(locked), MedianMs(after), MedianMs(serialize), bytes,
        json_bytes, MedianMs(render)));
  }
  std::vector<double> before, json_ms;
  for (int i = 0; i < runs; ++i) {
    pb::JobStatus whole;
    before.push_back(Time([&] { whole = trl::DescribeJob(job, now); }));
    json_ms.push_back(Time([&] {
      if (trl::FormatJobJson(whole).empty()) std::abort();
    }));
  }
  json.push_back(absl::StrFormat(
      "\"whole_before\": {\"locked_ms\": %.2f}, \"whole_json_ms\": %.2f",
      MedianMs(before), MedianMs(json_ms)));
  // A scrape of /metrics: the status it asks for, whole (before) or the
  // metrics view (summary and every machine, no rank rows), rendered; and
  // that status's size on the wire (what `trl-coord ui` is sent).
  for (const auto& [name, request] :
       std::vector<std::pair<std::string, pb::JobStatusRequest>>{
           {"metrics_from_whole", pb::JobStatusRequest()},
           {"metrics", trl::MetricsRequest()}}) {
    std::vector<double> locked, total;
    size_t bytes = 0, wire_bytes = 0;
    for (int i = 0; i < runs; ++i) {
      trl::JobStatusCopy copy;
      pb::JobStatus status;
      std::string text;
      total.push_back(Time([&] {
        locked.push_back(
            Time([&] { copy = trl::CopyJobStatus(job, now, request, via); }));
        status = trl::FinishJobStatus(std::move(copy));
        text = trl::FormatMetrics(status);
      }));
      bytes = text.size();
      wire_bytes = status.ByteSizeLong();
    }
    json.push_back(absl::StrFormat(
        "\"%s\": {\"locked_ms\": %.2f, \"total_ms\": %.2f, \"bytes\": %d, "
        "\"wire_bytes\": %d}",
        name, MedianMs(locked), MedianMs(total), bytes, wire_bytes));
  }
  std::printf("{%s}\n", absl::StrJoin(json, ", ").c_str());
  return 0;
}

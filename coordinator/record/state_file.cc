#include "coordinator/record/state_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/private_files.h"

namespace trl {

namespace {

// A failure as one line: "failure GEN RANK MACHINE CODE SIGNAL HOST\tREASON"
// (the reason without tabs or newlines).
std::string FailureLine(const FailureRecord& f) {
  std::string reason = f.reason;
  for (char& c : reason) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  }
  return absl::StrCat("failure ", f.generation, " ", f.rank, " ",
                      f.machine_rank, " ", f.exit.exit_code, " ", f.exit.signal,
                      " ", f.hostname.empty() ? "-" : f.hostname, "\t", reason,
                      "\n");
}

bool ParseFailure(const std::string& text, FailureRecord* f) {
  const size_t tab = text.find('\t');
  if (tab == std::string::npos) return false;
  std::vector<std::string> words =
      absl::StrSplit(text.substr(0, tab), ' ', absl::SkipEmpty());
  if (words.size() != 6 || !absl::SimpleAtoi(words[0], &f->generation) ||
      !absl::SimpleAtoi(words[1], &f->rank) ||
      !absl::SimpleAtoi(words[2], &f->machine_rank) ||
      !absl::SimpleAtoi(words[3], &f->exit.exit_code) ||
      !absl::SimpleAtoi(words[4], &f->exit.signal)) {
    return false;
  }
  f->hostname = words[5] == "-" ? "" : words[5];
  f->reason = text.substr(tab + 1);
  return true;
}

}  // namespace

absl::Status SaveJobRecord(const std::string& path, const JobRecord& record) {
  std::error_code ignored;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(),
                                      ignored);
  std::string text =
      absl::StrCat("job_id ", record.job_id, "\nrun_id ",
                   record.run_id.empty() ? "-" : record.run_id, "\ngeneration ",
                   record.generation, "\nrestarts_used ", record.restarts_used,
                   "\nidentity ", record.identity, "\nnot_before_unix_ms ",
                   record.not_before_unix_ms, "\n");
  const size_t first = record.failures.size() > JobRecord::kFailuresKept
                           ? record.failures.size() - JobRecord::kFailuresKept
                           : 0;
  for (size_t i = first; i < record.failures.size(); ++i) {
    text += FailureLine(record.failures[i]);
  }
  // "machine M HOSTNAME HOST_ID [RUN_ON_MS]" ("-" for an empty one).
  for (const auto& [m, host] : record.hosts) {
    absl::StrAppend(&text, "machine ", m, " ",
                    host.hostname.empty() ? "-" : host.hostname, " ",
                    host.host_id.empty() ? "-" : host.host_id);
    auto run_on = record.run_on.find(m);
    if (run_on != record.run_on.end()) {
      absl::StrAppend(&text, " ", run_on->second.count());
    }
    text += "\n";
  }
  // "cordon FAILURES\tHOSTNAME\tREASON" (no tabs or newlines in either).
  // (Only cordons for failures: an unhealthy host's agents say again
  // whether it is when they register.)
  for (const auto& [host, cordon] : record.cordoned) {
    if (!cordon.ForFailures()) continue;
    std::string name = host;
    std::string reason = cordon.reason;
    for (std::string* field : {&name, &reason}) {
      for (char& c : *field) {
        if (c == '\n' || c == '\t' || c == '\r') c = ' ';
      }
    }
    absl::StrAppend(&text, "cordon ", cordon.failures, "\t", name, "\t", reason,
                    "\n");
  }
  return WriteFileAtomically(path, text);
}

absl::StatusOr<std::optional<JobRecord>> LoadJobRecord(
    const std::string& path) {
  // Trusted only if it is ours and nobody else could have written it: a
  // state file planted by another user would decide where this job's
  // files go.
  auto text = ReadPrivateFile(path, 1 << 20);
  if (absl::IsNotFound(text.status())) return std::optional<JobRecord>();
  if (!text.ok()) return text.status();
  std::istringstream in(*text);
  std::map<std::string, std::string> fields;
  JobRecord record;
  std::string line;
  bool malformed = false;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    if (space == std::string::npos) continue;
    const std::string key = line.substr(0, space);
    if (key == "failure") {
      FailureRecord failure;
      if (!ParseFailure(line.substr(space + 1), &failure)) malformed = true;
      record.failures.push_back(std::move(failure));
      continue;
    }
    if (key == "cordon") {
      std::vector<std::string> parts =
          absl::StrSplit(line.substr(space + 1), absl::MaxSplits('\t', 2));
      Cordon cordon;
      if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &cordon.failures) ||
          parts[1].empty()) {
        malformed = true;
        continue;
      }
      cordon.reason = parts[2];
      record.cordoned[parts[1]] = std::move(cordon);
      continue;
    }
    if (key == "machine") {
      std::vector<std::string> words =
          absl::StrSplit(line.substr(space + 1), ' ', absl::SkipEmpty());
      int m = -1;
      int64_t run_on_ms = 0;
      if ((words.size() != 3 && words.size() != 4) ||
          !absl::SimpleAtoi(words[0], &m) || m < 0 ||
          (words.size() == 4 &&
           (!absl::SimpleAtoi(words[3], &run_on_ms) || run_on_ms < 0))) {
        malformed = true;
        continue;
      }
      record.hosts[m] = HostIdentity{words[1] == "-" ? "" : words[1],
                                     words[2] == "-" ? "" : words[2]};
      if (words.size() == 4) {
        record.run_on[m] = std::chrono::milliseconds(run_on_ms);
      }
      continue;
    }
    fields[key] = line.substr(space + 1);
  }
  record.job_id = fields["job_id"];
  // An older state file has none: the resumed run gets a new one.
  if (fields.count("run_id") && fields["run_id"] != "-") {
    record.run_id = fields["run_id"];
    malformed = malformed || !IsValidJobId(record.run_id);
  }
  record.identity = fields["identity"];
  if (fields.count("not_before_unix_ms") &&
      !absl::SimpleAtoi(fields["not_before_unix_ms"],
                        &record.not_before_unix_ms)) {
    malformed = true;
  }
  if (!IsValidJobId(record.job_id) || malformed ||
      !absl::SimpleAtoi(fields["generation"], &record.generation) ||
      !absl::SimpleAtoi(fields["restarts_used"], &record.restarts_used)) {
    return absl::DataLossError(
        absl::StrCat(path, " is not a trl-coord job state file"));
  }
  return std::optional<JobRecord>(record);
}

void RemoveJobRecord(const std::string& path) { unlink(path.c_str()); }

absl::StatusOr<std::string> DefaultJobStatePath(const std::string& host,
                                                int port) {
  auto dir = PrivateDirectory();
  if (!dir.ok()) return dir.status();
  return absl::StrCat(*dir, "/coord-", host, "-", port, ".state");
}

}  // namespace trl

#include "coordinator/job_state_file.h"

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

namespace trl {

absl::Status SaveJobRecord(const std::string& path, const JobRecord& record) {
  std::error_code ignored;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(),
                                      ignored);
  const std::string text =
      absl::StrCat("job_id ", record.job_id, "\ngeneration ", record.generation,
                   "\nrestarts_used ", record.restarts_used, "\nidentity ",
                   record.identity, "\n");
  const std::string temp = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot write ", temp, ": ", std::strerror(errno)));
  }
  const bool written =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool synced = fsync(fd) == 0;
  close(fd);
  if (!written || !synced || rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(temp.c_str());
    return absl::UnavailableError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<JobRecord>> LoadJobRecord(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::optional<JobRecord>();
    return absl::UnavailableError(
        absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  std::map<std::string, std::string> fields;
  std::string line;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    if (space == std::string::npos) continue;
    fields[line.substr(0, space)] = line.substr(space + 1);
  }
  JobRecord record;
  record.job_id = fields["job_id"];
  record.identity = fields["identity"];
  if (record.job_id.empty() ||
      !absl::SimpleAtoi(fields["generation"], &record.generation) ||
      !absl::SimpleAtoi(fields["restarts_used"], &record.restarts_used)) {
    return absl::DataLossError(
        absl::StrCat(path, " is not a trl-coord job state file"));
  }
  return std::optional<JobRecord>(record);
}

void RemoveJobRecord(const std::string& path) { unlink(path.c_str()); }

std::string DefaultJobStatePath(const std::string& host, int port) {
  const char* dir = std::getenv("TMPDIR");
  return absl::StrCat(dir ? dir : "/tmp", "/trl-launch/coord-", host, "-", port,
                      ".state");
}

}  // namespace trl

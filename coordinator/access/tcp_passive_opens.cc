#include "coordinator/access/tcp_passive_opens.h"

#include <fcntl.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/kernel_files.h"

namespace trl {

std::optional<uint64_t> ParsePassiveOpens(const std::string& snmp) {
  // Two lines start with "Tcp:": the names of the counters, then their
  // values in the same order.
  std::vector<absl::string_view> names;
  for (absl::string_view line : absl::StrSplit(snmp, '\n')) {
    if (!absl::ConsumePrefix(&line, "Tcp:")) continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (names.empty()) {
      names = std::move(fields);
      continue;
    }
    for (size_t i = 0; i < names.size() && i < fields.size(); ++i) {
      uint64_t value = 0;
      if (names[i] == "PassiveOpens" && absl::SimpleAtoi(fields[i], &value)) {
        return value;
      }
    }
    return std::nullopt;
  }
  return std::nullopt;
}

TcpPassiveOpens::TcpPassiveOpens()
    : fd_(open("/proc/net/snmp", O_RDONLY | O_CLOEXEC)) {}

TcpPassiveOpens::~TcpPassiveOpens() {
  if (fd_ >= 0) close(fd_);
}

std::optional<uint64_t> TcpPassiveOpens::Read() {
  if (fd_ < 0 || lseek(fd_, 0, SEEK_SET) != 0) return std::nullopt;
  return ParsePassiveOpens(ReadRestOf(fd_, 64 * 1024));
}

}  // namespace trl

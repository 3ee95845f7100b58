#include "coordinator/record/events.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/private_files.h"
#include "common/terminal_text.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

constexpr size_t kMaxFileBytes = 64 << 20;

std::shared_ptr<spdlog::logger> Log() { return ComponentLogger("coord"); }

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string JsonLine(const pb::JobEvent& event) {
  std::string line;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(event, &line, options);
  return line + "\n";
}

// The last kMaxEvents events in `text`, one JSON line each.
std::deque<pb::JobEvent> ParseLines(const std::string& text) {
  std::deque<pb::JobEvent> events;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty()) continue;
    pb::JobEvent event;
    if (!google::protobuf::util::JsonStringToMessage(std::string(line), &event)
             .ok()) {
      continue;
    }
    events.push_back(std::move(event));
    if (events.size() > JobEventLog::kMaxEvents) events.pop_front();
  }
  return events;
}

}  // namespace

std::string JobEventLog::PathFor(const std::string& state_file) {
  return state_file.empty() ? "" : state_file + ".events";
}

JobEventLog::JobEventLog(std::string path, bool resume)
    : path_(std::move(path)) {
  if (path_.empty()) return;
  if (resume) {
    auto text = ReadPrivateFile(path_, kMaxFileBytes);
    if (text.ok()) events_ = ParseLines(*text);
  }
  // Written whole first (a new job: empty), then appended to.
  Rewrite();
}

JobEventLog::~JobEventLog() {
  Flush();
  if (fd_ >= 0) close(fd_);
}

void JobEventLog::Rewrite() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  std::string text;
  for (const auto& event : events_) text += JsonLine(event);
  if (absl::Status written = WriteFileAtomically(path_, text, 0600);
      !written.ok()) {
    if (!told_of_failure_) {
      Log()->warn("the job's history is not kept: {}",
                  std::string(written.message()));
      told_of_failure_ = true;
    }
    return;
  }
  fd_ = open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  lines_in_file_ = events_.size();
  pending_.clear();  // written above, with the rest
  pending_lines_ = 0;
}

void JobEventLog::Append(pb::JobEvent event, bool deferred) {
  if (event.unix_ms() == 0) event.set_unix_ms(UnixMillis());
  events_.push_back(event);
  if (events_.size() > kMaxEvents) events_.pop_front();
  if (path_.empty()) return;
  pending_ += JsonLine(event);
  ++pending_lines_;
  if (!deferred || pending_.size() > (64 << 10)) Flush();
}

void JobEventLog::Flush() {
  if (path_.empty() || pending_.empty()) return;
  // The file holds at most twice what is kept: then it is written anew
  // (which writes what is pending too). So is a file that could not be
  // written before (a full disk, freed since).
  if (fd_ < 0 || lines_in_file_ + pending_lines_ > 2 * kMaxEvents) {
    Rewrite();
    return;
  }
  if (write(fd_, pending_.data(), pending_.size()) !=
      static_cast<ssize_t>(pending_.size())) {
    if (!told_of_failure_) {
      Log()->warn("the job's history is not kept in {}: {}", path_,
                  std::strerror(errno));
      told_of_failure_ = true;
    }
  }
  lines_in_file_ += pending_lines_;
  pending_.clear();
  pending_lines_ = 0;
}

pb::JobEvents JobEventLog::All() const {
  pb::JobEvents all;
  for (const auto& event : events_) *all.add_events() = event;
  return all;
}

absl::StatusOr<pb::JobEvents> ReadJobEvents(const std::string& path) {
  pb::JobEvents all;
  auto text = ReadPrivateFile(path, kMaxFileBytes);
  if (!text.ok()) return text.status();
  for (auto& event : ParseLines(*text)) *all.add_events() = std::move(event);
  return all;
}

void KeepNewestEvents(pb::JobEvents* events, int limit, size_t max_bytes) {
  const int count = events->events_size();
  int first = count;  // the oldest kept
  size_t bytes = 0;
  while (first > 0 && (limit <= 0 || count - first < limit)) {
    // The event, its tag and its length.
    const size_t cost = events->events(first - 1).ByteSizeLong() + 8;
    if (bytes + cost > max_bytes) break;
    bytes += cost;
    --first;
  }
  if (first == 0) return;
  events->mutable_events()->DeleteSubrange(0, first);
  events->set_left_out(events->left_out() + first);
}

std::string FormatJobEvents(const pb::JobEvents& events) {
  std::string out;
  for (const auto& event : events.events()) {
    const std::time_t seconds =
        static_cast<std::time_t>(event.unix_ms() / 1000);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char when[32];
    std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &utc);
    absl::StrAppendFormat(
        &out, "%s.%03d  gen %-4s %-15s %-10s %s\n", when,
        static_cast<int>(event.unix_ms() % 1000),
        event.generation() < 0 ? "-" : std::to_string(event.generation()),
        event.kind(),
        event.machine_rank() < 0
            ? "job"
            : absl::StrCat("machine ", event.machine_rank()),
        TerminalSafe(event.text()));
  }
  return out;
}

}  // namespace trl

// The job's history: registrations, generations, lost and rejoined
// machines, stops with their cause, the end. Kept in memory (the last
// kMaxEvents) and appended, one JSON line each, to a file beside the job's
// state file, so that a coordinator restarted on the same job shows what
// came before it, and `trl-coord events` shows it after the job ended.
#ifndef TRL_COORDINATOR_RECORD_EVENTS_H_
#define TRL_COORDINATOR_RECORD_EVENTS_H_

#include <deque>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/trl_launch.pb.h"

namespace trl {

class JobEventLog {
 public:
  static constexpr size_t kMaxEvents = 10000;

  // The file of the job whose state is kept in `state_file`.
  static std::string PathFor(const std::string& state_file);

  // Events go to `path` ("" : memory only). A resumed job keeps the events
  // already there; a new one starts the file anew.
  JobEventLog(std::string path, bool resume);
  ~JobEventLog();
  JobEventLog(const JobEventLog&) = delete;
  JobEventLog& operator=(const JobEventLog&) = delete;

  // Stamps `event` with the wall clock if it has no time, keeps it, and
  // appends it to the file (best effort: a full disk loses history, never
  // the job; the first failure is logged): at once, or with the next
  // Flush when `deferred` (a storm of 16,384 registrations is one write a
  // tick, not 16,384).
  void Append(trl::launch::v1::JobEvent event, bool deferred = false);
  // Writes what was deferred.
  void Flush();
  trl::launch::v1::JobEvents All() const;

 private:
  void Rewrite();

  const std::string path_;
  int fd_ = -1;
  size_t lines_in_file_ = 0;
  std::string pending_;  // deferred lines, not yet written
  size_t pending_lines_ = 0;
  bool told_of_failure_ = false;
  std::deque<trl::launch::v1::JobEvent> events_;
};

// The events kept in `path` (the last kMaxEvents), for `trl-coord events`.
// Lines that do not parse are skipped. NotFound when there is no file; an
// error naming why for one that is not ours to trust (a link, another
// owner, writable by others: common/private_files.h).
absl::StatusOr<trl::launch::v1::JobEvents> ReadJobEvents(
    const std::string& path);

// Keeps the newest of `events`: at most `limit` (0: no limit) and at most
// `max_bytes` of them serialised; the rest are counted in left_out.
void KeepNewestEvents(trl::launch::v1::JobEvents* events, int limit,
                      size_t max_bytes);

// One line per event: time (UTC), generation, kind, machine, text.
std::string FormatJobEvents(const trl::launch::v1::JobEvents& events);

}  // namespace trl

#endif  // TRL_COORDINATOR_RECORD_EVENTS_H_

#include "agent/cleanup/exit_ledger.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/procfs/process_facts.h"
#include "common/kernel_files.h"
#include "common/private_files.h"

namespace trl {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxRecordBytes = 512;
constexpr absl::string_view kStartSuffix = ".start";
constexpr absl::string_view kExitSuffix = ".exit";
constexpr absl::string_view kStoppingPrefix = "stopping.";

// FNV-1a, 64 bits: the same on every build (std::hash need not be).
std::string HostHash(absl::string_view host_id) {
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : host_id) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, hash >>= 4) out[i] = kHex[hash & 0xf];
  return out;
}

std::string RecordName(int64_t generation, int local_rank,
                       absl::string_view suffix) {
  return absl::StrCat(generation, ".", local_rank, suffix);
}

// Replaces `path` by `contents` through a temp file beside it (O_EXCL, no
// link followed), not synced. Returns whether it did.
bool WriteRecord(const std::string& path, const std::string& contents) {
  const std::string temp = absl::StrCat(path, ".tmp", getpid());
  const int fd = open(
      temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    // A temp file of an earlier process of this pid: removed, tried once.
    if (errno != EEXIST || unlink(temp.c_str()) != 0) return false;
    return WriteRecord(path, contents);
  }
  const bool written = write(fd, contents.data(), contents.size()) ==
                       static_cast<ssize_t>(contents.size());
  close(fd);
  if (!written || rename(temp.c_str(), path.c_str()) != 0) {
    unlink(temp.c_str());
    return false;
  }
  return true;
}

std::optional<std::string> ReadRecord(const std::string& path) {
  auto text = ReadPrivateFile(path, kMaxRecordBytes);
  if (!text.ok()) return std::nullopt;
  return *text;
}

std::vector<std::string> NamesIn(const std::string& dir) {
  std::vector<std::string> names;
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) return names;
  while (const dirent* entry = readdir(listing)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(listing);
  return names;
}

// The starts in `dir`, with the exit of each that has one.
std::vector<std::pair<LedgerStart, std::optional<LedgerExit>>> EntriesIn(
    const std::string& dir) {
  std::vector<std::pair<LedgerStart, std::optional<LedgerExit>>> entries;
  for (const std::string& name : NamesIn(dir)) {
    if (!absl::EndsWith(name, kStartSuffix)) continue;
    const auto text = ReadRecord(absl::StrCat(dir, "/", name));
    if (!text) continue;
    const auto start = ParseStart(*text);
    // A record is where its name says it is, or it is not used.
    if (!start || name != RecordName(start->generation, start->local_rank,
                                     kStartSuffix)) {
      continue;
    }
    std::optional<LedgerExit> exit;
    if (const auto exit_text = ReadRecord(absl::StrCat(
            dir, "/",
            RecordName(start->generation, start->local_rank, kExitSuffix)))) {
      exit = ParseExit(*exit_text);
    }
    entries.emplace_back(*start, exit);
  }
  return entries;
}

// Whether this process may read `pid`'s exit code in /proc/PID/stat: the
// kernel shows 0 to a reader that fails its ptrace read check (another
// user's process without CAP_SYS_PTRACE: root in a container that dropped
// it, with --worker_user), which would pass for success. Its real,
// effective and saved user and group ids must be ours, or we hold
// CAP_SYS_PTRACE.
bool MayReadExitCodeOf(pid_t pid) {
  static const bool may_trace_anyone = [] {
    const std::string status = ReadKernelFile("/proc/self/status");
    const size_t at = status.find("\nCapEff:");
    if (at == std::string::npos) return false;
    unsigned long long caps = 0;
    if (std::sscanf(status.c_str() + at + 9, "%llx", &caps) != 1) return false;
    return ((caps >> 19) & 1) != 0;  // CAP_SYS_PTRACE
  }();
  if (may_trace_anyone) return true;
  const std::string status =
      ReadKernelFile("/proc/" + std::to_string(pid) + "/status");
  auto ids_are = [&status](const char* line, unsigned long mine) {
    const size_t at = status.find(line);
    if (at == std::string::npos) return false;
    unsigned long real = 0, effective = 0, saved = 0;
    return std::sscanf(status.c_str() + at + std::strlen(line), "%lu %lu %lu",
                       &real, &effective, &saved) == 3 &&
           real == mine && effective == mine && saved == mine;
  };
  return ids_are("\nUid:", geteuid()) && ids_are("\nGid:", getegid());
}

// Creates `dir` (mode 0700) if missing, its parent not, and checks that it
// is a directory of ours that nobody else may enter: a directory of that
// name another user planted in a shared /tmp is refused (nothing is kept).
bool MadeOwnDirectory(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return false;
  struct stat info;
  return lstat(dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode) &&
         info.st_uid == geteuid() && (info.st_mode & 077) == 0;
}

bool Stopping(const std::string& dir, int64_t generation) {
  struct stat info;
  return lstat(absl::StrCat(dir, "/", kStoppingPrefix, generation).c_str(),
               &info) == 0;
}

}  // namespace

std::string LedgerDirName(absl::string_view coordinator, int machine_rank,
                          absl::string_view host_id) {
  std::string name;
  for (char c : coordinator.substr(0, 200)) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || c == '.' || c == '-';
    name.push_back(plain ? c : '_');
  }
  return absl::StrCat(name, ".m", machine_rank, ".", HostHash(host_id));
}

std::string FormatStart(const LedgerStart& start) {
  return absl::StrCat(start.run_id, " ", start.generation, " ",
                      start.local_rank, " ", start.pid, " ", start.start_time,
                      "\n");
}

std::optional<LedgerStart> ParseStart(absl::string_view text) {
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::StripSuffix(text, "\n"), ' ');
  if (fields.size() != 5 || !IsValidJobId(std::string(fields[0]))) {
    return std::nullopt;
  }
  LedgerStart start;
  start.run_id = std::string(fields[0]);
  int pid = 0;
  if (!absl::SimpleAtoi(fields[1], &start.generation) ||
      !absl::SimpleAtoi(fields[2], &start.local_rank) ||
      !absl::SimpleAtoi(fields[3], &pid) ||
      !absl::SimpleAtoi(fields[4], &start.start_time) || start.generation < 0 ||
      start.local_rank < 0 || pid <= 0) {
    return std::nullopt;
  }
  start.pid = pid;
  return start;
}

std::string FormatExit(const LedgerExit& exit) {
  return absl::StrCat(exit.exit_code, " ", exit.signal, "\n");
}

std::optional<LedgerExit> ParseExit(absl::string_view text) {
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::StripSuffix(text, "\n"), ' ');
  LedgerExit exit;
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &exit.exit_code) ||
      !absl::SimpleAtoi(fields[1], &exit.signal) || exit.exit_code < 0 ||
      exit.exit_code > 255 || exit.signal < 0 || exit.signal > 64) {
    return std::nullopt;
  }
  return exit;
}

std::optional<LedgerExit> OwnEndFromWaitStatus(int status) {
  if (status < 0) return std::nullopt;
  LedgerExit exit;
  if (WIFEXITED(status)) {
    exit.exit_code = WEXITSTATUS(status);
    return exit;
  }
  if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL) {
    exit.signal = WTERMSIG(status);
    return exit;
  }
  return std::nullopt;
}

LedgerReport ChooseReport(
    const std::vector<std::pair<LedgerStart, std::optional<LedgerExit>>>&
        entries) {
  LedgerReport report;
  const LedgerStart* newest = nullptr;
  for (const auto& [start, exit] : entries) {
    if (newest == nullptr || start.generation > newest->generation) {
      newest = &start;
    }
  }
  if (newest == nullptr) return report;
  report.run_id = newest->run_id;
  report.generation = newest->generation;
  for (const auto& [start, exit] : entries) {
    if (start.generation == report.generation &&
        start.run_id == report.run_id && exit) {
      report.exits[start.local_rank] = *exit;
    }
  }
  return report;
}

std::string DefaultLedgerRoot() {
  // Local to the machine: a home directory shared over NFS would have
  // every guardian of a large job list every host's ledgers ten times a
  // second. Nothing is created here (BeginGeneration does).
  const char* tmp = std::getenv("TMPDIR");
  const std::string base = tmp != nullptr && *tmp == '/' ? tmp : "/tmp";
  return absl::StrCat(base, "/trl-launch-", geteuid(), "/exits");
}

ExitLedger::ExitLedger(std::string root, absl::string_view coordinator,
                       int machine_rank, absl::string_view host_id)
    : root_(root) {
  // Without a host id, no later agent could tell this host's from another's.
  if (!root.empty() && machine_rank >= 0 && !host_id.empty()) {
    dir_ = absl::StrCat(root, "/",
                        LedgerDirName(coordinator, machine_rank, host_id));
  }
}

void ExitLedger::BeginGeneration(
    const std::string& run_id, int64_t generation,
    const std::vector<std::pair<int, pid_t>>& workers) const {
  if (dir_.empty()) return;
  Clear();
  // A coordinator that names no run (another build) gets nothing kept.
  if (!IsValidJobId(run_id)) return;
  const std::string parent = fs::path(root_).parent_path().string();
  if (!MadeOwnDirectory(parent) || !MadeOwnDirectory(root_) ||
      !MadeOwnDirectory(dir_)) {
    return;
  }
  for (const auto& [local_rank, pid] : workers) {
    ProcessLinks links;
    if (!ReadProcessLinks(pid, &links)) continue;  // gone: the agent reaps it
    LedgerStart start{run_id, generation, local_rank, pid, links.start_time};
    WriteRecord(absl::StrCat(dir_, "/",
                             RecordName(generation, local_rank, kStartSuffix)),
                FormatStart(start));
  }
}

void ExitLedger::StoppingGeneration(int64_t generation) const {
  if (dir_.empty() || generation < 0) return;
  WriteRecord(absl::StrCat(dir_, "/", kStoppingPrefix, generation), "");
}

void ExitLedger::RecordExit(int64_t generation, int local_rank,
                            const LedgerExit& exit) const {
  if (dir_.empty()) return;
  const std::string name = RecordName(generation, local_rank, kStartSuffix);
  struct stat info;
  // Only beside its start: a generation that began before this one was
  // written (or a dropped directory) is not brought back.
  if (lstat(absl::StrCat(dir_, "/", name).c_str(), &info) != 0) return;
  WriteRecord(
      absl::StrCat(dir_, "/", RecordName(generation, local_rank, kExitSuffix)),
      FormatExit(exit));
}

LedgerReport ExitLedger::Read() const {
  if (dir_.empty()) return {};
  return ChooseReport(EntriesIn(dir_));
}

void ExitLedger::Clear() const {
  if (dir_.empty()) return;
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

void ExitLedger::RemoveIfUnused() const {
  Clear();
  if (root_.empty()) return;
  // Only when empty (rmdir: other agents' ledgers keep them), and only
  // our own (not what another user planted under that name).
  for (const std::string& dir :
       {root_, fs::path(root_).parent_path().string()}) {
    struct stat info;
    if (lstat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) ||
        info.st_uid != geteuid() || rmdir(dir.c_str()) != 0) {
      return;
    }
  }
}

bool KernelShowsProcessExitCode() {
  static const bool shows = [] {
    utsname name{};
    int major = 0, minor = 0;
    if (uname(&name) != 0 ||
        std::sscanf(name.release, "%d.%d", &major, &minor) != 2) {
      return false;
    }
    return major > 5 || (major == 5 && minor >= 17);
  }();
  return shows;
}

LedgerWatch::LedgerWatch(std::string root, std::string host_id,
                         bool kernel_shows_process_exit_code)
    : root_(std::move(root)),
      host_suffix_(host_id.empty() ? "" : absl::StrCat(".", HostHash(host_id))),
      kernel_shows_process_exit_code_(kernel_shows_process_exit_code) {}

namespace {

// Whether zombie leader `pid`, with threads left, ended alone
// (pthread_exit) rather than with its process. Looked at twice, 2 ms
// apart: a thread takes its SIGKILL a moment before it is marked as
// exiting.
bool LeaderEndedAlone(pid_t pid) {
  if (OtherThreadsAreEnding(pid)) return false;
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return !OtherThreadsAreEnding(pid);
}

}  // namespace

int LedgerWatch::KeepEndsOfZombiesOf(pid_t parent) {
  if (root_.empty() || host_suffix_.empty()) return 0;
  std::map<std::string, Watched> now;
  for (const std::string& name : NamesIn(root_)) {
    if (!absl::EndsWith(name, host_suffix_)) continue;
    Watched watched;
    watched.dir = absl::StrCat(root_, "/", name);
    struct stat info;
    if (lstat(watched.dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
      continue;
    }
    watched.changed_ns =
        static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 +
        info.st_mtim.tv_nsec;
    // An mtime moves in ticks of a few ms: a directory changed within the
    // last 2 s is read again, whatever it says.
    timespec now_ts{};
    clock_gettime(CLOCK_REALTIME, &now_ts);
    const int64_t now_ns =
        static_cast<int64_t>(now_ts.tv_sec) * 1000000000 + now_ts.tv_nsec;
    const auto known = ledgers_.find(name);
    if (known != ledgers_.end() &&
        known->second.changed_ns == watched.changed_ns &&
        now_ns - watched.changed_ns > 2000000000LL) {
      watched.starts = std::move(known->second.starts);
    } else {
      for (const auto& [start, exit] : EntriesIn(watched.dir)) {
        watched.starts.push_back(start);
      }
    }
    now[name] = std::move(watched);
  }
  ledgers_ = std::move(now);
  int written = 0;
  for (const auto& [name, watched] : ledgers_) {
    for (const LedgerStart& start : watched.starts) {
      ProcessLinks links;
      if (!ReadProcessLinks(start.pid, &links) || links.parent != parent ||
          links.start_time != start.start_time) {
        continue;
      }
      const auto done = written_.find(start.pid);
      if (done != written_.end() && done->second == start.start_time) continue;
      if (links.state != 'Z') continue;
      if (links.threads != 1) {
        // Its leader is a zombie with threads left: the process is ending
        // (its exit, a fatal signal: the kernel has told each other thread
        // to end), or the leader ended alone (pthread_exit). Read once
        // every thread has ended: a kernel of 5.17 or later then shows the
        // process's status. An older one shows the leader's own: after a
        // pthread_exit not the process's, now or ever (never written); as
        // the process ends the same unless the leader ended alone first,
        // which shows as 0 (a 0 read after this sight is not written).
        if (!kernel_shows_process_exit_code_) {
          if (LeaderEndedAlone(start.pid)) {
            written_[start.pid] = start.start_time;
          } else {
            seen_ending_[start.pid] = start.start_time;
          }
        }
        continue;
      }
      written_[start.pid] = start.start_time;
      if (!MayReadExitCodeOf(start.pid)) continue;
      const std::optional<LedgerExit> exit =
          OwnEndFromWaitStatus(links.wait_status);
      const auto ending = seen_ending_.find(start.pid);
      if (ending != seen_ending_.end() && ending->second == start.start_time &&
          exit && exit->exit_code == 0 && exit->signal == 0) {
        continue;  // maybe a leader's 0, not the process's (older kernels)
      }
      const std::string path = absl::StrCat(
          watched.dir, "/",
          RecordName(start.generation, start.local_rank, kExitSuffix));
      struct stat info;
      if (!exit || Stopping(watched.dir, start.generation) ||
          lstat(path.c_str(), &info) == 0) {
        continue;  // no own end, or the agent wrote it
      }
      if (WriteRecord(path, FormatExit(*exit))) ++written;
    }
  }
  // Only what a ledger still names is remembered.
  std::map<pid_t, unsigned long long> still;
  for (const auto& [name, watched] : ledgers_) {
    for (const LedgerStart& start : watched.starts) {
      const auto done = written_.find(start.pid);
      if (done != written_.end() && done->second == start.start_time) {
        still.insert(*done);
      }
    }
  }
  written_ = std::move(still);
  return written;
}

int PruneLedgers(const std::string& root, std::chrono::hours age) {
  if (root.empty()) return 0;
  const auto oldest = fs::file_time_type::clock::now() - age;
  int removed = 0;
  for (const std::string& name : NamesIn(root)) {
    const fs::path dir = fs::path(root) / name;
    std::error_code error;
    if (!fs::is_directory(fs::symlink_status(dir, error))) continue;
    bool fresh = fs::last_write_time(dir, error) > oldest;
    for (const auto& entry : fs::directory_iterator(dir, error)) {
      fresh = fresh || entry.last_write_time(error) > oldest;
    }
    if (!fresh && fs::remove_all(dir, error) > 0) ++removed;
  }
  return removed;
}

}  // namespace trl

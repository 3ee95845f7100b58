#include "agent/health/node_health.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/exempt_children.h"

extern char** environ;

namespace trl {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;
constexpr size_t kOutputKept = 4096;
constexpr size_t kReasonBytes = 300;

// The last line with something on it, shortened.
std::string LastLine(const std::string& output) {
  std::string text(absl::StripTrailingAsciiWhitespace(output));
  const size_t newline = text.rfind('\n');
  if (newline != std::string::npos) text = text.substr(newline + 1);
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (text.size() > kReasonBytes) text = text.substr(0, kReasonBytes) + "...";
  return text;
}

}  // namespace

uint64_t MinFreeBytes(double min_free_disk_mb) {
  return static_cast<uint64_t>(min_free_disk_mb * kMiB);
}

std::string MinFreeDiskMbFlag(uint64_t min_free_bytes) {
  // Whole MiB exactly (%g would say 2 TiB as 2.09715e+06); else the
  // shortest decimal the flag's conversion makes these bytes of: 0.03
  // for --min_free_disk_mb 0.03, where %g of the bytes says 0.0299997.
  if (min_free_bytes % kMiB == 0) return absl::StrCat(min_free_bytes / kMiB);
  const double mib = static_cast<double>(min_free_bytes) / kMiB;
  std::string said;
  for (int digits = 1; digits <= 17; ++digits) {
    said = absl::StrFormat("%.*g", digits, mib);
    if (MinFreeBytes(std::strtod(said.c_str(), nullptr)) == min_free_bytes) {
      break;
    }
  }
  return said;
}

std::string DiskSpaceProblem(const std::string& directory, uint64_t free_bytes,
                             uint64_t min_free_bytes) {
  if (free_bytes >= min_free_bytes) return "";
  // The free space rounded down: it never reads as much as the bound.
  return absl::StrFormat(
      "disk: %s has %d MiB free, less than --min_free_disk_mb %s", directory,
      free_bytes / kMiB, MinFreeDiskMbFlag(min_free_bytes));
}

namespace {

// Checks killed that did not go within their reap bound (stuck in the
// kernel): reaped by a later run, exempt from the orphan sweep meanwhile
// (whose own wait has no bound).
std::mutex abandoned_mutex;
std::vector<pid_t> abandoned;

void ReapAbandoned() {
  std::lock_guard<std::mutex> lock(abandoned_mutex);
  for (auto it = abandoned.begin(); it != abandoned.end();) {
    if (waitpid(*it, nullptr, WNOHANG) != 0) {
      ForgetExemptChild(*it);
      it = abandoned.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace

std::string RunHealthCommand(const std::string& command,
                             std::chrono::milliseconds timeout) {
  ReapAbandoned();
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    return absl::StrCat("--health_check could not be run: ",
                        std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // A group of its own (what it starts is killed with it), and none of the
  // agent's blocked or ignored signals.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP |
                                            POSIX_SPAWN_SETSIGMASK |
                                            POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  int rc = 0;
  // Exempt from the orphan sweep of a generation's end while it runs.
  const pid_t pid = SpawnExemptChild([&] {
    pid_t child = -1;
    rc = posix_spawn(&child, argv[0], &actions, &attributes,
                     const_cast<char* const*>(argv), environ);
    return rc == 0 ? child : -1;
  });
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    return absl::StrCat("--health_check could not be run: ", std::strerror(rc));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string output;
  siginfo_t ended = {};
  bool exited = false;
  bool lost = false;  // reaped by someone else: its status is unknown
  bool timed_out = false;
  bool open = true;
  char buffer[4096];
  const auto read_some = [&] {
    const ssize_t n = read(out[0], buffer, sizeof(buffer));
    if (n > 0) {
      output.append(buffer, static_cast<size_t>(n));
      if (output.size() > 2 * kOutputKept) {
        output.erase(0, output.size() - kOutputKept);
      }
    } else if (n == 0) {
      open = false;
    }
    return n > 0;
  };
  while (true) {
    // Exited? (WNOWAIT: its zombie keeps the pid, and the group id, until
    // the group is killed below.) Looked for every 50 ms at most: a child
    // it left in the background may hold the pipe open.
    siginfo_t info = {};
    if (waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0) {
      if (info.si_pid == pid) {
        ended = info;
        exited = true;
        break;
      }
    } else if (errno == ECHILD) {
      lost = true;
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    const int wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 50));
    if (open) {
      pollfd readable = {out[0], POLLIN, 0};
      if (poll(&readable, 1, wait_ms) > 0) read_some();
    } else {
      usleep(static_cast<useconds_t>(wait_ms) * 1000);
    }
  }
  if (!lost) {
    kill(-pid, SIGKILL);  // the group: whatever it left behind
    // Reaped within a bound: a check stuck in the kernel is left to a
    // later run.
    const auto reap_until =
        std::chrono::steady_clock::now() + std::chrono::seconds(2);
    bool reaped = false;
    while (!(reaped = waitpid(pid, nullptr, WNOHANG) != 0) &&
           std::chrono::steady_clock::now() < reap_until) {
      usleep(10000);
    }
    if (reaped) {
      ForgetExemptChild(pid);
    } else {
      std::lock_guard<std::mutex> lock(abandoned_mutex);
      abandoned.push_back(pid);
    }
    // What it started, reparented to this subreaper, keeps its group id.
    const auto leftovers_until =
        std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < leftovers_until) {
      const pid_t child = waitpid(-pid, nullptr, WNOHANG);
      if (child < 0) break;  // none left in the group
      if (child == 0) usleep(10000);
    }
  }
  // What it wrote before it exited.
  pollfd readable = {out[0], POLLIN, 0};
  while (open && poll(&readable, 1, 0) > 0 && read_some()) {
  }
  close(out[0]);
  const std::string said = LastLine(output);
  const std::string tail = said.empty() ? "" : absl::StrCat(": ", said);
  if (timed_out) {
    return absl::StrFormat(
        "--health_check did not finish within %g s (killed)%s",
        timeout.count() / 1000.0, tail);
  }
  if (lost) {
    return absl::StrCat("--health_check ended without its status", tail);
  }
  if (ended.si_code != CLD_EXITED) {
    return absl::StrCat("--health_check was killed by signal ", ended.si_status,
                        tail);
  }
  if (ended.si_status != 0) {
    return absl::StrCat("--health_check exited ", ended.si_status, tail);
  }
  return "";
}

std::string CheckNodeHealth(const HealthCheckOptions& options) {
  if (options.min_free_bytes > 0) {
    for (const std::string& directory : options.directories) {
      if (directory.empty()) continue;
      const FreeSpace space = FreeSpaceWithin(directory, options.disk_timeout,
                                              options.statvfs_function);
      if (!space.problem.empty()) return space.problem;
      std::string problem =
          DiskSpaceProblem(directory, space.free_bytes, options.min_free_bytes);
      if (!problem.empty()) return problem;
    }
  }
  if (!options.command.empty()) {
    return RunHealthCommand(options.command, options.command_timeout);
  }
  return "";
}

}  // namespace trl

#include "agent/health/node_health.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

extern char** environ;

namespace trl {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;
constexpr size_t kOutputKept = 4096;
constexpr size_t kReasonBytes = 300;

// The free space under `directory`, or of the nearest directory above it
// that exists (a log directory is made when the first generation starts).
std::string DiskProblem(const std::string& directory, uint64_t min_free) {
  std::filesystem::path at = std::filesystem::absolute(directory);
  struct statvfs fs = {};
  while (statvfs(at.c_str(), &fs) != 0) {
    if (!at.has_parent_path() || at.parent_path() == at) {
      return absl::StrCat("disk: cannot read the free space of ", directory,
                          ": ", std::strerror(errno));
    }
    at = at.parent_path();
  }
  return DiskSpaceProblem(
      directory, static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize, min_free);
}

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

std::string DiskSpaceProblem(const std::string& directory, uint64_t free_bytes,
                             uint64_t min_free_bytes) {
  if (free_bytes >= min_free_bytes) return "";
  return absl::StrFormat(
      "disk: %s has %d MiB free, less than --min_free_disk_mb %d", directory,
      free_bytes / kMiB, min_free_bytes / kMiB);
}

std::string RunHealthCommand(const std::string& command,
                             std::chrono::milliseconds timeout) {
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
  // A group of its own: what it starts is killed with it.
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, &attributes,
                             const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    return absl::StrCat("--health_check could not be run: ", std::strerror(rc));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string output;
  int status = 0;
  bool exited = false;
  bool timed_out = false;
  bool open = true;
  char buffer[4096];
  while (!exited) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    // Its exit is looked for every 50 ms: a child it left in the
    // background may hold the pipe open.
    if (open) {
      pollfd readable = {out[0], POLLIN, 0};
      const int wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 50));
      if (poll(&readable, 1, wait_ms) > 0) {
        const ssize_t n = read(out[0], buffer, sizeof(buffer));
        if (n > 0) {
          output.append(buffer, static_cast<size_t>(n));
          if (output.size() > 2 * kOutputKept) {
            output.erase(0, output.size() - kOutputKept);
          }
        } else if (n == 0) {
          open = false;
        }
      }
    } else {
      usleep(10000);
    }
    exited = waitpid(pid, &status, WNOHANG) == pid;
  }
  kill(-pid, SIGKILL);  // the group: whatever it left behind
  if (!exited) {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  // What it wrote before it exited.
  pollfd readable = {out[0], POLLIN, 0};
  while (open && poll(&readable, 1, 0) > 0) {
    const ssize_t n = read(out[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    output.append(buffer, static_cast<size_t>(n));
  }
  close(out[0]);
  const std::string said = LastLine(output);
  const std::string tail = said.empty() ? "" : absl::StrCat(": ", said);
  if (timed_out) {
    return absl::StrFormat(
        "--health_check did not finish within %g s (killed)%s",
        timeout.count() / 1000.0, tail);
  }
  if (WIFSIGNALED(status)) {
    return absl::StrCat("--health_check was killed by signal ",
                        WTERMSIG(status), tail);
  }
  if (WEXITSTATUS(status) != 0) {
    return absl::StrCat("--health_check exited ", WEXITSTATUS(status), tail);
  }
  return "";
}

std::string CheckNodeHealth(const HealthCheckOptions& options) {
  if (options.min_free_bytes > 0) {
    for (const std::string& directory : options.directories) {
      if (directory.empty()) continue;
      std::string problem = DiskProblem(directory, options.min_free_bytes);
      if (!problem.empty()) return problem;
    }
  }
  if (!options.command.empty()) {
    return RunHealthCommand(options.command, options.command_timeout);
  }
  return "";
}

}  // namespace trl

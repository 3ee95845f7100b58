#include "agent/workers/stack_capture.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/core/stack_summary.h"
#include "agent/procfs/process_facts.h"
#include "common/kernel_files.h"
#include "common/worker_command.h"

extern char** environ;

namespace trl {

namespace fs = std::filesystem;

namespace {

// At most this many processes of one worker's tree, threads of one
// process, and bytes of one thread's kernel stack; one py-spy run at most
// kPySpyLimit.
constexpr size_t kProcessesCaptured = 64;
constexpr int kThreadsCaptured = 256;
constexpr size_t kKernelStackBytes = 16 * 1024;
constexpr std::chrono::milliseconds kPySpyLimit{5000};

// Each thread's state, wait channel and kernel stack.
std::string KernelView(pid_t pid, char* main_state, std::string* main_wchan) {
  std::string text;
  const std::string task_dir = absl::StrCat("/proc/", pid, "/task");
  std::error_code error;
  int threads = 0;
  for (const auto& entry : fs::directory_iterator(task_dir, error)) {
    if (++threads > kThreadsCaptured) {
      absl::StrAppend(&text, "  (more threads, not read)\n");
      break;
    }
    const std::string tid = entry.path().filename().string();
    const std::string stat = ReadKernelFile(entry.path() / "stat");
    // "TID (comm) S ...": the state follows the last ')'.
    const size_t close = stat.rfind(')');
    const char state = close != std::string::npos && close + 2 < stat.size()
                           ? stat[close + 2]
                           : '?';
    const size_t open = stat.find('(');
    const std::string comm = open != std::string::npos && close > open
                                 ? stat.substr(open + 1, close - open - 1)
                                 : "?";
    const std::string wchan = ReadKernelFile(entry.path() / "wchan");
    if (tid == std::to_string(pid)) {
      *main_state = state;
      *main_wchan = wchan;
    }
    absl::StrAppend(&text, "  thread ", tid, " (", comm,
                    "): ", WhereInTheKernel(state, wchan), "\n");
    const std::string stack =
        ReadKernelFile(entry.path() / "stack", kKernelStackBytes);
    for (absl::string_view line : absl::StrSplit(stack, '\n')) {
      if (!line.empty()) absl::StrAppend(&text, "      ", line, "\n");
    }
  }
  if (error)
    absl::StrAppend(&text, "  (its threads cannot be read: it ended)\n");
  return text;
}

struct Bounded {
  std::string output;
  bool timed_out = false;
  bool cut_short = false;  // killed once `abandoned` said so
  int status = -1;
};

// How often a run looks at `abandoned`: a second stop order (a second
// Ctrl-C) must not wait for py-spy's 5 s while the workers are killed.
constexpr std::chrono::milliseconds kAbandonedLook{50};

// Runs `argv` with its output (stdout and stderr) read back, killed at
// `limit` or once `abandoned` says so.
Bounded RunBounded(const std::vector<std::string>& argv,
                   std::chrono::milliseconds limit,
                   const std::function<bool()>& abandoned) {
  Bounded result;
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    result.output = std::strerror(errno);
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc =
      posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    result.output = std::strerror(rc);
    return result;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  char buffer[4096];
  while (true) {
    if (abandoned && abandoned()) {
      result.cut_short = true;
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd readable = {out[0], POLLIN, 0};
    const int ready = poll(
        &readable, 1, static_cast<int>(std::min(left, kAbandonedLook).count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline, checked above
    const ssize_t n = read(out[0], buffer, sizeof(buffer));
    if (n <= 0) break;  // EOF: it is done
    if (result.output.size() < (1u << 20)) result.output.append(buffer, n);
  }
  close(out[0]);
  if (result.timed_out || result.cut_short) kill(pid, SIGKILL);
  while (waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

}  // namespace

CapturedStacks CaptureStacks(pid_t worker, const std::string& py_spy,
                             std::chrono::steady_clock::time_point deadline,
                             const std::function<bool()>& abandoned) {
  CapturedStacks captured;
  char main_state = '?';
  std::string main_wchan;
  std::string python_where;
  const auto left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
  };
  for (pid_t pid : ProcessTree(worker, kProcessesCaptured)) {
    if (left().count() <= 0 || (abandoned && abandoned())) {
      captured.text +=
          "(the capture stopped here: its time was up, or the workers are "
          "being stopped)\n";
      break;
    }
    // comm, not cmdline: reading another process's cmdline takes its
    // memory map's lock, which a process stuck in the kernel may hold.
    std::string comm = ReadKernelFile(absl::StrCat("/proc/", pid, "/comm"));
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    absl::StrAppend(&captured.text, "process ", pid,
                    pid == worker ? " (the worker)" : "", ": ",
                    comm.empty() ? std::string("?") : comm, "\n");
    char state = '?';
    std::string wchan;
    captured.text += KernelView(pid, &state, &wchan);
    if (pid == worker) {
      main_state = state;
      main_wchan = wchan;
    }
    // py-spy for the worker and the Python processes under it (PyTorch
    // names its threads and DataLoader workers pt_...).
    const bool python = pid == worker || absl::StartsWith(comm, "python") ||
                        absl::StartsWith(comm, "pt_");
    if (py_spy.empty() || !python) continue;
    const auto limit = std::min(left(), kPySpyLimit);
    if (limit < std::chrono::milliseconds(200)) continue;
    std::vector<std::string> argv = {
        py_spy,    "dump", "--pid", std::to_string(pid), "--full-filenames",
        "--native"};
    Bounded dump = RunBounded(argv, limit, abandoned);
    if (!dump.timed_out && !dump.cut_short && dump.status != 0 &&
        left() > std::chrono::milliseconds(200)) {
      // Native frames need what not every build or machine has: the
      // Python frames alone, then.
      argv.pop_back();
      dump = RunBounded(argv, std::min(left(), kPySpyLimit), abandoned);
    }
    if (dump.cut_short) {
      captured.text += "  py-spy: cut short (the workers are being stopped)\n";
    } else if (dump.timed_out) {
      absl::StrAppend(&captured.text, "  py-spy: no answer within ",
                      limit.count(), " ms\n");
    } else if (dump.status != 0) {
      absl::StrAppend(&captured.text, "  py-spy: failed: ", dump.output, "\n");
    } else {
      for (absl::string_view line : absl::StrSplit(dump.output, '\n')) {
        absl::StrAppend(&captured.text, "  | ", line, "\n");
      }
      if (python_where.empty()) python_where = WhereInPython(dump.output);
    }
  }
  if (py_spy.empty()) {
    captured.text +=
        "(no py-spy found next to the job's Python or on PATH: the kernel's "
        "view only; pip install py-spy for Python stacks)\n";
  }
  captured.where = !python_where.empty()
                       ? python_where
                       : WhereInTheKernel(main_state, main_wchan);
  return captured;
}

bool TrustedToRun(const std::string& program) {
  // The file, and every directory above it: owned by root or by this
  // process's user, writable by nobody else (as sudo's secure_path asks).
  const uid_t self = geteuid();
  fs::path at = fs::path(program);
  for (int depth = 0; depth < 64; ++depth) {
    struct stat info;
    if (stat(at.c_str(), &info) != 0) return false;
    if ((info.st_uid != 0 && info.st_uid != self) ||
        (info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      // A sticky world-writable directory (/tmp) lets its users replace
      // only their own files: still not to be trusted here.
      return false;
    }
    if (!at.has_parent_path() || at.parent_path() == at) return true;
    at = at.parent_path();
  }
  return false;
}

std::string FindPySpy(const std::string& interpreter,
                      const std::string& search_path, std::string* refused) {
  std::string path = search_path;
  if (interpreter.find('/') != std::string::npos) {
    path = fs::path(interpreter).parent_path().string() + ":" + path;
  }
  auto found = ResolveExecutable("py-spy", path);
  if (!found.ok()) return "";
  std::error_code error;
  const fs::path real = fs::canonical(*found, error);
  if (error || !TrustedToRun(real.string())) {
    if (refused != nullptr) *refused = *found;
    return "";
  }
  return real.string();
}

}  // namespace trl

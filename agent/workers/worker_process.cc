#include "agent/workers/worker_process.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/daemon_process.h"

namespace trl {
namespace {

// argv/envp as the NULL-terminated arrays execve wants, built before fork so
// that the child only makes async-signal-safe calls.
class CStringArray {
 public:
  explicit CStringArray(std::vector<std::string> strings)
      : strings_(std::move(strings)) {
    for (auto& s : strings_) pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
  }
  char** get() { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

// EMFILE/ENFILE: the machine (or this process) is out of descriptors, a
// shortage rather than a fault of the worker.
absl::Status PipeError() {
  const std::string message = absl::StrCat("pipe: ", std::strerror(errno));
  return errno == EMFILE || errno == ENFILE
             ? absl::ResourceExhaustedError(message)
             : absl::InternalError(message);
}

void CloseIfOpen(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Spawn(
    const WorkerSpec& spec) {
  std::vector<std::string> env_strings;
  for (const auto& [name, value] : spec.environment) {
    env_strings.push_back(absl::StrCat(name, "=", value));
  }
  CStringArray argv(spec.argv);
  CStringArray envp(std::move(env_strings));
  const char* path = spec.executable.c_str();
  const char* cwd =
      spec.working_directory.empty() ? nullptr : spec.working_directory.c_str();
  const char* cgroup_procs =
      spec.cgroup_procs_path.empty() ? nullptr : spec.cgroup_procs_path.c_str();
  const WorkerUser* user = spec.user ? &*spec.user : nullptr;

  int out[2], err[2], exec_status[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    return PipeError();
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return PipeError();
  }
  if (pipe2(exec_status, O_CLOEXEC) != 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    return PipeError();
  }
  const pid_t parent = getpid();
  const rlimit open_files = OriginalOpenFileLimit();
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd :
         {out[0], out[1], err[0], err[1], exec_status[0], exec_status[1]}) {
      close(fd);
    }
    return absl::ResourceExhaustedError(
        absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the agent is already gone
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction default_action = {};
    default_action.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &default_action, nullptr);
    // The daemon raised its own descriptor limit; workers get the one they
    // would have had without it.
    setrlimit(RLIMIT_NOFILE, &open_files);
    if (cgroup_procs != nullptr) {
      // "0" moves the writing process; failing that, the process group and
      // the subreaper still hold it.
      int cgroup_fd = open(cgroup_procs, O_WRONLY | O_CLOEXEC);
      if (cgroup_fd >= 0) {
        ssize_t ignored = write(cgroup_fd, "0", 1);
        (void)ignored;
        close(cgroup_fd);
      }
    }
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    int error = 0;
    if (user != nullptr) {
      // Groups first (they need root), the user last: from then on it holds
      // no privilege. A change of user clears the parent-death signal: set
      // it again, and check the agent is still there.
      if (setgroups(user->groups.size(), user->groups.data()) != 0 ||
          setgid(user->gid) != 0 || setuid(user->uid) != 0) {
        error = errno;
        ssize_t ignored = write(exec_status[1], &error, sizeof(error));
        (void)ignored;
        _exit(127);
      }
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
    }
    if (cwd != nullptr && chdir(cwd) != 0) {
      error = errno;
    } else {
      execve(path, argv.get(), envp.get());
      error = errno;
    }
    ssize_t ignored = write(exec_status[1], &error, sizeof(error));
    (void)ignored;
    _exit(127);
  }
  // Also set the group from the parent, so signalling the group cannot race
  // with the child's own setpgid.
  setpgid(pid, pid);
  close(out[1]);
  close(err[1]);
  close(exec_status[1]);
  int child_error = 0;
  ssize_t n;
  do {
    n = read(exec_status[0], &child_error, sizeof(child_error));
  } while (n < 0 && errno == EINTR);
  close(exec_status[0]);
  std::unique_ptr<WorkerProcess> process(
      new WorkerProcess(pid, out[0], err[0]));
  if (n == sizeof(child_error)) {
    process->Wait();
    return absl::FailedPreconditionError(
        absl::StrCat(cwd != nullptr ? "cannot start in " : "cannot execute ",
                     cwd != nullptr ? spec.working_directory : spec.executable,
                     ": ", std::strerror(child_error)));
  }
  return process;
}

WorkerProcess::~WorkerProcess() {
  if (!reaped_) {
    SignalGroup(SIGKILL);
    Wait();
  }
  CloseIfOpen(stdout_fd_);
  CloseIfOpen(stderr_fd_);
}

int WorkerProcess::TakeStdout() {
  int fd = stdout_fd_;
  stdout_fd_ = -1;
  return fd;
}

int WorkerProcess::TakeStderr() {
  int fd = stderr_fd_;
  stderr_fd_ = -1;
  return fd;
}

void WorkerProcess::SignalGroup(int signal) const {
  if (!reaped_) kill(-pid_, signal);
}

bool WorkerProcess::HasEnded() const {
  siginfo_t info = {};
  int rc;
  do {
    rc = waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT);
  } while (rc < 0 && errno == EINTR);
  if (rc != 0) return errno == ECHILD;  // reaped: no longer our child
  return info.si_pid == pid_;
}

ProcessExit WorkerProcess::Wait() {
  ProcessExit result;
  siginfo_t info = {};
  int rc;
  // Wait without reaping: while the leader is a zombie its pid stays
  // reserved, so the group id below cannot name an unrelated group.
  do {
    rc = waitid(P_PID, pid_, &info, WEXITED | WNOWAIT);
  } while (rc < 0 && errno == EINTR);
  // End whatever the worker left in its group (children it forked).
  kill(-pid_, SIGKILL);
  int status = 0;
  pid_t reaped;
  do {
    reaped = waitpid(pid_, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  reaped_ = true;
  if (reaped == pid_) {
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace trl

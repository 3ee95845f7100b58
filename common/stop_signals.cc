#include "common/stop_signals.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

#include "common/kernel_files.h"

namespace trl {
namespace {

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) {
    sigaddset(&set, signal);
  }
  return set;
}

// The command name of process `pid`; empty when it is gone or unknown (a
// sender outside our PID namespace has pid 0).
std::string CommandOf(pid_t pid) {
  if (pid <= 0) return "";
  const std::string comm =
      ReadKernelFile("/proc/" + std::to_string(pid) + "/comm", 256);
  return comm.substr(0, comm.find('\n'));
}

}  // namespace

bool SenderSignalsWholeSlurmStep(const std::string& sender_command) {
  return sender_command == "slurmstepd";
}

std::string SignalName(int signal) {
  const char* name = sigabbrev_np(signal);
  return name ? std::string("SIG") + name : "signal " + std::to_string(signal);
}

int PendingStopSignal() {
  const sigset_t set = StopSignals();
  const timespec now = {0, 0};
  const int signal = sigtimedwait(&set, nullptr, &now);
  return signal > 0 ? signal : 0;
}

void BlockStopSignals() {
  const sigset_t set = StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void IgnoreBrokenPipes() { signal(SIGPIPE, SIG_IGN); }

StopSignalWatcher::StopSignalWatcher(
    std::function<void(const StopSignal&)> on_signal) {
  const sigset_t set = StopSignals();
  signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC);
  if (pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
  thread_ = std::thread([this, on_signal = std::move(on_signal)] {
    while (true) {
      pollfd polls[2] = {{signal_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      if (poll(polls, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (polls[1].revents != 0) return;  // the watcher is being destroyed
      signalfd_siginfo info;
      if (read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
        StopSignal received;
        received.number = static_cast<int>(info.ssi_signo);
        received.workers_have_it = SenderSignalsWholeSlurmStep(
            CommandOf(static_cast<pid_t>(info.ssi_pid)));
        on_signal(received);
      }
    }
  });
}

StopSignalWatcher::~StopSignalWatcher() {
  if (wake_[1] >= 0) {
    char byte = 1;
    ssize_t ignored = write(wake_[1], &byte, 1);
    (void)ignored;
  }
  thread_.join();
  for (int fd : {signal_fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) close(fd);
  }
}

}  // namespace trl

#include "common/stop_signals.h"

#include <signal.h>

#include <cerrno>
#include <ctime>

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

}  // namespace

void BlockStopSignals() {
  const sigset_t set = StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

StopSignalWatcher::StopSignalWatcher(std::function<void(int)> on_signal) {
  thread_ = std::thread([this, on_signal = std::move(on_signal)] {
    const sigset_t set = StopSignals();
    const timespec poll_interval = {0, 100 * 1000 * 1000};
    while (!done_) {
      const int signal = sigtimedwait(&set, nullptr, &poll_interval);
      if (signal > 0) on_signal(signal);
    }
  });
}

StopSignalWatcher::~StopSignalWatcher() {
  done_ = true;
  thread_.join();
}

}  // namespace trl

#include "worker/heartbeat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace trl::worker {

bool Heartbeat::Beat() const {
  if (path_.empty()) return true;
  if (utimensat(AT_FDCWD, path_.c_str(), nullptr, 0) == 0) return true;
  const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  close(fd);
  return true;
}

HeartbeatThread::HeartbeatThread(std::string path,
                                 std::chrono::milliseconds interval)
    : heartbeat_(std::move(path)), interval_(interval) {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    do {
      heartbeat_.Beat();
    } while (!stop_.wait_for(lock, interval_, [this] { return stopping_; }));
  });
}

HeartbeatThread::~HeartbeatThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  thread_.join();
}

}  // namespace trl::worker

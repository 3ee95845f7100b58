#include "agent/worker_output.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace trl {

WorkerOutput::WorkerOutput(int rank, int stdout_fd, int stderr_fd,
                           Console* console, const std::string& log_path)
    : prefix_("[rank " + std::to_string(rank) + "] "),
      fds_{stdout_fd, stderr_fd},
      wake_{-1, -1},
      console_(console) {
  if (!log_path.empty()) log_.open(log_path, std::ios::app);
  if (pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
  thread_ = std::thread([this] { Pump(); });
}

WorkerOutput::~WorkerOutput() {
  Finish(0);
  for (int fd : wake_) {
    if (fd >= 0) close(fd);
  }
}

void WorkerOutput::Finish(int timeout_ms) {
  if (!thread_.joinable()) return;
  if (timeout_ms > 0) {
    // Give the pump time to reach EOF on its own.
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (fds_[0] < 0 && fds_[1] < 0) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (wake_[1] >= 0) {
    char byte = 1;
    ssize_t ignored = write(wake_[1], &byte, 1);
    (void)ignored;
  }
  thread_.join();
}

std::vector<std::string> WorkerOutput::LastLines() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {last_lines_.begin(), last_lines_.end()};
}

void WorkerOutput::Emit(bool is_stderr, std::string& pending,
                        bool flush_partial) {
  size_t start = 0;
  while (true) {
    const size_t newline = pending.find('\n', start);
    if (newline == std::string::npos) break;
    std::string_view line(pending.data() + start, newline - start);
    console_->WriteLine(is_stderr, prefix_, line);
    if (log_.is_open()) log_ << line << '\n';
    {
      std::lock_guard<std::mutex> lock(mutex_);
      last_lines_.emplace_back(line);
      if (last_lines_.size() > kLinesKept) last_lines_.pop_front();
    }
    start = newline + 1;
  }
  pending.erase(0, start);
  if (flush_partial && !pending.empty()) {
    pending.push_back('\n');
    Emit(is_stderr, pending, false);
  }
  if (log_.is_open()) log_.flush();
}

void WorkerOutput::Pump() {
  std::string pending[2];
  char buffer[8192];
  while (true) {
    pollfd polls[3];
    int count = 0;
    int which[3];
    for (int i = 0; i < 2; ++i) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (fds_[i] >= 0) {
        polls[count] = {fds_[i], POLLIN, 0};
        which[count++] = i;
      }
    }
    if (count == 0) break;
    polls[count] = {wake_[0], POLLIN, 0};
    which[count] = -1;
    if (poll(polls, count + 1, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (polls[count].revents != 0) break;  // told to stop
    for (int p = 0; p < count; ++p) {
      if (polls[p].revents == 0) continue;
      const int i = which[p];
      const ssize_t n = read(fds_[i], buffer, sizeof(buffer));
      if (n > 0) {
        pending[i].append(buffer, n);
        Emit(i == 1, pending[i], false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        Emit(i == 1, pending[i], true);
        std::lock_guard<std::mutex> lock(mutex_);
        close(fds_[i]);
        fds_[i] = -1;
      }
    }
  }
  for (int i = 0; i < 2; ++i) {
    Emit(i == 1, pending[i], true);
    std::lock_guard<std::mutex> lock(mutex_);
    if (fds_[i] >= 0) close(fds_[i]);
    fds_[i] = -1;
  }
}

}  // namespace trl

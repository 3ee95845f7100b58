#include "agent/workers/worker_output.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace trl {

WorkerOutput::WorkerOutput(int rank, int stdout_fd, int stderr_fd,
                           Console* console, const std::string& log_path,
                           std::atomic<uint64_t>* bytes_read,
                           int64_t generation)
    : rank_(rank),
      generation_(generation),
      prefix_("[rank " + std::to_string(rank) + "] "),
      log_path_(log_path),
      fds_{stdout_fd, stderr_fd},
      wake_{-1, -1},
      console_(console),
      bytes_read_(bytes_read) {
  if (!log_path.empty()) {
    log_.open(log_path, std::ios::app);
    if (!log_.is_open()) {
      log_failed_ = true;
      ComponentLogger("agent")->warn(
          "cannot open the log file {}: {}; rank {}'s output goes to the "
          "console only",
          log_path, std::strerror(errno), rank);
    }
  }
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
    // Give the pump time to reach EOF on its own: it says when it has.
    std::unique_lock<std::mutex> lock(mutex_);
    drained_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [this] { return fds_[0] < 0 && fds_[1] < 0; });
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

std::string WorkerOutput::KeptLine(std::string_view line) {
  if (line.size() <= kKeptLineBytes) return std::string(line);
  return absl::StrCat(std::string(line.substr(0, kKeptLineBytes)), "... [",
                      line.size() - kKeptLineBytes, " bytes cut]");
}

void WorkerOutput::WriteLog(std::string_view line) {
  if (!log_.is_open() || log_failed_) return;
  log_ << line << '\n';
  CheckLog();
}

void WorkerOutput::FlushLog() {
  if (!log_.is_open() || log_failed_) return;
  log_.flush();
  CheckLog();
}

void WorkerOutput::CheckLog() {
  if (log_) return;
  // A full disk or a removed directory: say so once, keep the console.
  log_failed_ = true;
  ComponentLogger("agent")->warn(
      "cannot write the log file {} (disk full?); {}output goes to the "
      "console only from now on",
      log_path_, prefix_);
}

void WorkerOutput::EmitLine(bool is_stderr, std::string_view line) {
  console_->WriteLine(is_stderr, prefix_, line);
  console_->logs().Append(rank_, is_stderr, line, generation_);
  WriteLog(line);
  std::lock_guard<std::mutex> lock(mutex_);
  last_lines_.push_back(KeptLine(line));
  if (last_lines_.size() > kLinesKept) last_lines_.pop_front();
}

void WorkerOutput::Emit(bool is_stderr, Pending& pending, bool flush_partial) {
  std::string& text = pending.text;
  size_t start = 0;
  while (true) {
    const size_t newline = text.find('\n', std::max(start, pending.scanned));
    if (newline == std::string::npos) break;
    EmitLine(is_stderr, std::string_view(text).substr(start, newline - start));
    start = newline + 1;
  }
  // A line that grows past the bound is passed on in pieces: the memory
  // held for a worker that never prints a newline stays bounded.
  while (text.size() - start >= kMaxLineBytes ||
         (flush_partial && text.size() > start)) {
    const size_t piece = std::min(kMaxLineBytes, text.size() - start);
    EmitLine(is_stderr, std::string_view(text).substr(start, piece));
    start += piece;
  }
  text.erase(0, start);
  pending.scanned = text.size();
  FlushLog();
}

void WorkerOutput::Pump() {
  Pending pending[2];
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
        if (bytes_read_ != nullptr) {
          bytes_read_->fetch_add(static_cast<uint64_t>(n),
                                 std::memory_order_relaxed);
        }
        pending[i].text.append(buffer, n);
        Emit(i == 1, pending[i], false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        Emit(i == 1, pending[i], true);
        std::lock_guard<std::mutex> lock(mutex_);
        close(fds_[i]);
        fds_[i] = -1;
        drained_.notify_all();
      }
    }
  }
  for (int i = 0; i < 2; ++i) {
    Emit(i == 1, pending[i], true);
    std::lock_guard<std::mutex> lock(mutex_);
    if (fds_[i] >= 0) close(fds_[i]);
    fds_[i] = -1;
    drained_.notify_all();
  }
}

}  // namespace trl

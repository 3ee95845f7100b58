// Pumps one worker's stdout and stderr: each line goes to the console with
// a "[rank N] " prefix and to the rank's log file, and the last lines are
// kept for the failure report. One thread per worker, ended by EOF on both
// pipes.
//
// Memory is bounded whatever the worker prints: a line longer than
// kMaxLineBytes is passed on in pieces of that size (nothing is lost on the
// console or in the log), and the failure report keeps kLinesKept lines of
// at most kKeptLineBytes each. Each byte is scanned for a newline once.
#ifndef TRL_AGENT_WORKERS_WORKER_OUTPUT_H_
#define TRL_AGENT_WORKERS_WORKER_OUTPUT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/console/console.h"

namespace trl {

class WorkerOutput {
 public:
  static constexpr size_t kLinesKept = 20;
  static constexpr size_t kMaxLineBytes = 64 * 1024;
  static constexpr size_t kKeptLineBytes = 1024;

  // Takes ownership of both descriptors. `log_path` may be empty; a log
  // file that cannot be opened or written is reported once (on the
  // agent's log) and the console keeps the output. `bytes_read`, if set,
  // counts every byte read (a progress bar's \r updates included): what
  // the hang watch sees of the worker's output.
  // `generation` labels the lines kept for `trl-coord logs`.
  WorkerOutput(int rank, int stdout_fd, int stderr_fd, Console* console,
               const std::string& log_path,
               std::atomic<uint64_t>* bytes_read = nullptr,
               int64_t generation = -1);
  ~WorkerOutput();
  WorkerOutput(const WorkerOutput&) = delete;
  WorkerOutput& operator=(const WorkerOutput&) = delete;

  // Waits until both pipes are closed, or `timeout_ms` passed (a descendant
  // that escaped the process group may hold them open), then stops.
  void Finish(int timeout_ms);
  std::vector<std::string> LastLines() const;

  // A kept line: at most kKeptLineBytes of `line`, saying how much was cut.
  static std::string KeptLine(std::string_view line);

 private:
  // Text of one pipe not yet passed on, and how much of it holds no
  // newline (scanned already).
  struct Pending {
    std::string text;
    size_t scanned = 0;
  };
  void Pump();
  void Emit(bool is_stderr, Pending& pending, bool flush_partial);
  void EmitLine(bool is_stderr, std::string_view line);
  void WriteLog(std::string_view line);
  void FlushLog();
  void CheckLog();  // reports a failed write, once

  const int rank_;
  const int64_t generation_;
  const std::string prefix_;
  const std::string log_path_;
  int fds_[2];
  int wake_[2];  // a pipe that tells Pump to stop waiting
  Console* console_;
  std::atomic<uint64_t>* const bytes_read_;
  std::ofstream log_;
  bool log_failed_ = false;  // reported once; only the pump thread writes
  mutable std::mutex mutex_;
  std::condition_variable drained_;  // both fds closed (Finish waits)
  std::deque<std::string> last_lines_;
  std::thread thread_;
};

}  // namespace trl

#endif  // TRL_AGENT_WORKERS_WORKER_OUTPUT_H_

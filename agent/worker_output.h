// Pumps one worker's stdout and stderr: each line goes to the console with
// a "[rank N] " prefix and to the rank's log file, and the last lines are
// kept for the failure report. One thread per worker, ended by EOF on both
// pipes.
#ifndef TRL_AGENT_WORKER_OUTPUT_H_
#define TRL_AGENT_WORKER_OUTPUT_H_

#include <deque>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/console.h"

namespace trl {

class WorkerOutput {
 public:
  static constexpr size_t kLinesKept = 20;

  // Takes ownership of both descriptors. `log_path` may be empty.
  WorkerOutput(int rank, int stdout_fd, int stderr_fd, Console* console,
               const std::string& log_path);
  ~WorkerOutput();
  WorkerOutput(const WorkerOutput&) = delete;
  WorkerOutput& operator=(const WorkerOutput&) = delete;

  // Waits until both pipes are closed, or `timeout_ms` passed (a descendant
  // that escaped the process group may hold them open), then stops.
  void Finish(int timeout_ms);
  std::vector<std::string> LastLines() const;

 private:
  void Pump();
  void Emit(bool is_stderr, std::string& pending, bool flush_partial);

  const std::string prefix_;
  int fds_[2];
  int wake_[2];  // a pipe that tells Pump to stop waiting
  Console* console_;
  std::ofstream log_;
  mutable std::mutex mutex_;
  std::deque<std::string> last_lines_;
  std::thread thread_;
};

}  // namespace trl

#endif  // TRL_AGENT_WORKER_OUTPUT_H_

// The signals that stop a job (SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2;
// Slurm uses the last two for pre-emption), received by one thread through
// a signalfd instead of an async handler.
#ifndef TRL_COMMON_STOP_SIGNALS_H_
#define TRL_COMMON_STOP_SIGNALS_H_

#include <functional>
#include <string>
#include <thread>

namespace trl {

// "SIGTERM" for 15, and so on.
std::string SignalName(int signal);

// A blocked stop signal waiting for this process, taken off the queue; 0
// if none. For loops that run before the watcher starts.
int PendingStopSignal();

// Blocks the stop signals in the calling thread. Call it in main before any
// thread starts, so every thread inherits the mask. Workers reset the mask
// before execve.
void BlockStopSignals();

// A daemon whose console is a pipe that closed (`trl-coord start | head`)
// must not die of SIGPIPE: writes fail with EPIPE instead and the job goes
// on. Workers get the default action back before execve.
void IgnoreBrokenPipes();

// A stop signal: its number, and whether the workers were sent it already.
struct StopSignal {
  int number = 0;
  // Slurm's step daemon sent it. Slurm signals every process of a job step
  // itself (scancel, sbatch --signal), the workers included: sending it to
  // them again would run their handlers twice.
  bool workers_have_it = false;
};

// Whether a signal from a process whose command name (/proc/PID/comm) is
// `sender_command` was sent to every process of a Slurm job step.
bool SenderSignalsWholeSlurmStep(const std::string& sender_command);

class StopSignalWatcher {
 public:
  explicit StopSignalWatcher(std::function<void(const StopSignal&)> on_signal);
  ~StopSignalWatcher();
  StopSignalWatcher(const StopSignalWatcher&) = delete;
  StopSignalWatcher& operator=(const StopSignalWatcher&) = delete;

 private:
  int signal_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe that ends the watching thread
  std::thread thread_;
};

}  // namespace trl

#endif  // TRL_COMMON_STOP_SIGNALS_H_

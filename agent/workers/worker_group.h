// The workers of one generation on this machine: started together, watched
// by one waiter thread each, stopped together (a signal to every process
// group, then SIGKILL once the grace period has passed). One more thread
// looks for hangs (agent/core/hang_watch.h); when it finds one, it
// captures what every worker of the group was doing (stack_capture.h),
// then kills the hung ones, naming the detector and where each stood.
//
// Start() must be called from a thread that lives as long as the workers:
// PR_SET_PDEATHSIG fires when the thread that forked a worker exits.
#ifndef TRL_AGENT_WORKERS_WORKER_GROUP_H_
#define TRL_AGENT_WORKERS_WORKER_GROUP_H_

#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/console/console.h"
#include "agent/core/hang_watch.h"
#include "agent/workers/flight_recorder.h"
#include "agent/workers/stack_capture.h"
#include "agent/workers/worker_cgroup.h"
#include "agent/workers/worker_process.h"
#include "common/stop_signals.h"

namespace trl {

struct WorkerLaunch {
  int local_rank = 0;
  int rank = 0;
  WorkerSpec spec;
  std::string log_path;  // empty: no log file
  // TRL_HEARTBEAT_FILE of this worker, watched when a timeout is set.
  std::string heartbeat_path;
  // Where what it was doing is written if it hangs (empty: nowhere).
  std::string stacks_path;
  // Its NCCL flight recorder's pipe and dump, asked for before a capture
  // (empty: none).
  FlightRecorderPaths flight_recorder;
};

// How the group looks for hung workers, and what it captures of them
// before the kill.
struct HangOptions {
  HangSettings detect;
  std::string py_spy;  // "": the kernel's view only
  // How long the capture of every worker, together, may take before the
  // hung ones are killed.
  std::chrono::milliseconds capture_limit{10000};
  // A hang reported (Events::hung) waits this long for the coordinator's
  // stop before the group kills the hung workers itself: twice the
  // coordinator's wait for every machine's capture (11 s), and 3 s more.
  std::chrono::milliseconds stop_wait{25000};

  // Only TRL_HEARTBEAT_FILE, with `timeout`.
  static HangOptions HeartbeatFile(std::chrono::milliseconds timeout) {
    HangOptions options;
    options.detect.heartbeat_timeout = timeout;
    return options;
  }
};

struct WorkerOutcome {
  ProcessExit exit;
  std::string start_error;  // set when the worker never ran
  // It never ran for want of resources (descriptors, memory, processes):
  // the machine's trouble, not the job's.
  bool out_of_resources = false;
  std::string reason;  // set when the group killed it (a hang)
  // Where it stood when it was captured (a hang, or a stop for a failure).
  std::string where;
  std::vector<std::string> last_lines;
  // It ended on its own: the group had not signalled it to stop, or it had
  // exited before the group did (a frozen agent thawed finds its workers
  // exited meanwhile: their exits are theirs, not the stop's).
  bool own_end = true;
};

struct StartedWorker {
  int local_rank = 0;
  int pid = 0;
};

class WorkerGroup {
 public:
  struct Events {
    // Once per Start, with every worker that started (in launch order),
    // before any worker's exit is reported.
    std::function<void(const std::vector<StartedWorker>& workers)> started;
    std::function<void(int local_rank, const WorkerOutcome& outcome)> exited;
    // A worker found hung (its reason: the detector and where it stood),
    // once every worker was captured. With this, the group leaves it alive
    // for the stop the coordinator orders (every machine's workers read
    // before any is signalled), and kills it itself only after the hang
    // options' stop_wait; without, at once.
    std::function<void(int local_rank, const std::string& reason)> hung;
  };

  // `hangs`: what makes a worker hung (none by default).
  WorkerGroup(int64_t generation, Console* console, Events events,
              std::chrono::milliseconds stop_grace, HangOptions hangs = {});
  // Kills whatever still runs and joins every thread.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  int64_t generation() const { return generation_; }

  // Starts every worker; those that started are reported together, then
  // each that could not start as exited with a start error.
  void Start(std::vector<WorkerLaunch> launches);

  // Sends `signal` to every worker's process group now (unless the workers
  // have it already) and SIGKILL to those still alive after the grace
  // period (`grace` if shorter, else the stop grace). Returns at once. Once
  // stopping, only SIGKILL is sent again; a shorter grace cuts the one running
  // short. With `capture_first` (a stop for a failure), where every worker
  // stands is captured before the signal, on a thread of the group's,
  // within the hang options' capture limit; a later stop order cuts the
  // capture short.
  void Stop(const StopSignal& signal,
            std::optional<std::chrono::milliseconds> grace = std::nullopt,
            bool capture_first = false);

  // The first half of a failure's stop (the coordinator's capture_only):
  // keeps where every worker not read yet stands, on a thread of the
  // group's within the capture limit, without a signal, then calls
  // `captured` on that thread. False (and `captured` never called) when
  // there is nothing to do or no thread to do it on: the caller says it
  // at once. Once per group.
  bool CaptureBeforeTheStop(std::function<void()> captured);

  // Waits until every worker has exited; false if the deadline passed.
  bool WaitUntilAllExited(std::chrono::steady_clock::time_point deadline);

 private:
  struct Worker {
    int local_rank = 0;
    int rank = 0;
    std::unique_ptr<WorkerProcess> process;
    std::thread waiter;
    bool exited = false;
    std::string heartbeat_path;
    std::string stacks_path;
    FlightRecorderPaths flight_recorder;
    std::atomic<uint64_t> output_bytes{0};  // counted by its WorkerOutput
    std::string hang_reason;         // set by WatchForHangs before it kills
    std::string stood_at;            // where it stood when captured
    bool captured = false;           // (stood_at may be empty: running)
    bool ended_before_stop = false;  // exited before the first Stop
  };
  struct Captured {
    Worker* worker;
    CapturedStacks stacks;
  };

  void WaitFor(Worker* worker, int rank, const std::string& log_path);
  void EnforceGrace();
  void WatchForHangs();
  // What a hung group's workers were doing (written to their stacks
  // files), then the hung ones reported (Events::hung) and left for the
  // coordinator's stop, or killed with `hang`'s reason.
  void EndHang(const Hang& hang);
  // Every live worker not captured yet, side by side, within the capture
  // limit, then written to its stacks file (`why`: when it was taken),
  // where each stood kept, and where the ranks stand said. One capture at
  // a time (a hang found while a failure's stop captures is left to the
  // stop); nothing once the group is stopping or shutting down.
  std::vector<Captured> CaptureAndKeep(const std::string& why);
  void KeepStacks(const std::vector<Captured>& captured,
                  const std::string& why);
  // Stop's signals and grace, once any capture is done.
  void SignalAll(const StopSignal& signal,
                 std::optional<std::chrono::milliseconds> grace);

  const int64_t generation_;
  Console* console_;
  Events events_;
  const std::chrono::milliseconds stop_grace_;
  const HangOptions hangs_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::unique_ptr<Worker>> workers_;
  bool stopping_ = false;
  // A stop was ordered (its signals may wait for a capture).
  bool stop_ordered_ = false;
  bool capturing_ = false;                         // a CaptureAndKeep runs
  std::chrono::steady_clock::time_point kill_at_;  // once stopping_
  bool shutting_down_ = false;
  std::thread grace_thread_;
  std::thread hang_thread_;
  std::thread capture_thread_;        // a capture before a stop's signals
  std::thread early_capture_thread_;  // CaptureBeforeTheStop's
  // Holds every process of this group where cgroup v2 allows; may be null.
  std::unique_ptr<WorkerCgroup> cgroup_;
};

}  // namespace trl

#endif  // TRL_AGENT_WORKERS_WORKER_GROUP_H_

#include "agent/workers/worker_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/core/stack_summary.h"
#include "agent/procfs/process_facts.h"
#include "agent/workers/flight_recorder.h"
#include "agent/workers/stack_capture.h"
#include "agent/workers/worker_output.h"
#include "common/logging.h"
#include "common/where_ranks_stand.h"

namespace trl {

WorkerGroup::WorkerGroup(int64_t generation, Console* console, Events events,
                         std::chrono::milliseconds stop_grace,
                         HangOptions hangs)
    : generation_(generation),
      console_(console),
      events_(std::move(events)),
      stop_grace_(stop_grace),
      hangs_(std::move(hangs)),
      cgroup_(WorkerCgroup::Create("trl-agent-" + std::to_string(getpid()) +
                                   "-gen" + std::to_string(generation))) {}

WorkerGroup::~WorkerGroup() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutting_down_ = true;
    for (auto& worker : workers_) {
      if (!worker->exited && worker->process) {
        worker->process->SignalGroup(SIGKILL);
      }
    }
  }
  changed_.notify_all();
  for (auto& worker : workers_) {
    if (worker->waiter.joinable()) worker->waiter.join();
  }
  // (Before the grace thread: a capture that ends starts it.)
  if (capture_thread_.joinable()) capture_thread_.join();
  if (early_capture_thread_.joinable()) early_capture_thread_.join();
  if (grace_thread_.joinable()) grace_thread_.join();
  if (hang_thread_.joinable()) hang_thread_.join();
  cgroup_.reset();  // kills whatever the workers left in it
}

void WorkerGroup::Start(std::vector<WorkerLaunch> launches) {
  std::vector<StartedWorker> started;
  std::vector<std::pair<int, WorkerOutcome>> not_started;
  struct ToWatch {
    Worker* worker;
    int rank;
    std::string log_path;
  };
  std::vector<ToWatch> to_watch;
  for (auto& launch : launches) {
    auto worker = std::make_unique<Worker>();
    worker->local_rank = launch.local_rank;
    if (cgroup_) launch.spec.cgroup_procs_path = cgroup_->procs_path();
    auto process = WorkerProcess::Spawn(launch.spec);
    if (!process.ok()) {
      worker->exited = true;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        workers_.push_back(std::move(worker));
      }
      WorkerOutcome outcome;
      outcome.start_error = std::string(process.status().message());
      outcome.out_of_resources = absl::IsResourceExhausted(process.status());
      console_->WriteLine(true, "[rank " + std::to_string(launch.rank) + "] ",
                          outcome.start_error);
      not_started.emplace_back(launch.local_rank, std::move(outcome));
      continue;
    }
    worker->process = *std::move(process);
    worker->rank = launch.rank;
    worker->heartbeat_path = launch.heartbeat_path;
    worker->stacks_path = launch.stacks_path;
    worker->flight_recorder = launch.flight_recorder;
    started.push_back({launch.local_rank, worker->process->pid()});
    to_watch.push_back({worker.get(), launch.rank, launch.log_path});
    {
      std::lock_guard<std::mutex> lock(mutex_);
      workers_.push_back(std::move(worker));
      if (stopping_) to_watch.back().worker->process->SignalGroup(SIGTERM);
    }
  }
  // Starts are reported before any exit: a worker's exit is only seen by
  // its waiter, which starts after the report.
  if (!started.empty()) events_.started(started);
  for (const auto& [local_rank, outcome] : not_started) {
    events_.exited(local_rank, outcome);
  }
  for (auto& watch : to_watch) {
    watch.worker->waiter = std::thread(
        [this, raw = watch.worker, rank = watch.rank,
         log_path = watch.log_path] { WaitFor(raw, rank, log_path); });
  }
  if (hangs_.detect.any() && !hang_thread_.joinable()) {
    // Out of threads (EAGAIN: the pid limit): the workers run unwatched
    // rather than the agent abort.
    try {
      hang_thread_ = std::thread([this] { WatchForHangs(); });
    } catch (const std::system_error& e) {
      ComponentLogger("agent")->error(
          "generation {}: no thread for the hang watch ({}): its hangs will "
          "not be seen",
          generation_, e.what());
    }
  }
}

void WorkerGroup::WaitFor(Worker* worker, int rank,
                          const std::string& log_path) {
  WorkerOutput output(rank, worker->process->TakeStdout(),
                      worker->process->TakeStderr(), console_, log_path,
                      &worker->output_bytes, generation_);
  WorkerOutcome outcome;
  outcome.exit = worker->process->Wait();
  // The group is gone now; the pipes close as soon as the kernel has torn
  // the processes down.
  output.Finish(500);
  outcome.last_lines = output.LastLines();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // A capture under way may have read this worker before it ended:
    // where it stood is kept when the capture ends (within its bound),
    // and the exit carries it. (A peer's kill elsewhere can end a worker
    // blocked in a collective while this machine's capture runs.)
    changed_.wait_until(lock,
                        std::chrono::steady_clock::now() +
                            hangs_.capture_limit + std::chrono::seconds(1),
                        [this] { return !capturing_; });
    worker->exited = true;
    outcome.reason = worker->hang_reason;
    outcome.where = worker->stood_at;
    outcome.own_end = !stop_ordered_ || worker->ended_before_stop;
  }
  changed_.notify_all();
  events_.exited(worker->local_rank, outcome);
}

void WorkerGroup::Stop(const StopSignal& signal,
                       std::optional<std::chrono::milliseconds> grace,
                       bool capture_first) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stop_ordered_) {
      stop_ordered_ = true;
      changed_.notify_all();  // the hang watch ends: the stop decides now
      // Those that exited before this first stop order (reaped or not yet)
      // ended on their own.
      for (auto& worker : workers_) {
        if (!worker->exited && worker->process && worker->process->HasEnded()) {
          worker->ended_before_stop = true;
        }
      }
      // Where each stands, before any signal changes it (a worker that has
      // the signal already, from Slurm, is no longer where it was).
      if (capture_first && !stopping_ && !shutting_down_ &&
          signal.number != SIGKILL && !signal.workers_have_it) {
        // Out of threads (EAGAIN: the pid limit): the signals go now,
        // without the capture, rather than the agent abort.
        try {
          capture_thread_ = std::thread([this, signal, grace] {
            CaptureAndKeep(absl::StrCat("generation ", generation_,
                                        " was stopped for a failure"));
            SignalAll(signal, grace);
          });
          return;
        } catch (const std::system_error& e) {
          ComponentLogger("agent")->error(
              "generation {}: no thread to capture where its workers stand "
              "before the stop ({}): they are stopped without it",
              generation_, e.what());
        }
      }
    }
  }
  SignalAll(signal, grace);
}

void WorkerGroup::SignalAll(const StopSignal& signal,
                            std::optional<std::chrono::milliseconds> grace) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shutting_down_) return;
  const auto kill_at = std::chrono::steady_clock::now() +
                       (grace ? std::min(*grace, stop_grace_) : stop_grace_);
  // The first signal starts the grace period; later stop orders do not
  // interrupt it (a worker checkpointing on SIGUSR1 keeps its time), only
  // SIGKILL escalates, and a shorter grace (a fence) cuts it short.
  if (stopping_ && signal.number != SIGKILL) {
    if (kill_at < kill_at_) {
      kill_at_ = kill_at;
      changed_.notify_all();
    }
    return;
  }
  for (auto& worker : workers_) {
    if (!worker->exited && worker->process && !signal.workers_have_it) {
      // A hung worker has no checkpoint to save, and may never run the
      // handler of a gentler signal: killed, as its hang said.
      const bool hung = !worker->hang_reason.empty();
      if (hung && !absl::EndsWith(worker->hang_reason, "; killed")) {
        absl::StrAppend(&worker->hang_reason, "; killed");
      }
      worker->process->SignalGroup(hung ? SIGKILL : signal.number);
    }
  }
  if (stopping_) return;
  stopping_ = true;
  kill_at_ = kill_at;
  changed_.notify_all();  // a capture waited for ends: the stop is here
  try {
    grace_thread_ = std::thread([this] { EnforceGrace(); });
  } catch (const std::system_error& error) {
    // Out of threads (EAGAIN): no one would SIGKILL them after the grace,
    // so they get it now.
    ComponentLogger("agent")->error(
        "generation {}: cannot start the stop's grace period ({}): the "
        "workers are killed now",
        generation_, error.what());
    for (auto& worker : workers_) {
      if (!worker->exited && worker->process) {
        worker->process->SignalGroup(SIGKILL);
      }
    }
  }
}

void WorkerGroup::EnforceGrace() {
  std::unique_lock<std::mutex> lock(mutex_);
  auto all_exited = [this] {
    for (auto& worker : workers_) {
      if (!worker->exited) return false;
    }
    return true;
  };
  // kill_at_ may move earlier meanwhile (a fence): wait for the newest.
  while (!shutting_down_ && !all_exited() &&
         std::chrono::steady_clock::now() < kill_at_) {
    changed_.wait_until(lock, kill_at_);
  }
  for (auto& worker : workers_) {
    if (!worker->exited && worker->process) {
      worker->process->SignalGroup(SIGKILL);
    }
  }
}

bool WorkerGroup::WaitUntilAllExited(
    std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_until(lock, deadline, [this] {
    for (auto& worker : workers_) {
      if (!worker->exited) return false;
    }
    return true;
  });
}

}  // namespace trl

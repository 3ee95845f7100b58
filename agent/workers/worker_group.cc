#include "agent/workers/worker_group.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_format.h"
#include "agent/workers/worker_output.h"

namespace trl {

WorkerGroup::WorkerGroup(int64_t generation, Console* console, Events events,
                         std::chrono::milliseconds stop_grace,
                         std::chrono::milliseconds heartbeat_timeout)
    : generation_(generation),
      console_(console),
      events_(std::move(events)),
      stop_grace_(stop_grace),
      heartbeat_timeout_(heartbeat_timeout),
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
  if (grace_thread_.joinable()) grace_thread_.join();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
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
    worker->heartbeat_path = launch.heartbeat_path;
    worker->last_sign_of_life = std::chrono::steady_clock::now();
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
  if (heartbeat_timeout_.count() > 0 && !heartbeat_thread_.joinable()) {
    heartbeat_thread_ = std::thread([this] { WatchHeartbeats(); });
  }
}

void WorkerGroup::WatchHeartbeats() {
  const auto period = std::min<std::chrono::milliseconds>(
      heartbeat_timeout_ / 4, std::chrono::milliseconds(500));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!shutting_down_ && !stopping_) {
    const auto now = std::chrono::steady_clock::now();
    for (auto& worker : workers_) {
      if (worker->exited || !worker->process || !worker->hang_reason.empty()) {
        continue;
      }
      struct stat info;
      if (!worker->heartbeat_path.empty() &&
          stat(worker->heartbeat_path.c_str(), &info) == 0 &&
          (info.st_mtim.tv_sec != worker->last_mtime.tv_sec ||
           info.st_mtim.tv_nsec != worker->last_mtime.tv_nsec)) {
        worker->last_mtime = info.st_mtim;
        worker->last_sign_of_life = now;
      }
      const auto silent = now - worker->last_sign_of_life;
      if (silent > heartbeat_timeout_) {
        worker->hang_reason = absl::StrFormat(
            "hung: no heartbeat in TRL_HEARTBEAT_FILE for %.1f s (timeout "
            "%.1f s); killed",
            std::chrono::duration<double>(silent).count(),
            heartbeat_timeout_.count() / 1000.0);
        worker->process->SignalGroup(SIGKILL);
      }
    }
    changed_.wait_for(lock, period);
  }
}

void WorkerGroup::WaitFor(Worker* worker, int rank,
                          const std::string& log_path) {
  WorkerOutput output(rank, worker->process->TakeStdout(),
                      worker->process->TakeStderr(), console_, log_path);
  WorkerOutcome outcome;
  outcome.exit = worker->process->Wait();
  // The group is gone now; the pipes close as soon as the kernel has torn
  // the processes down.
  output.Finish(500);
  outcome.last_lines = output.LastLines();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    worker->exited = true;
    outcome.reason = worker->hang_reason;
    outcome.own_end = !stopping_ || worker->ended_before_stop;
  }
  changed_.notify_all();
  events_.exited(worker->local_rank, outcome);
}

void WorkerGroup::Stop(const StopSignal& signal,
                       std::optional<std::chrono::milliseconds> grace) {
  std::lock_guard<std::mutex> lock(mutex_);
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
  if (!stopping_) {
    // Those that exited before this first stop (reaped or not yet) ended on
    // their own.
    for (auto& worker : workers_) {
      if (!worker->exited && worker->process && worker->process->HasEnded()) {
        worker->ended_before_stop = true;
      }
    }
  }
  for (auto& worker : workers_) {
    if (!worker->exited && worker->process && !signal.workers_have_it) {
      worker->process->SignalGroup(signal.number);
    }
  }
  if (stopping_) return;
  stopping_ = true;
  kill_at_ = kill_at;
  grace_thread_ = std::thread([this] { EnforceGrace(); });
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

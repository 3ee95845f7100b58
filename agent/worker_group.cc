#include "agent/worker_group.h"

#include <signal.h>

#include "agent/worker_output.h"

namespace trl {

WorkerGroup::WorkerGroup(int64_t generation, Console* console, Events events,
                         std::chrono::milliseconds stop_grace)
    : generation_(generation),
      console_(console),
      events_(std::move(events)),
      stop_grace_(stop_grace) {}

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
}

void WorkerGroup::Start(std::vector<WorkerLaunch> launches) {
  for (auto& launch : launches) {
    auto worker = std::make_unique<Worker>();
    worker->local_rank = launch.local_rank;
    auto process = WorkerProcess::Spawn(launch.spec);
    if (!process.ok()) {
      worker->exited = true;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        workers_.push_back(std::move(worker));
      }
      WorkerOutcome outcome;
      outcome.start_error = std::string(process.status().message());
      console_->WriteLine(true, "[rank " + std::to_string(launch.rank) + "] ",
                          outcome.start_error);
      events_.exited(launch.local_rank, outcome);
      continue;
    }
    worker->process = *std::move(process);
    const int pid = worker->process->pid();
    Worker* raw = worker.get();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      workers_.push_back(std::move(worker));
      if (stopping_) raw->process->SignalGroup(SIGTERM);
    }
    events_.started(launch.local_rank, pid);
    raw->waiter = std::thread(
        [this, raw, rank = launch.rank, log_path = launch.log_path] {
          WaitFor(raw, rank, log_path);
        });
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
  output.Finish(2000);
  outcome.last_lines = output.LastLines();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    worker->exited = true;
  }
  changed_.notify_all();
  events_.exited(worker->local_rank, outcome);
}

void WorkerGroup::Stop(int signal) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& worker : workers_) {
    if (!worker->exited && worker->process) {
      worker->process->SignalGroup(signal);
    }
  }
  if (stopping_) return;
  stopping_ = true;
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
  changed_.wait_for(lock, stop_grace_,
                    [&] { return shutting_down_ || all_exited(); });
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

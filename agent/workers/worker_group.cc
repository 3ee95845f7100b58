#include "agent/workers/worker_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <system_error>

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

void WorkerGroup::WatchForHangs() {
  const auto period = hangs_.detect.SamplePeriod();
  std::unique_lock<std::mutex> lock(mutex_);
  std::vector<int> started;
  for (const auto& worker : workers_) {
    if (worker->process) started.push_back(worker->local_rank);
  }
  HangWatch watch(hangs_.detect, started, std::chrono::steady_clock::now());
  while (true) {
    // The first look after a period: nothing hangs at its start, and a
    // walk of /proc does not compete with the workers' own start. The
    // predicate is read before any wait: a stop or the group's end that
    // came while /proc was read is not slept through (the group's end
    // once waited the whole period, 5 s by default).
    if (changed_.wait_for(lock, period, [this] {
          return shutting_down_ || stopping_ || stop_ordered_;
        })) {
      return;
    }
    // What to read, under the lock; /proc and the files are read without
    // it (a stop must not wait for them).
    struct Probe {
      Worker* worker;
      pid_t pid;
      bool exited;
    };
    std::vector<Probe> probes;
    for (auto& worker : workers_) {
      if (!worker->process) continue;
      probes.push_back({worker.get(), worker->process->pid(), worker->exited});
    }
    lock.unlock();
    std::map<pid_t, double> cpu;
    if (hangs_.detect.cpu_timeout.count() > 0) {
      std::vector<pid_t> roots;
      for (const Probe& probe : probes) {
        if (!probe.exited) roots.push_back(probe.pid);
      }
      cpu = TreeCpuSeconds(roots);
    }
    const auto now = std::chrono::steady_clock::now();
    for (const Probe& probe : probes) {
      if (probe.exited) {
        watch.Exited(probe.worker->local_rank);
        continue;
      }
      WorkerSample sample;
      sample.output_bytes =
          probe.worker->output_bytes.load(std::memory_order_relaxed);
      if (auto it = cpu.find(probe.pid); it != cpu.end()) {
        sample.cpu_seconds = it->second;
      }
      // A touch is a change of the file's mtime, whatever that mtime says.
      struct stat info;
      if (!probe.worker->heartbeat_path.empty() &&
          stat(probe.worker->heartbeat_path.c_str(), &info) == 0) {
        sample.heartbeat_mtime_ns =
            static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 +
            info.st_mtim.tv_nsec;
      }
      watch.Sample(probe.worker->local_rank, sample, now);
    }
    if (const std::optional<Hang> hang = watch.Check(now)) {
      EndHang(*hang);
      return;
    }
    lock.lock();
  }
}

std::vector<WorkerGroup::Captured> WorkerGroup::CaptureAndKeep(
    const std::string& why) {
  std::vector<Worker*> alive;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_ || shutting_down_) return {};
    if (capturing_) {
      // One capture at a time. The one under way (a hang's, when a
      // failure's stop arrives) reads every live worker: what waits for
      // this one, the stop's signals, waits for it to end, or its stacks
      // would be read after the signals moved the workers.
      changed_.wait_until(
          lock, std::chrono::steady_clock::now() + hangs_.capture_limit,
          [this] { return !capturing_ || stopping_ || shutting_down_; });
      return {};
    }
    for (auto& worker : workers_) {
      if (worker->process && !worker->exited && !worker->captured) {
        alive.push_back(worker.get());
      }
    }
    capturing_ = true;
  }
  // The workers side by side, within one bound: what waits for the capture
  // waits for the slowest, never for more than capture_limit.
  const auto deadline = std::chrono::steady_clock::now() + hangs_.capture_limit;
  const auto abandoned = [this] {
    std::lock_guard<std::mutex> lock(mutex_);
    return stopping_ || shutting_down_;
  };
  // The flight recorders first: their dumps are written by the workers'
  // own watchdogs while the stacks are read. A watchdog writes within its
  // poll of the pipe (about a second); five is ample, and a dead one costs
  // no more.
  const auto dumps_deadline = std::min(
      deadline, std::chrono::steady_clock::now() + std::chrono::seconds(5));
  std::vector<FlightRecorderRequest> dumps(alive.size());
  for (size_t i = 0; i < alive.size(); ++i) {
    dumps[i] = AskForFlightRecorderDump(alive[i]->flight_recorder);
  }
  std::vector<Captured> captured(alive.size());
  std::vector<std::thread> capturers;
  for (size_t i = 0; i < alive.size(); ++i) {
    captured[i].worker = alive[i];
    const auto capture = [&, i] {
      captured[i].stacks = CaptureStacks(alive[i]->process->pid(),
                                         hangs_.py_spy, deadline, abandoned);
    };
    // Out of threads (EAGAIN): this one on ours, within the same deadline,
    // rather than the agent abort.
    try {
      capturers.emplace_back(capture);
    } catch (const std::system_error&) {
      capture();
    }
  }
  for (auto& capturer : capturers) capturer.join();
  for (size_t i = 0; i < alive.size(); ++i) {
    if (alive[i]->flight_recorder.empty()) continue;
    absl::StrAppend(&captured[i].stacks.text, "\n",
                    AwaitFlightRecorderDump(alive[i]->flight_recorder, dumps[i],
                                            dumps_deadline, abandoned),
                    "\n");
  }
  KeepStacks(captured, why);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    capturing_ = false;
  }
  changed_.notify_all();
  return captured;
}

void WorkerGroup::KeepStacks(const std::vector<Captured>& captured,
                             const std::string& why) {
  if (captured.empty()) return;
  std::vector<std::pair<int, std::string>> where;
  for (const Captured& c : captured) {
    where.emplace_back(c.worker->rank, c.stacks.where);
  }
  ComponentLogger("agent")->warn("generation {}: {}; where its ranks stand: {}",
                                 generation_, why, WhereRanksStand(where));
  for (const Captured& c : captured) {
    if (c.worker->stacks_path.empty()) continue;
    // Never through a link another user planted in the run directory.
    const int fd =
        open(c.worker->stacks_path.c_str(),
             O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) continue;
    const std::string text =
        absl::StrCat("rank ", c.worker->rank, ": ", c.stacks.where,
                     "\n(captured when ", why, ")\n\n", c.stacks.text);
    for (size_t done = 0; done < text.size();) {
      const ssize_t n = write(fd, text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    close(fd);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Captured& c : captured) {
    c.worker->stood_at = c.stacks.where;
    c.worker->captured = true;
  }
}

void WorkerGroup::EndHang(const Hang& hang) {
  // Every worker of the group, before any is killed: the hung one and
  // where the others stand (waiting for it in a collective, say).
  const std::vector<Captured> captured = CaptureAndKeep(hang.reason);
  if (captured.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  // A stop ordered meanwhile (a failure elsewhere) signals them itself,
  // with its grace.
  if (stopping_ || shutting_down_ || stop_ordered_) return;
  for (const Captured& c : captured) {
    const bool hung =
        std::find(hang.local_ranks.begin(), hang.local_ranks.end(),
                  c.worker->local_rank) != hang.local_ranks.end();
    if (!hung || c.worker->exited) continue;
    c.worker->hang_reason = absl::StrCat(hang.reason, "; ", c.stacks.where);
    if (!c.worker->stacks_path.empty()) {
      absl::StrAppend(&c.worker->hang_reason,
                      " (stacks: ", c.worker->stacks_path, ")");
    }
    absl::StrAppend(&c.worker->hang_reason, "; killed");
    c.worker->process->SignalGroup(SIGKILL);
  }
}

void WorkerGroup::WaitFor(Worker* worker, int rank,
                          const std::string& log_path) {
  WorkerOutput output(rank, worker->process->TakeStdout(),
                      worker->process->TakeStderr(), console_, log_path,
                      &worker->output_bytes);
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
      worker->process->SignalGroup(signal.number);
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

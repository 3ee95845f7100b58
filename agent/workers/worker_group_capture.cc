// The worker group's hangs and captures (worker_group.h): the hang watch
// that samples every worker, the capture of where each stands (side by
// side, within the capture limit, written to the stacks files), a hang
// reported before its kill, and the capture that comes before a failure's
// stop.
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
#include "agent/workers/worker_group.h"
#include "common/logging.h"
#include "common/where_ranks_stand.h"

namespace trl {

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
  // where the others stand (waiting for it in a collective, say). Those
  // read already (the first half of a failure's stop came first) are
  // not read again: where they stood is kept.
  CaptureAndKeep(hang.reason);
  std::unique_lock<std::mutex> lock(mutex_);
  // A stop ordered meanwhile (a failure elsewhere) signals them itself,
  // with its grace.
  const auto stopped = [this] {
    return stopping_ || shutting_down_ || stop_ordered_;
  };
  if (stopped()) return;
  std::vector<Worker*> hung;
  for (auto& worker : workers_) {
    const bool found =
        std::find(hang.local_ranks.begin(), hang.local_ranks.end(),
                  worker->local_rank) != hang.local_ranks.end();
    if (!found || worker->exited || !worker->process) continue;
    worker->hang_reason = hang.reason;
    if (!worker->stood_at.empty()) {
      absl::StrAppend(&worker->hang_reason, "; ", worker->stood_at);
    }
    if (!worker->stacks_path.empty()) {
      absl::StrAppend(&worker->hang_reason, " (stacks: ", worker->stacks_path,
                      ")");
    }
    hung.push_back(worker.get());
  }
  if (hung.empty()) return;
  if (events_.hung) {
    // Said before any kill: the coordinator stops the generation, and
    // every machine reads its ranks before any machine signals them (a
    // kill here would wake a peer's ranks blocked on these before their
    // agent read them).
    std::vector<std::pair<int, std::string>> reports;
    for (Worker* worker : hung) {
      reports.emplace_back(worker->local_rank, worker->hang_reason);
    }
    lock.unlock();
    for (const auto& [local_rank, reason] : reports) {
      events_.hung(local_rank, reason);
    }
    lock.lock();
    if (changed_.wait_until(lock,
                            std::chrono::steady_clock::now() + hangs_.stop_wait,
                            stopped)) {
      return;
    }
    ComponentLogger("agent")->warn(
        "generation {}: no stop came for the hung workers within {} ms: "
        "they are killed here",
        generation_, hangs_.stop_wait.count());
  }
  for (Worker* worker : hung) {
    if (worker->exited) continue;
    absl::StrAppend(&worker->hang_reason, "; killed");
    worker->process->SignalGroup(SIGKILL);
  }
}

bool WorkerGroup::CaptureBeforeTheStop(std::function<void()> captured) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_ || shutting_down_ || stop_ordered_ ||
      early_capture_thread_.joinable()) {
    return false;
  }
  // Out of threads (EAGAIN): said captured at once; the stop's own
  // capture reads them before its signals, as with one machine.
  try {
    early_capture_thread_ = std::thread([this, captured] {
      CaptureAndKeep(absl::StrCat("generation ", generation_,
                                  " was stopped for a failure"));
      captured();
    });
    return true;
  } catch (const std::system_error& e) {
    ComponentLogger("agent")->error(
        "generation {}: no thread to capture where its workers stand "
        "before the stop ({})",
        generation_, e.what());
    return false;
  }
}

}  // namespace trl

// Whether the workers of one generation on this machine hang, from what
// the edge samples (agent/workers/worker_group.cc): no detector needs
// anything from the script.
//  - output: not one byte of output from any rank of this machine for
//    `output_timeout` (every rank of the machine is named: the machine is
//    silent);
//  - cpu: a worker whose process tree used, over the last `cpu_timeout`,
//    less than `idle_cpu_share` of one core on average and printed
//    nothing (asleep, blocked on a peer in a Gloo collective, a deadlock,
//    stuck in the kernel);
//  - heartbeat_file: a worker that did not touch TRL_HEARTBEAT_FILE for
//    `heartbeat_timeout`, counting from its start (scripts that opt in).
// Each uses the steady clock only: a wall-clock step neither kills a
// healthy worker nor spares a hung one. A zero timeout turns its detector
// off. A hang is said once; the edge then stops the workers.
#ifndef TRL_AGENT_CORE_HANG_WATCH_H_
#define TRL_AGENT_CORE_HANG_WATCH_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace trl {

struct HangSettings {
  std::chrono::milliseconds output_timeout{0};
  std::chrono::milliseconds cpu_timeout{0};
  std::chrono::milliseconds heartbeat_timeout{0};
  double idle_cpu_share = 0.01;

  bool any() const {
    return output_timeout.count() > 0 || cpu_timeout.count() > 0 ||
           heartbeat_timeout.count() > 0;
  }
  // How often the edge should sample: a tenth of the shortest timeout,
  // between 100 ms and 5 s.
  std::chrono::milliseconds SamplePeriod() const;
};

// What the edge read of one worker at one time.
struct WorkerSample {
  uint64_t output_bytes = 0;  // everything it printed so far
  // CPU seconds of its process tree so far (nullopt: unreadable, e.g. it
  // is gone); only growth counts.
  std::optional<double> cpu_seconds;
  // Its heartbeat file's modification time (any value; a change is a
  // touch), nullopt while it does not exist.
  std::optional<int64_t> heartbeat_mtime_ns;
};

struct Hang {
  std::string detector;  // "output", "cpu" or "heartbeat_file"
  std::vector<int> local_ranks;
  std::string reason;  // "no output from any rank of this machine for ..."
};

class HangWatch {
 public:
  using Time = std::chrono::steady_clock::time_point;

  // The workers `local_ranks`, started at `start`.
  HangWatch(HangSettings settings, const std::vector<int>& local_ranks,
            Time start);

  void Sample(int local_rank, const WorkerSample& sample, Time now);
  // An exited worker is no longer watched (nor does it keep the machine's
  // output alive).
  void Exited(int local_rank);
  // The first hang seen by `now`, once; nullopt after that.
  std::optional<Hang> Check(Time now);

 private:
  struct Watched {
    bool exited = false;
    uint64_t output_bytes = 0;
    // The CPU window: since when, and the tree's CPU seconds then.
    Time cpu_since;
    std::optional<double> cpu_at_since;
    std::optional<int64_t> heartbeat_mtime_ns;
    Time last_heartbeat;
  };
  std::optional<Hang> CheckOutput(Time now) const;
  std::optional<Hang> CheckCpu(Time now) const;
  std::optional<Hang> CheckHeartbeat(Time now) const;

  const HangSettings settings_;
  std::map<int, Watched> workers_;
  Time last_output_;
  bool said_ = false;
};

}  // namespace trl

#endif  // TRL_AGENT_CORE_HANG_WATCH_H_

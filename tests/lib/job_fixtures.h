// What the job library's tests (tests/unit/coordinator/job/) are made of:
// an agent of machine `m` (host "node<m>" with a boot id of its own,
// address 10.0.0.<m+1>, 2 workers, a 4 s lease, unless told otherwise),
// and a job of `num_machines` machines of 2 workers whose restarts back
// off from 100 ms to 1 s, whose agents are lost after 3 s of silence and
// may rejoin within 60 s, with a 5 s stop grace. Plain values: a test
// changes what it is about.
#ifndef TRL_TESTS_LIB_JOB_FIXTURES_H_
#define TRL_TESTS_LIB_JOB_FIXTURES_H_

#include <chrono>
#include <string>

#include "coordinator/job/records.h"
#include "coordinator/job/state_machine.h"

namespace trl {

inline AgentInfo TestAgent(int m, int workers = 2) {
  AgentInfo info;
  info.machine_rank = m;
  info.hostname = "node" + std::to_string(m);
  info.host_id = "boot-" + std::to_string(m) + "/pidns:4026531836";
  info.advertise_addr = "10.0.0." + std::to_string(m + 1);
  info.local_world_size = workers;
  info.lease = std::chrono::seconds(4);
  return info;
}

inline JobSettings TestJobSettings(int num_machines) {
  JobSettings settings;
  settings.job_id = "job";
  settings.num_machines = num_machines;
  settings.local_world_size = 2;
  settings.restart.initial_backoff = std::chrono::milliseconds(100);
  settings.restart.max_backoff = std::chrono::milliseconds(1000);
  settings.agent_heartbeat_timeout = std::chrono::seconds(3);
  settings.rejoin_timeout = std::chrono::seconds(60);
  settings.stop_grace = std::chrono::seconds(5);
  return settings;
}

// Starts the generation `job` is ready for, with every worker running
// (machine m's local rank l has pid 100 m + l).
inline GenerationStart StartWithEveryWorker(JobStateMachine& job,
                                            TimePoint now) {
  GenerationStart start = job.StartGeneration(now);
  for (const auto& node : start.nodes) {
    for (int local = 0; local < node.local_world_size; ++local) {
      job.WorkerStarted(node.machine_rank, start.generation, local,
                        100 * node.machine_rank + local, now);
    }
  }
  return start;
}

}  // namespace trl

#endif  // TRL_TESTS_LIB_JOB_FIXTURES_H_

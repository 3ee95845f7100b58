// What a coordinator's core is given: the job's config, command, policy
// and identity (CoordinatorOptions), what each generation needs from the
// outside world (RendezvousSource), the wall clock, and the state machine's
// settings they make (JobSettingsOf). Plain data: no thread or clock of its
// own but SystemUnixMillis, which reads the system's.
#ifndef TRL_COORDINATOR_OWNER_COORDINATOR_OPTIONS_H_
#define TRL_COORDINATOR_OWNER_COORDINATOR_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/accelerate_config.h"
#include "coordinator/job/state_machine.h"
#include "coordinator/record/state_file.h"

namespace trl {

// What each generation needs from the outside world.
struct RendezvousData {
  int master_port = 0;
  std::string nccl_unique_id_hex;  // empty without NCCL
};
using RendezvousSource = std::function<absl::StatusOr<RendezvousData>(
    const std::string& master_addr)>;

// The system's wall clock: Unix time in milliseconds.
int64_t SystemUnixMillis();

struct CoordinatorOptions {
  AccelerateConfig config;
  // Launcher settings every agent must share (LauncherFingerprint), checked
  // with the config's fingerprint.
  std::map<std::string, std::string> launcher_fingerprint;
  std::vector<std::string> worker_argv;
  // worker_argv[0] is the Python interpreter (an agent's own --python may
  // take its place).
  bool worker_argv_runs_python = false;
  std::string job_id;
  // This run of the job (JobRecord::run_id), sent with each assignment.
  std::string run_id;
  // --log_dir, absolute (empty: none): sent with each assignment, for the
  // agents that have none of their own.
  std::string log_dir;
  // host:port the coordinator serves on (TRL_COORDINATOR_ADDR).
  std::string coordinator_address;
  // How the job behaves: restarts, timeouts, grace, elasticity, cordons
  // and spares (job/state_machine.h). policy.tick_interval is how often the
  // caller promises to Tick (zero: no promise; the owner then ticks every
  // second).
  JobPolicy policy;
  // Where the job's state is kept for a restarted coordinator; empty: not
  // kept.
  std::string state_file;
  std::string identity;  // of the job, see JobRecord
  // Set when this coordinator picks up a job an earlier one ran.
  std::optional<JobRecord> resume;
  // Opens the workers' store namespace of a generation and returns its
  // token (TRL_STORE_TOKEN); unset: the job has no store.
  std::function<std::string(const std::string& job_id, int64_t generation)>
      open_store_generation;
  // While the job waits for its machines, how often it says which (zero:
  // never), and the command that starts machine N's agent, up to
  // "--machine_rank" (owner/waiting_report.h).
  std::chrono::milliseconds waiting_report_interval{15000};
  std::string agent_command = "trl-agent --machine_rank";
};

// The state machine's settings for the job `options` describe; every
// agent's registration must match its fingerprint (the config's and the
// launcher settings they share).
JobSettings JobSettingsOf(const CoordinatorOptions& options);

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_COORDINATOR_OPTIONS_H_

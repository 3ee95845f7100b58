// The agent session's workers (agent_session.h): a generation's workers
// started from the coordinator's assignment (their argv, environment, run
// directory, logs, stacks and flight-recorder files, hang detectors), their
// starts, exits and hangs reported, the capture before a failure's stop,
// and the group ended.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "agent/cleanup/fence_page.h"
#include "agent/cleanup/job_guardian.h"
#include "agent/cleanup/orphans.h"
#include "agent/core/log_dir_choice.h"
#include "agent/session/agent_session.h"
#include "agent/workers/stack_capture.h"
#include "common/logging.h"
#include "common/network.h"
#include "common/private_files.h"
#include "common/utf8.h"
#include "common/worker_command.h"

namespace trl {

namespace pb = trl::launch::v1;
namespace fs = std::filesystem;
using std::chrono::steady_clock;

namespace {

std::shared_ptr<spdlog::logger> Log() { return ComponentLogger("agent"); }

}  // namespace

void AgentSession::MarkStopping() {
  if (group_ && ledger_) ledger_->StoppingGeneration(group_->generation());
}

void AgentSession::EndGroup() {
  if (!group_) return;
  MarkStopping();
  const int64_t generation = group_->generation();
  group_.reset();
  const int killed = KillOrphansOfGeneration(group_job_id_, generation);
  if (killed > 0) {
    Log()->warn(
        "killed {} process(es) that workers of generation {} left "
        "outside their process groups",
        killed, generation);
  }
}

void AgentSession::CaptureBeforeTheStop(int64_t generation) {
  auto say_captured = [this, generation] {
    pb::AgentMessage captured;
    captured.mutable_stacks_captured()->set_generation(generation);
    Write(captured);
  };
  {
    std::lock_guard<std::mutex> lock(group_mutex_);
    if (group_ != nullptr && group_->CaptureBeforeTheStop(say_captured)) {
      return;  // said once the capture is done
    }
  }
  say_captured();  // nothing to read, or no thread to read it on
}

void AgentSession::ReportHang(int64_t generation, int local_rank,
                              const std::string& reason) {
  pb::AgentMessage message;
  auto* hung = message.mutable_worker_hung();
  hung->set_generation(generation);
  hung->set_local_rank(local_rank);
  hung->set_reason(ToValidUtf8(reason));
  Write(message);
}

void AgentSession::ReportExit(int64_t generation, int local_rank,
                              const WorkerOutcome& outcome,
                              const std::string& executable) {
  pb::WorkerExited exited;
  exited.set_generation(generation);
  exited.set_local_rank(local_rank);
  exited.set_exit_code(outcome.exit.exit_code);
  exited.set_signal(outcome.exit.signal);
  // The worker's own words (and paths) may be any bytes; a proto3 string
  // that is not UTF-8 would not parse, losing this report and the stream.
  exited.set_start_error(ToValidUtf8(outcome.start_error));
  exited.set_out_of_resources(outcome.out_of_resources);
  exited.set_reason(ToValidUtf8(outcome.reason));
  exited.set_where(ToValidUtf8(outcome.where));
  exited.set_executable(ToValidUtf8(executable));
  for (const auto& line : outcome.last_lines) {
    exited.add_last_lines(ToValidUtf8(line));
  }
  Log()->debug("generation {}: local rank {} exited (code {}, signal {})",
               generation, local_rank, outcome.exit.exit_code,
               outcome.exit.signal);
  Apply(core_->With([&](AgentCore& core) {
    return core.WorkerExited(std::move(exited), outcome.own_end);
  }));
}

LogDirChoice AgentSession::LogDirFor(const pb::Assignment& a) {
  const LogDirChoice choice = ChooseLogDir(options_.log_dir, a.log_dir(),
                                           options_.worker_user.has_value());
  const std::string said = choice.refused.empty() ? choice.dir : choice.refused;
  if (choice.from_coordinator || !choice.refused.empty()) {
    if (said != said_log_dir_) {
      if (choice.refused.empty()) {
        Log()->info("rank logs in {}/{}/gen<G>/ (the coordinator's --log_dir)",
                    choice.dir, a.job_id());
      } else {
        Log()->warn(
            "{}; rank logs go to the console only (or give this "
            "agent its own --log_dir)",
            choice.refused);
      }
      said_log_dir_ = said;
    }
  }
  return choice;
}

void AgentSession::StartWorkers(const pb::Assignment& a) {
  // The core ended the last generation's workers, and checked the job id
  // (it becomes a directory name).
  const int64_t generation = a.generation();
  std::unique_lock<std::mutex> lock(group_mutex_);
  group_job_id_ = a.job_id();
  ledger_ = std::make_shared<const ExitLedger>(
      DefaultLedgerRoot(),
      JoinHostPort(options_.coordinator_host, options_.coordinator_port),
      a.machine_rank(), host_id_);
  const std::vector<std::string> argv =
      WithOwnPython({a.argv().begin(), a.argv().end()}, a.argv_runs_python(),
                    options_.own_python);
  auto executable = ResolveExecutable(argv[0], SearchPath());

  const LogDirChoice chosen = LogDirFor(a);
  std::string log_dir = chosen.dir;
  // Nothing relative to the working directory: without a scratch
  // directory and a log_dir, workers get no error or heartbeat files.
  const bool have_dir = !log_dir.empty() || !scratch_dir_.empty();
  fs::path run_dir =
      log_dir.empty() ? fs::path(scratch_dir_) : fs::path(log_dir) / a.job_id();
  run_dir /= absl::StrCat("gen", generation);
  std::error_code dir_error;
  if (have_dir) fs::create_directories(run_dir, dir_error);
  if (dir_error && chosen.from_coordinator && !scratch_dir_.empty()) {
    // The coordinator's directory need not exist here (no shared file
    // system): the workers' own files go where they would without it.
    Log()->warn(
        "cannot create {} (the coordinator's --log_dir): {}; rank logs go to "
        "the console only on this machine",
        run_dir.string(), dir_error.message());
    log_dir.clear();
    run_dir = fs::path(scratch_dir_) / absl::StrCat("gen", generation);
    dir_error.clear();
    fs::create_directories(run_dir, dir_error);
  }
  // Workers of another user write their error and heartbeat files in a
  // directory of their own: never where the agent (root) writes logs, so
  // that no file of theirs can be a link the agent follows.
  fs::path worker_dir = run_dir;
  if (have_dir && !dir_error && options_.worker_user) {
    worker_dir = run_dir / "worker";
    // Made here, and changed through a descriptor that is not a link: a
    // worker cannot have root hand it a directory of its choosing.
    if (mkdir(worker_dir.c_str(), 0700) != 0 && errno != EEXIST) {
      dir_error = std::error_code(errno, std::generic_category());
    } else {
      const int fd = open(worker_dir.c_str(),
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0 ||
          fchown(fd, options_.worker_user->uid, options_.worker_user->gid) !=
              0 ||
          fchmod(fd, 0700) != 0) {
        dir_error = std::error_code(errno, std::generic_category());
      }
      if (fd >= 0) close(fd);
    }
  }
  if (dir_error) {
    Log()->warn("cannot create {}: {}; {}", run_dir.string(),
                dir_error.message(),
                log_dir.empty() ? "workers get no error or heartbeat files"
                                : "rank logs go to the console only");
  }

  Environment job_env(a.job_environment().begin(), a.job_environment().end());
  // Workers reach the coordinator's store the way this agent reaches the
  // coordinator: the same TLS files (paths only; never the auth token).
  // Which coordinator these workers belong to, as this agent dials it: a
  // later agent of this machine finds what an earlier one left by it.
  job_env["TRL_LAUNCH_COORDINATOR"] =
      JoinHostPort(options_.coordinator_host, options_.coordinator_port);
  if (!options_.tls_ca.empty()) job_env["TRL_TLS_CA"] = options_.tls_ca;
  if (options_.identity) {
    // The store's TLS: verified against the derived identity's certificate
    // and name; workers present no certificate (they hold no token).
    job_env["TRL_TLS_SERVER_NAME"] = kDerivedServerName;
  } else {
    if (!options_.tls_cert.empty()) job_env["TRL_TLS_CERT"] = options_.tls_cert;
    if (!options_.tls_key.empty()) job_env["TRL_TLS_KEY"] = options_.tls_key;
  }
  // PyTorch's NCCL process group ends its rank if it cannot make the
  // flight recorder's pipe: the recorder is set up only where one can be.
  std::string no_pipe;
  const bool flight_recorder =
      have_dir && !dir_error && CanMakePipeIn(worker_dir.string(), &no_pipe);
  if (have_dir && !dir_error && !flight_recorder) {
    Log()->warn(
        "the workers' NCCL flight recorder is left off: no pipe can be made "
        "in {}: {}",
        worker_dir.string(), no_pipe);
  }
  std::vector<WorkerLaunch> launches;
  for (int local = 0; local < a.local_world_size(); ++local) {
    const int rank = a.rank_offset() + local;
    RankEnvironmentInputs inputs;
    inputs.machine_rank = a.machine_rank();
    inputs.rank_offset = a.rank_offset();
    inputs.local_world_size = a.local_world_size();
    inputs.local_rank = local;
    inputs.gpu_ids = options_.config.gpu_ids;
    inputs.interface_name = options_.interface_name;
    if (have_dir) {
      inputs.error_file =
          worker_dir / absl::StrCat("rank", rank, ".error.json");
      inputs.heartbeat_file =
          worker_dir / absl::StrCat("rank", rank, ".heartbeat");
      if (flight_recorder) {
        inputs.flight_recorder_stem = worker_dir / "nccl_flight_recorder.rank";
      }
    }
    inputs.working_directory = options_.working_directory;
    WorkerLaunch launch;
    launch.local_rank = local;
    launch.rank = rank;
    launch.spec.executable = executable.ok() ? *executable : argv[0];
    launch.spec.argv = argv;
    launch.spec.environment =
        BuildWorkerEnvironment(options_.inherited_environment, job_env, inputs);
    launch.spec.working_directory = options_.working_directory;
    launch.spec.user = options_.worker_user;
    launch.heartbeat_path = inputs.heartbeat_file;
    launch.flight_recorder =
        FlightRecorderPathsOf(launch.spec.environment, rank);
    if (!log_dir.empty()) {
      launch.log_path = run_dir / absl::StrCat("rank", rank, ".log");
      launch.stacks_path = run_dir / absl::StrCat("rank", rank, ".stacks.txt");
    }
    launches.push_back(std::move(launch));
  }

  WorkerGroup::Events events;
  events.started = [this, generation, ledger = ledger_, run = a.run_id()](
                       const std::vector<StartedWorker>& workers) {
    std::vector<std::pair<int, int>> pids;
    for (const StartedWorker& worker : workers) {
      pids.emplace_back(worker.local_rank, worker.pid);
    }
    Log()->debug("generation {}: {} workers started", generation, pids.size());
    Apply(core_->With([&](AgentCore& core) {
      return core.WorkersStarted(generation, pids);
    }));
    ledger->BeginGeneration(run, generation, pids);
  };
  events.exited = [this, generation, ledger = ledger_,
                   ran = executable.ok() ? *executable : argv[0]](
                      int local_rank, const WorkerOutcome& outcome) {
    ReportExit(generation, local_rank, outcome, ran);
    // What the next registration would carry, kept for a later agent too:
    // only a worker's own end (not the end of the agent's stop, which the
    // core carries while connected: a later agent could not tell it from a
    // finished worker), and never a SIGKILL.
    const auto kept = core_->With(
        [&](AgentCore& core) { return core.OwnExit(generation, local_rank); });
    if (kept && outcome.own_end && outcome.start_error.empty() &&
        kept->signal() != SIGKILL) {
      ledger->RecordExit(generation, local_rank,
                         LedgerExit{kept->exit_code(), kept->signal()});
    }
  };
  events.hung = [this, generation](int local_rank, const std::string& reason) {
    ReportHang(generation, local_rank, reason);
  };
  HangOptions hangs;
  hangs.detect.heartbeat_timeout = options_.worker_heartbeat_timeout;
  hangs.detect.output_timeout = options_.hang_output_timeout;
  hangs.detect.cpu_timeout = options_.hang_cpu_timeout;
  if (hangs.detect.any() && executable.ok()) {
    std::string refused;
    hangs.py_spy = FindPySpy(*executable, SearchPath(), &refused);
    if (!refused.empty()) {
      Log()->warn(
          "not running {} to capture hung workers: it, or a directory above "
          "it, belongs to another user or is writable by others",
          refused);
    }
  }
  group_ = std::make_unique<WorkerGroup>(
      generation, console_, std::move(events), stop_grace_, std::move(hangs));
  if (!executable.ok()) {
    Log()->error("cannot start workers: {}",
                 std::string(executable.status().message()));
    for (const auto& launch : launches) {
      WorkerOutcome outcome;
      outcome.start_error = std::string(executable.status().message());
      ReportExit(generation, launch.local_rank, outcome, argv[0]);
    }
    return;
  }
  Log()->info("generation {}: starting ranks {}..{}", generation,
              a.rank_offset(), a.rank_offset() + a.local_world_size() - 1);
  // Between the two, the guardian may not have noted every worker: it
  // does not speak for a dead agent then (job_guardian.h).
  FencePage* fence = GuardianFencePage();
  if (fence != nullptr) fence->WorkersStarting();
  group_->Start(std::move(launches));
  if (fence != nullptr) fence->WorkersStarted();
}

}  // namespace trl

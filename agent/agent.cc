#include "agent/agent.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/worker_group.h"
#include "common/logging.h"
#include "common/network.h"
#include "common/worker_command.h"
#include "proto/trl_launch.grpc.pb.h"

namespace trl {

namespace pb = trl::launch::v1;
namespace fs = std::filesystem;
using std::chrono::steady_clock;

namespace {

std::shared_ptr<spdlog::logger> Log() { return ComponentLogger("agent"); }

std::string SignalName(int signal) {
  const char* name = sigabbrev_np(signal);
  return name ? absl::StrCat("SIG", name) : absl::StrCat("signal ", signal);
}

}  // namespace

// One connection to the coordinator, from registration to the job's end.
class Agent::Session {
 public:
  Session(const AgentOptions& options, Console* console,
          std::shared_ptr<grpc::Channel> channel)
      : options_(options),
        console_(console),
        stub_(pb::Coordinator::NewStub(channel)) {}

  ~Session() {
    if (!scratch_dir_.empty()) {
      std::error_code ignored;
      fs::remove_all(scratch_dir_, ignored);
    }
  }

  int Run(const pb::AgentRegistration& registration);

  // From the signal thread.
  void StopLocally(int signal, bool escalate) {
    {
      std::lock_guard<std::mutex> lock(group_mutex_);
      if (group_) group_->Stop(escalate ? SIGKILL : signal);
    }
    if (escalate) return;
    pb::AgentMessage message;
    message.mutable_stopping()->set_reason(
        absl::StrCat("received ", SignalName(signal)));
    message.mutable_stopping()->set_signal(signal);
    Write(message);
  }

 private:
  bool Write(const pb::AgentMessage& message) {
    std::lock_guard<std::mutex> lock(write_mutex_);
    if (!open_) return false;
    return stream_->Write(message);
  }
  void HeartbeatLoop();
  void StartWorkers(const pb::Assignment& assignment);
  void ReportExit(int64_t generation, int local_rank,
                  const WorkerOutcome& outcome);

  const AgentOptions& options_;
  Console* const console_;
  std::unique_ptr<pb::Coordinator::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<
      grpc::ClientReaderWriter<pb::AgentMessage, pb::CoordinatorMessage>>
      stream_;
  std::mutex write_mutex_;
  bool open_ = false;
  std::condition_variable heartbeat_wakeup_;

  std::mutex group_mutex_;
  std::unique_ptr<WorkerGroup> group_;
  std::chrono::milliseconds stop_grace_{30000};
  std::string scratch_dir_;
};

int Agent::Session::Run(const pb::AgentRegistration& registration) {
  stream_ = stub_->Attach(&context_);
  {
    std::lock_guard<std::mutex> lock(write_mutex_);
    open_ = true;
  }
  pb::AgentMessage hello;
  *hello.mutable_registration() = registration;
  Write(hello);
  std::thread heartbeat([this] { HeartbeatLoop(); });

  int exit_code = -1;
  pb::CoordinatorMessage message;
  while (exit_code < 0 && stream_->Read(&message)) {
    switch (message.body_case()) {
      case pb::CoordinatorMessage::kRegistrationReply: {
        const auto& reply = message.registration_reply();
        if (!reply.accepted()) {
          Log()->error("the coordinator refused this agent: {}",
                       reply.reason());
          exit_code = 2;
        } else {
          Log()->info("machine {} registered with job {}",
                      registration.machine_rank(), reply.job_id());
        }
        break;
      }
      case pb::CoordinatorMessage::kAssignment:
        StartWorkers(message.assignment());
        break;
      case pb::CoordinatorMessage::kStop: {
        std::lock_guard<std::mutex> lock(group_mutex_);
        if (group_ && group_->generation() == message.stop().generation()) {
          Log()->info("stopping generation {}: {}", group_->generation(),
                      message.stop().reason());
          group_->Stop(SIGTERM);
        }
        break;
      }
      case pb::CoordinatorMessage::kFinished: {
        const auto& finished = message.finished();
        exit_code = finished.exit_code();
        Log()->info("job {}: {}", finished.state(), finished.summary());
        break;
      }
      default:
        break;
    }
  }
  const bool lost = exit_code < 0;
  if (lost) {
    Log()->error(
        "lost the connection to the coordinator at {}:{}; stopping workers",
        options_.coordinator_host, options_.coordinator_port);
    exit_code = 1;
  }
  {
    std::unique_lock<std::mutex> lock(group_mutex_);
    if (group_) {
      group_->Stop(SIGTERM);
      group_->WaitUntilAllExited(steady_clock::now() + stop_grace_ +
                                 std::chrono::seconds(2));
      group_.reset();
    }
  }
  {
    std::lock_guard<std::mutex> lock(write_mutex_);
    open_ = false;
  }
  heartbeat_wakeup_.notify_all();
  heartbeat.join();
  if (lost || exit_code == 2) {
    context_.TryCancel();
  } else {
    stream_->WritesDone();
  }
  stream_->Finish();
  return exit_code;
}

void Agent::Session::HeartbeatLoop() {
  pb::AgentMessage beat;
  beat.mutable_heartbeat();
  std::unique_lock<std::mutex> lock(write_mutex_);
  while (open_) {
    heartbeat_wakeup_.wait_for(lock, options_.heartbeat_interval);
    if (!open_) break;
    stream_->Write(beat);
  }
}

void Agent::Session::ReportExit(int64_t generation, int local_rank,
                                const WorkerOutcome& outcome) {
  pb::AgentMessage message;
  auto* exited = message.mutable_worker_exited();
  exited->set_generation(generation);
  exited->set_local_rank(local_rank);
  exited->set_exit_code(outcome.exit.exit_code);
  exited->set_signal(outcome.exit.signal);
  exited->set_start_error(outcome.start_error);
  for (const auto& line : outcome.last_lines) exited->add_last_lines(line);
  Write(message);
}

void Agent::Session::StartWorkers(const pb::Assignment& a) {
  const int64_t generation = a.generation();
  stop_grace_ =
      std::chrono::milliseconds(static_cast<int64_t>(a.stop_grace_s() * 1000));
  std::unique_lock<std::mutex> lock(group_mutex_);
  group_.reset();  // nothing of an older generation may survive

  if (a.argv_size() == 0) return;
  std::vector<std::string> argv(a.argv().begin(), a.argv().end());
  auto path = options_.inherited_environment.find("PATH");
  auto executable = ResolveExecutable(
      argv[0], path == options_.inherited_environment.end() ? "/usr/bin:/bin"
                                                            : path->second);

  fs::path run_dir;
  if (!options_.log_dir.empty()) {
    run_dir = fs::path(options_.log_dir) / a.job_id();
  } else {
    if (scratch_dir_.empty()) {
      scratch_dir_ = (fs::temp_directory_path() /
                      absl::StrCat("trl-launch-", a.job_id(), "-m",
                                   a.machine_rank(), "-", getpid()))
                         .string();
    }
    run_dir = scratch_dir_;
  }
  run_dir /= absl::StrCat("gen", generation);
  std::error_code dir_error;
  fs::create_directories(run_dir, dir_error);

  Environment job_env(a.job_environment().begin(), a.job_environment().end());
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
    inputs.error_file = (run_dir / absl::StrCat("rank", rank, ".error.json"));
    inputs.heartbeat_file =
        (run_dir / absl::StrCat("rank", rank, ".heartbeat"));
    inputs.working_directory = options_.working_directory;
    WorkerLaunch launch;
    launch.local_rank = local;
    launch.rank = rank;
    launch.spec.executable = executable.ok() ? *executable : argv[0];
    launch.spec.argv = argv;
    launch.spec.environment =
        BuildWorkerEnvironment(options_.inherited_environment, job_env, inputs);
    launch.spec.working_directory = options_.working_directory;
    if (!options_.log_dir.empty()) {
      launch.log_path = run_dir / absl::StrCat("rank", rank, ".log");
    }
    launches.push_back(std::move(launch));
  }

  WorkerGroup::Events events;
  events.started = [this, generation](int local_rank, int pid) {
    pb::AgentMessage message;
    message.mutable_worker_started()->set_generation(generation);
    message.mutable_worker_started()->set_local_rank(local_rank);
    message.mutable_worker_started()->set_pid(pid);
    Write(message);
  };
  events.exited = [this, generation](int local_rank,
                                     const WorkerOutcome& outcome) {
    ReportExit(generation, local_rank, outcome);
  };
  group_ = std::make_unique<WorkerGroup>(generation, console_,
                                         std::move(events), stop_grace_);
  if (!executable.ok()) {
    Log()->error("cannot start workers: {}",
                 std::string(executable.status().message()));
    for (const auto& launch : launches) {
      WorkerOutcome outcome;
      outcome.start_error =
          std::string(std::string(executable.status().message()));
      ReportExit(generation, launch.local_rank, outcome);
    }
    return;
  }
  Log()->info("generation {}: starting ranks {}..{}", generation,
              a.rank_offset(), a.rank_offset() + a.local_world_size() - 1);
  group_->Start(std::move(launches));
}

Agent::Agent(AgentOptions options, Console* console)
    : options_(std::move(options)), console_(console) {}

Agent::~Agent() = default;

int Agent::Run() {
  const std::string target =
      JoinHostPort(options_.coordinator_host, options_.coordinator_port);
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 20);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 20);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetMaxReceiveMessageSize(4 << 20);
  auto channel = grpc::CreateCustomChannel(
      target, grpc::InsecureChannelCredentials(), args);

  const auto started = steady_clock::now();
  const auto deadline = started + options_.connect_timeout;
  bool told = false;
  while (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                    std::chrono::milliseconds(200))) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_signal_ != 0) return 128 + stop_signal_;
    }
    if (steady_clock::now() > deadline) {
      Log()->error("the coordinator at {} did not answer within {} s", target,
                   options_.connect_timeout.count() / 1000);
      return 1;
    }
    if (!told && steady_clock::now() - started > std::chrono::seconds(1)) {
      Log()->info("waiting for the coordinator at {}", target);
      told = true;
    }
  }

  std::string address = options_.advertise_addr;
  if (address.empty()) {
    auto local = LocalAddressTowards(options_.coordinator_host,
                                     options_.coordinator_port);
    if (!local.ok()) {
      Log()->error("{}", std::string(local.status().message()));
      return 1;
    }
    address = *local;
  }
  AgentOptions session_options = options_;
  session_options.interface_name = InterfaceWithAddress(address);

  pb::AgentRegistration registration;
  registration.set_machine_rank(options_.config.machine_rank);
  registration.set_hostname(LocalHostName());
  registration.set_advertise_addr(address);
  registration.set_interface_name(session_options.interface_name);
  registration.set_local_device_count(options_.local_gpu_count);
  registration.set_local_world_size(options_.config.ProcessesPerMachine());
  registration.set_agent_pid(getpid());
  for (const auto& [key, value] : AgreementFingerprint(options_.config)) {
    (*registration.mutable_config_fingerprint())[key] = value;
  }

  Session session(session_options, console_, channel);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_signal_ != 0) return 128 + stop_signal_;
    session_ = &session;
  }
  const int exit_code = session.Run(registration);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    session_ = nullptr;
  }
  return exit_code;
}

void Agent::RequestStop(int signal) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool escalate = stop_signal_ != 0;
  if (!escalate) stop_signal_ = signal;
  if (session_) session_->StopLocally(signal, escalate);
}

}  // namespace trl

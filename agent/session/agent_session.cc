#include "agent/session/agent_session.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/cleanup/fence_page.h"
#include "agent/cleanup/job_guardian.h"
#include "agent/cleanup/orphans.h"
#include "agent/cleanup/stale_workers.h"
#include "agent/workers/stack_capture.h"
#include "common/auth_token.h"
#include "common/host_identity.h"
#include "common/logging.h"
#include "common/network.h"
#include "common/private_files.h"
#include "common/stop_signals.h"
#include "common/utf8.h"
#include "common/worker_command.h"

namespace trl {

namespace pb = trl::launch::v1;
namespace fs = std::filesystem;
using std::chrono::steady_clock;

namespace {

std::shared_ptr<spdlog::logger> Log() { return ComponentLogger("agent"); }

}  // namespace

AgentSession::AgentSession(const AgentOptions& options, Console* console,
                           std::shared_ptr<grpc::Channel> channel,
                           std::string scratch_dir, SharedAgentCore* core)
    : options_(options),
      console_(console),
      stub_(pb::Coordinator::NewStub(channel)),
      scratch_dir_(std::move(scratch_dir)),
      core_(core),
      host_id_(LocalHostId()) {}

AgentSession::~AgentSession() = default;

bool AgentSession::Write(const pb::AgentMessage& message) {
  std::lock_guard<std::mutex> lock(write_mutex_);
  if (!open_) return false;
  return WriteLocked(message);
}

void AgentSession::ReportHealth(const std::string& problem) {
  {
    std::lock_guard<std::mutex> lock(health_mutex_);
    health_pending_ = problem;
  }
  // Without write_mutex_, a wake-up may come just before the heartbeat
  // thread waits: it then writes the report at its next look, 250 ms at
  // most later.
  heartbeat_wakeup_.notify_all();
}

void AgentSession::WriteHealthLocked() {
  std::optional<std::string> problem;
  {
    std::lock_guard<std::mutex> lock(health_mutex_);
    problem.swap(health_pending_);
  }
  if (!problem) return;
  pb::AgentMessage health;
  health.mutable_health()->set_problem(ToValidUtf8(*problem));
  WriteLocked(health);
}

bool AgentSession::WriteLocked(const pb::AgentMessage& message) {
  // In the order written: the coordinator's words count what it read.
  core_->With(
      [](AgentCore& core) { core.StreamMessageSent(steady_clock::now()); });
  return stream_->Write(message);
}

void AgentSession::Apply(const AgentEffects& effects,
                         const pb::RegistrationReply* reply) {
  const int machine_rank = effects.machine_rank;
  if (effects.role_changed) Log()->warn("{}", *effects.role_changed);
  if (effects.sweep_stale) SweepStale(machine_rank);
  if (effects.close_datagrams) {
    if (FencePage* fence = GuardianFencePage()) fence->ForgetLastWord();
    std::lock_guard<std::mutex> lock(write_mutex_);
    udp_.reset();
  }
  if (effects.open_datagrams) {
    UseUdpHeartbeats(machine_rank, *effects.open_datagrams);
  }
  if (effects.check_command && reply != nullptr) CheckCommand(*reply);
  if (effects.end_workers) {
    std::lock_guard<std::mutex> lock(group_mutex_);
    EndGroup();  // nothing of an older generation may survive
  }
  if (effects.not_started) Log()->warn("{}", *effects.not_started);
  if (effects.start_workers) {
    // Ending the older workers took time: the lease must still hold.
    const AgentEffects late = core_->With([&](AgentCore& core) {
      return core.StartingWorkers(effects.start_workers->generation(),
                                  steady_clock::now());
    });
    if (late.not_started) {
      Log()->warn("{}", *late.not_started);
      context_.TryCancel();
    } else {
      StartWorkers(*effects.start_workers);
    }
  }
  if (effects.capture_only) CaptureBeforeTheStop(*effects.capture_only);
  if (effects.signal_workers) {
    std::optional<std::chrono::milliseconds> grace;
    if (effects.fence_grace) grace = TimeLeftInTheFence();
    std::lock_guard<std::mutex> lock(group_mutex_);
    if (group_) {
      MarkStopping();
      group_->Stop(*effects.signal_workers, grace, effects.capture_stacks);
    }
  }
  for (const auto& message : effects.send) Write(message);
  if (effects.cancel_stream) context_.TryCancel();
}

void AgentSession::SweepStale(int machine_rank) {
  // The reader waits meanwhile, with the coordinator's acks unread in the
  // socket: the core holds the lease open until the sweep ends.
  core_->With([](AgentCore& core) { core.SweepStarted(); });
  const StaleProcesses stale = KillStaleProcessesOf(
      JoinHostPort(options_.coordinator_host, options_.coordinator_port),
      machine_rank);
  core_->With([](AgentCore& core) { core.SweepEnded(); });
  if (stale.workers > 0 || stale.agents > 0) {
    Log()->warn(
        "killed {} worker process(es) and {} agent(s) that an earlier agent "
        "of machine {} left on this host",
        stale.workers, stale.agents, machine_rank);
  }
}

SessionEnd AgentSession::Run(const pb::AgentRegistration& registration) {
  if (!options_.auth_token.empty()) {
    context_.AddMetadata(kAuthMetadataKey, BearerValue(options_.auth_token));
  }
  const pb::AgentMessage hello = core_->With([&](AgentCore& core) {
    return core.StartSession(registration, steady_clock::now());
  });
  stream_ = stub_->Attach(&context_);
  {
    std::lock_guard<std::mutex> lock(write_mutex_);
    open_ = true;
    WriteLocked(hello);
    WriteHealthLocked();
  }
  std::thread heartbeat([this] { HeartbeatLoop(); });
  std::thread lease([this] { WatchLease(); });
  std::thread logs([this] { ForwardLogs(); });

  std::optional<SessionEnd> end;
  pb::CoordinatorMessage message;
  while (!end && stream_->Read(&message)) {
    const AgentEffects effects = core_->With([&](AgentCore& core) {
      return core.Received(message, steady_clock::now());
    });
    switch (message.body_case()) {
      case pb::CoordinatorMessage::kRegistrationReply: {
        const auto& reply = message.registration_reply();
        if (!reply.accepted()) {
          Log()->error("the coordinator refused this agent: {}",
                       reply.reason());
        } else {
          Log()->info("machine {} registered with job {}",
                      registration.machine_rank(), reply.job_id());
        }
        Apply(effects, &reply);
        break;
      }
      case pb::CoordinatorMessage::kAssignment: {
        const auto& assignment = message.assignment();
        if (effects.end_workers) {
          stop_grace_ = std::chrono::milliseconds(
              static_cast<int64_t>(assignment.stop_grace_s() * 1000));
        }
        if (assignment.argv_size() > 0 && !effects.start_workers &&
            !effects.send.empty()) {
          Log()->error(
              "refusing generation {}: job id '{}' is not a valid job id",
              assignment.generation(), assignment.job_id());
        }
        Apply(effects);
        break;
      }
      case pb::CoordinatorMessage::kLogSubscribe:
        OnLogSubscribe(message.log_subscribe());
        break;
      case pb::CoordinatorMessage::kLogAck: {
        std::lock_guard<std::mutex> lock(logs_mutex_);
        log_credits_ = std::min(log_credits_ + 1, kLogCredits);
        log_credit_.notify_all();
        break;
      }
      case pb::CoordinatorMessage::kLogUnsubscribe: {
        const uint64_t id = message.log_unsubscribe().subscription();
        console_->logs().Unsubscribe(id);
        std::lock_guard<std::mutex> lock(logs_mutex_);
        log_subscriptions_.erase(id);
        break;
      }
      case pb::CoordinatorMessage::kStop:
        if (effects.signal_workers) {
          Log()->info("stopping generation {}: {}", message.stop().generation(),
                      message.stop().reason());
        }
        Apply(effects);
        break;
      case pb::CoordinatorMessage::kFinished:
        Log()->info("job {}: {}", message.finished().state(),
                    message.finished().summary());
        Apply(effects);
        break;
      default:
        Apply(effects);
        break;
    }
    end = effects.end;
  }
  // Cut off (the lease ran out or the connection broke): the coordinator
  // hands these ranks on once the fence's bound has passed, so the workers
  // get what is left of the fence (to save a checkpoint), not the whole
  // stop grace.
  bool cut_off = false;
  if (!end) {
    cut_off = true;
    end = core_->With([](AgentCore& core) { return core.StreamEnded(); });
    const bool lease_expired =
        core_->With([](AgentCore& core) { return core.lease_expired(); });
    if (lease_expired) {
      Log()->error(
          "no word from the coordinator for {} ms (the lease); stopping "
          "workers",
          options_.lease.count());
    } else {
      Log()->error(
          "lost the connection to the coordinator at {}:{}; "
          "stopping workers",
          options_.coordinator_host, options_.coordinator_port);
    }
  }
  // Stop the workers and wait for them without holding group_mutex_: a
  // second stop signal (Apply) must be able to cut the grace short
  // meanwhile. Only this thread replaces or ends the group.
  WorkerGroup* stopping = nullptr;
  const std::chrono::milliseconds grace =
      cut_off ? std::min(TimeLeftInTheFence(), stop_grace_) : stop_grace_;
  {
    std::lock_guard<std::mutex> lock(group_mutex_);
    if (group_) {
      MarkStopping();
      group_->Stop(StopSignal{SIGTERM}, grace);
      stopping = group_.get();
    }
  }
  if (stopping != nullptr) {
    stopping->WaitUntilAllExited(steady_clock::now() + grace +
                                 std::chrono::seconds(2));
    std::lock_guard<std::mutex> lock(group_mutex_);
    EndGroup();
  }
  {
    std::lock_guard<std::mutex> lock(write_mutex_);
    open_ = false;
  }
  heartbeat_wakeup_.notify_all();
  heartbeat.join();
  {
    // The forwarder waits for a credit or for lines: woken now, it sees
    // the stop at once rather than after its wait.
    std::lock_guard<std::mutex> lock(logs_mutex_);
    logs_stop_ = true;
  }
  log_credit_.notify_all();
  console_->logs().StopTakers();
  logs.join();
  console_->logs().ResumeTakers();
  {
    std::lock_guard<std::mutex> lock(logs_mutex_);
    console_->logs().UnsubscribeAll(log_subscriptions_);
    log_subscriptions_.clear();
  }
  {
    std::lock_guard<std::mutex> lock(lease_mutex_);
    lease_watch_ended_ = true;
  }
  lease_wakeup_.notify_all();
  lease.join();
  if (end->kind == SessionEnd::kJobFinished) {
    stream_->WritesDone();
    // Finish waits for the status, which comes after any message still on
    // its way (a heartbeat ack): read them; a coordinator that never ends
    // the stream is given 5 s.
    std::mutex drained_mutex;
    std::condition_variable drained_wakeup;
    bool drained = false;
    std::thread guard([&] {
      std::unique_lock<std::mutex> lock(drained_mutex);
      if (!drained_wakeup.wait_for(lock, std::chrono::seconds(5),
                                   [&] { return drained; })) {
        context_.TryCancel();
      }
    });
    while (stream_->Read(&message)) {
    }
    {
      std::lock_guard<std::mutex> lock(drained_mutex);
      drained = true;
    }
    drained_wakeup.notify_all();
    guard.join();
  } else if (end->kind == SessionEnd::kRefused) {
    context_.TryCancel();
  }
  const grpc::Status status = stream_->Finish();
  const bool not_authenticated =
      status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
      status.error_code() == grpc::StatusCode::PERMISSION_DENIED;
  const SessionEnd final_end = core_->With(
      [&](AgentCore& core) { return core.Finished(*end, not_authenticated); });
  if (final_end.kind != end->kind) {
    Log()->error("the coordinator refused this agent: {}",
                 status.error_message());
  }
  return final_end;
}

std::string AgentSession::SearchPath() const {
  auto path = options_.inherited_environment.find("PATH");
  return path == options_.inherited_environment.end() ? "/usr/bin:/bin"
                                                      : path->second;
}

void AgentSession::CheckCommand(const pb::RegistrationReply& reply) {
  pb::AgentMessage check;
  auto* result = check.mutable_command_check();
  if (reply.argv_size() > 0) {
    const std::vector<std::string> argv =
        WithOwnPython({reply.argv().begin(), reply.argv().end()},
                      reply.argv_runs_python(), options_.own_python);
    const absl::Status runs =
        CheckCommandRunsHere(argv, reply.argv_runs_python(), SearchPath(),
                             options_.working_directory);
    if (!runs.ok()) {
      Log()->error("the job's command cannot run on this machine: {}",
                   std::string(runs.message()));
      result->set_problem(ToValidUtf8(std::string(runs.message())));  // a path
    } else {
      Log()->debug("the job's command runs on this machine");
    }
  }
  Write(check);
}

void AgentSession::UseUdpHeartbeats(int machine_rank,
                                    const AgentEffects::Datagrams& to) {
  auto sender = UdpHeartbeatSender::Open(options_.coordinator_host, to.port,
                                         machine_rank, to.session, to.key);
  core_->With([&](AgentCore& core) { core.UdpOpened(sender.ok()); });
  if (!sender.ok()) {
    Log()->warn("heartbeats stay on the gRPC stream: {}",
                std::string(sender.status().message()));
    return;
  }
  // Left with the guardian: if this agent dies, the coordinator hears of
  // it as soon as its workers have ended (job_guardian.h).
  sockaddr_storage coordinator{};
  socklen_t length = 0;
  FencePage* fence = GuardianFencePage();
  if (fence != nullptr && (*sender)->PeerAddress(&coordinator, &length)) {
    fence->LeaveLastWord(reinterpret_cast<const sockaddr*>(&coordinator),
                         length, (*sender)->AgentGone());
  }
  std::lock_guard<std::mutex> lock(write_mutex_);
  udp_ = *std::move(sender);
  heartbeat_wakeup_.notify_all();
}

void AgentSession::HeartbeatLoop() {
  pb::AgentMessage beat;
  beat.mutable_heartbeat();
  // Wake often enough to read acks that keep the lease.
  const auto period = std::min<std::chrono::milliseconds>(
      options_.heartbeat_interval, std::chrono::milliseconds(250));
  std::unique_lock<std::mutex> lock(write_mutex_);
  while (open_) {
    const auto now = steady_clock::now();
    const std::optional<steady_clock::time_point> acked_sent =
        udp_ && udp_->ReadAcks() > 0 ? udp_->NewestAckedSentAt() : std::nullopt;
    const bool acked = udp_ && udp_->LastHeartbeatAcked();
    const auto [due, expired] = core_->With([&](AgentCore& core) {
      if (acked_sent) core.UdpAcked(*acked_sent);
      return std::make_pair(core.HeartbeatAt(now, acked), core.lease_expired());
    });
    if (expired) break;
    if (due.datagram && udp_) udp_->SendHeartbeat();
    if (due.stream) WriteLocked(beat);
    WriteHealthLocked();
    // At the next beat, or sooner to read acks.
    heartbeat_wakeup_.wait_until(
        lock, std::min(due.next, steady_clock::now() + period));
  }
}

void AgentSession::OnLogSubscribe(const pb::LogSubscribe& subscribe) {
  {
    std::lock_guard<std::mutex> lock(logs_mutex_);
    log_subscriptions_.insert(subscribe.subscription());
  }
  console_->logs().Subscribe(
      subscribe.subscription(),
      std::set<int>(subscribe.ranks().begin(), subscribe.ranks().end()),
      subscribe.follow(), subscribe.history_after_unix_ms());
}

void AgentSession::ForwardLogs() {
  // Batches of at most 64 KiB of text: one stream write never holds the
  // write lock for long.
  constexpr size_t kBatchBytes = 64 * 1024;
  pb::AgentMessage message;
  while (!logs_stop_) {
    {
      // Only with a credit: a stalled stream then fills the bounded
      // queues (agent/console/log_ring.h) rather than blocking in Write with
      // the lock that heartbeats take.
      std::unique_lock<std::mutex> lock(logs_mutex_);
      if (!log_credit_.wait_for(
              lock, std::chrono::milliseconds(100),
              [this] { return log_credits_ > 0 || logs_stop_; }) ||
          logs_stop_) {
        continue;
      }
    }
    // The ranks' newest lines when due (progress in view), with this
    // credit: they never wait behind a stream the coordinator is not
    // reading.
    if (TakeOutputReport(steady_clock::now(), &message)) {
      {
        std::lock_guard<std::mutex> lock(logs_mutex_);
        --log_credits_;
      }
      Write(message);
      continue;
    }
    if (!console_->logs().TakeBatch(message.mutable_log_batch(), kBatchBytes,
                                    std::chrono::milliseconds(100))) {
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(logs_mutex_);
      if (log_subscriptions_.count(message.log_batch().subscription()) == 0) {
        continue;  // an earlier connection's
      }
      if (message.log_batch().history_done() &&
          !console_->logs().Follows(message.log_batch().subscription())) {
        log_subscriptions_.erase(message.log_batch().subscription());
      }
      --log_credits_;
    }
    Write(message);
  }
}

void AgentSession::WatchLease() {
  // Takes only the core's lock and its own: a stream write blocked in a
  // silent partition (which holds write_mutex_) cannot delay the lease.
  std::unique_lock<std::mutex> lock(lease_mutex_);
  while (!lease_watch_ended_) {
    const AgentCore::Lease lease = core_->With(
        [](AgentCore& core) { return core.LeaseAt(steady_clock::now()); });
    if (lease.expired) {
      context_.TryCancel();  // a blocked Write or Read returns: Run ends
      heartbeat_wakeup_.notify_all();
      return;
    }
    lease_wakeup_.wait_until(lock, lease.check_again);
  }
}

std::chrono::milliseconds AgentSession::TimeLeftInTheFence() {
  const std::optional<steady_clock::time_point> deadline =
      core_->With([](AgentCore& core) { return core.FenceDeadline(); });
  if (!deadline) return std::chrono::milliseconds(0);
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      *deadline - steady_clock::now()));
}

}  // namespace trl

#include "coordinator/ports/grpc_service.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/auth_token.h"
#include "common/grpc_handoff.h"
#include "common/logging.h"
#include "common/network.h"
#include "common/tsan_visible_mutex.h"
#include "coordinator/access/refused_calls.h"
#include "coordinator/ports/log_relay.h"
#include "coordinator/record/events.h"
#include "proto/trl_launch.grpc.pb.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

constexpr int kMaxMessageBytes = 4 << 20;
// What the coordinator sends at most in one message: the whole status
// (GetJobStatus without a slice, `ps --json`) of 16,384 machines x 8 ranks
// is about 5 MB since ranks name their host, past gRPC's default 4 MiB
// (ps then failed there). 64 MiB leaves room for 1M ranks; what agents
// are sent stays small, and they take 4 MiB at most.
constexpr int kMaxSendBytes = 64 << 20;
// What GetJobEvents sends at most, under kMaxMessageBytes.
constexpr size_t kMaxEventsBytes = kMaxMessageBytes - (64 << 10);

// One agent's stream. Owned by gRPC: it deletes itself in OnDone. Writes are
// queued so that one is in flight at a time, and StartWrite/Finish are
// called without holding the lock, since gRPC may run reactions inline.
class AgentStream
    : public grpc::ServerBidiReactor<pb::AgentMessage, pb::CoordinatorMessage>,
      public AgentLink {
 public:
  AgentStream(Coordinator* core, LogRelay* logs, std::string peer)
      : core_(core), logs_(logs), peer_(std::move(peer)) {
    HandToGrpc(this);
    StartRead(&incoming_);
  }

  void Send(const pb::CoordinatorMessage& message) override {
    const pb::CoordinatorMessage* next = nullptr;
    {
      MutexLock lock(&mutex_);
      if (close_requested_) return;
      outgoing_.push_back(message);
      // What the agent's lease runs from (its messages read so far).
      outgoing_.back().set_agent_messages_read(vouched_ ? *vouched_ : read_);
      if (writing_) return;
      writing_ = true;
      next = &outgoing_.front();
    }
    HandToGrpc(this);
    StartWrite(next);
  }

  void Close() override {
    {
      MutexLock lock(&mutex_);
      if (close_requested_) return;
      close_requested_ = true;
      if (writing_ || finished_) return;
      finished_ = true;
    }
    HandToGrpc(this);
    Finish(grpc::Status::OK);
  }

  std::string Peer() const override { return peer_; }

  void Fenced() override {
    MutexLock lock(&mutex_);
    if (!vouched_) vouched_ = read_;
  }

  void OnWriteDone(bool ok) override {
    TakeFromGrpc(this);
    const pb::CoordinatorMessage* next = nullptr;
    bool finish = false;
    {
      MutexLock lock(&mutex_);
      outgoing_.pop_front();
      if (!ok) outgoing_.clear();  // the stream is broken
      if (!outgoing_.empty()) {
        next = &outgoing_.front();
      } else {
        writing_ = false;
        if (close_requested_ && !finished_) finish = finished_ = true;
      }
    }
    HandToGrpc(this);
    if (next) StartWrite(next);
    if (finish) Finish(grpc::Status::OK);
  }

  void OnReadDone(bool ok) override {
    TakeFromGrpc(this);
    if (!ok) {
      core_->OnDisconnected(this);
      Close();
      return;
    }
    {
      MutexLock lock(&mutex_);
      ++read_;
    }
    if (incoming_.has_log_batch()) {
      // Worker output for `trl-coord logs`: the relay, not the job's lock.
      // The ack lets the agent send its next batch (LogAck).
      if (logs_ != nullptr) {
        logs_->OnAgentBatch(core_->MachineOf(this), incoming_.log_batch());
      }
      pb::CoordinatorMessage ack;
      ack.mutable_log_ack();
      Send(ack);
    } else {
      // A report of the ranks' newest lines came with a log credit: the ack
      // gives it back once it is read, so an agent whose stream is not read
      // writes no more of them.
      const bool credit = incoming_.has_rank_output();
      const bool more = core_->OnMessage(this, incoming_);
      if (credit) {
        pb::CoordinatorMessage ack;
        ack.mutable_log_ack();
        Send(ack);
      }
      if (!more) {
        // This stream has its share of the owner's queue: no next read
        // (gRPC reads no more of it; TCP's flow control holds the agent)
        // until the owner calls ResumeReading, which may already have
        // happened.
        MutexLock lock(&mutex_);
        if (!resumed_early_) {
          read_paused_ = true;
          return;
        }
        resumed_early_ = false;
      }
    }
    HandToGrpc(this);
    StartRead(&incoming_);
  }

  // On the owner thread, between two events.
  void ResumeReading() override {
    {
      MutexLock lock(&mutex_);
      if (!read_paused_) {
        resumed_early_ = true;  // OnReadDone has not paused yet
        return;
      }
      read_paused_ = false;
      // Ending: no read after Finish (OnDone follows, with no read
      // outstanding).
      if (finished_) return;
    }
    HandToGrpc(this);
    StartRead(&incoming_);
  }

  void OnDone() override {
    TakeFromGrpc(this);
    core_->OnDisconnected(this);
    delete this;
  }

 private:
  Coordinator* const core_;
  LogRelay* const logs_;
  const std::string peer_;
  pb::AgentMessage incoming_;
  absl::Mutex mutex_;
  // front is in flight
  std::deque<pb::CoordinatorMessage> outgoing_ ABSL_GUARDED_BY(mutex_);
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool close_requested_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
  // No read outstanding until ResumeReading (Coordinator::OnMessage).
  bool read_paused_ ABSL_GUARDED_BY(mutex_) = false;
  bool resumed_early_ ABSL_GUARDED_BY(mutex_) = false;
  // The agent's messages read, and where the count stopped once its
  // machine was fenced.
  uint64_t read_ ABSL_GUARDED_BY(mutex_) = 0;
  std::optional<uint64_t> vouched_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace

absl::Status CheckCanListen(const std::string& host, int port) {
  const auto address = NumericSocketAddress(host, port);
  if (!address) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", host, "' is not a numeric address"));
  }
  int fd = socket(address->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  // As gRPC's own listener: connections of an earlier coordinator in
  // TIME_WAIT must not keep a restarted one off its port.
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc = fd < 0 ? -1 : bind(fd, address->get(), address->length);
  const int error = errno;
  if (fd >= 0) close(fd);
  if (rc == 0) return absl::OkStatus();
  if (error == EADDRINUSE) {
    return absl::AlreadyExistsError(absl::StrCat(
        "cannot listen on ", JoinHostPort(host, port),
        ": the port is already in use (is another trl-coord running? choose "
        "another --main_process_port)"));
  }
  if (error == EADDRNOTAVAIL) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot listen on ", JoinHostPort(host, port), ": ", host,
        " is not an address of this machine (main_process_ip must be "
        "machine 0's own address)"));
  }
  return absl::UnavailableError(absl::StrCat("cannot listen on ",
                                             JoinHostPort(host, port), ": ",
                                             std::strerror(error)));
}

// A stream refused before it starts: it ends at once with `status`.
class RefusedStream
    : public grpc::ServerBidiReactor<pb::AgentMessage, pb::CoordinatorMessage> {
 public:
  explicit RefusedStream(const grpc::Status& status) {
    HandToGrpc(this);
    Finish(status);
  }
  void OnDone() override {
    TakeFromGrpc(this);
    delete this;
  }
};

class RefusedLogStream : public grpc::ServerWriteReactor<pb::LogBatch> {
 public:
  explicit RefusedLogStream(const grpc::Status& status) {
    HandToGrpc(this);
    Finish(status);
  }
  void OnDone() override {
    TakeFromGrpc(this);
    delete this;
  }
};

class CoordinatorServer::Service : public pb::Coordinator::CallbackService {
 public:
  Service(Coordinator* core, std::string auth_token, bool peer_identity,
          LogRelay* logs)
      : core_(core),
        logs_(logs),
        expected_(auth_token.empty() ? "" : BearerValue(auth_token)),
        peer_identity_(peer_identity) {}

  grpc::ServerBidiReactor<pb::AgentMessage, pb::CoordinatorMessage>* Attach(
      grpc::CallbackServerContext* context) override {
    if (grpc::Status refused = Authenticate(*context); !refused.ok()) {
      return new RefusedStream(refused);
    }
    return new AgentStream(core_, logs_, context->peer());
  }

  grpc::ServerUnaryReactor* GetJobStatus(grpc::CallbackServerContext* context,
                                         const pb::JobStatusRequest* request,
                                         pb::JobStatus* reply) override {
    auto* reactor = context->DefaultReactor();
    if (grpc::Status refused = Authenticate(*context); !refused.ok()) {
      reactor->Finish(refused);
      return reactor;
    }
    *reply = core_->Status(*request);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  // Bounded like GetJobStatus: the newest events that fit one answer.
  grpc::ServerUnaryReactor* GetJobEvents(grpc::CallbackServerContext* context,
                                         const pb::JobEventsRequest* request,
                                         pb::JobEvents* reply) override {
    auto* reactor = context->DefaultReactor();
    if (grpc::Status refused = Authenticate(*context); !refused.ok()) {
      reactor->Finish(refused);
      return reactor;
    }
    *reply = core_->Events();
    KeepNewestEvents(reply, request->limit(), kMaxEventsBytes);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* Uncordon(grpc::CallbackServerContext* context,
                                     const pb::UncordonRequest* request,
                                     pb::UncordonReply* /*reply*/) override {
    auto* reactor = context->DefaultReactor();
    if (grpc::Status refused = Authenticate(*context); !refused.ok()) {
      reactor->Finish(refused);
      return reactor;
    }
    const std::string host = request->hostname().substr(0, 255);
    const absl::Status done = core_->Uncordon(host);
    reactor->Finish(done.ok() ? grpc::Status::OK
                              : grpc::Status(grpc::StatusCode::NOT_FOUND,
                                             std::string(done.message())));
    return reactor;
  }

  grpc::ServerWriteReactor<pb::LogBatch>* StreamLogs(
      grpc::CallbackServerContext* context,
      const pb::LogsRequest* request) override {
    grpc::Status refused = Authenticate(*context);
    if (refused.ok() && logs_ == nullptr) {
      refused = grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                             "this coordinator relays no logs");
    }
    if (!refused.ok()) return new RefusedLogStream(refused);
    return logs_->Open(*request);
  }

 private:
  // OK, or UNAUTHENTICATED naming what was wrong (never the token).
  grpc::Status Authenticate(const grpc::CallbackServerContext& context) {
    if (peer_identity_) {
      // The TLS handshake verified the peer's derived identity (it holds
      // the token); without one no stream opens. Checked again here.
      const auto auth = context.auth_context();
      if (auth && auth->IsPeerAuthenticated()) return grpc::Status::OK;
      refused_.Log(context.peer(), "no verified peer identity");
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "no verified peer identity");
    }
    if (expected_.empty()) return grpc::Status::OK;
    const auto& metadata = context.client_metadata();
    auto found = metadata.find(kAuthMetadataKey);
    const char* problem = "no auth token";
    if (found != metadata.end()) {
      const std::string given(found->second.data(), found->second.size());
      if (TokensEqual(expected_, given)) return grpc::Status::OK;
      problem = "wrong auth token";
    }
    refused_.Log(context.peer(), problem);
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat(problem,
                                     " (the coordinator's token is in its "
                                     "--auth_token_file, TRL_AUTH_TOKEN or "
                                     "~/.trl/token)"));
  }

  Coordinator* const core_;
  LogRelay* const logs_;
  const std::string expected_;  // "Bearer TOKEN", or "" for --insecure
  const bool peer_identity_;    // TLS with the token's derived identity
  RefusedCallLog refused_;
};

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const std::string& host, int port, Coordinator* core,
    const std::string& auth_token,
    std::shared_ptr<grpc::ServerCredentials> credentials, grpc::Service* store,
    int idle_connection_ms, bool peer_identity, LogRelay* logs) {
  if (port != 0) {
    if (absl::Status status = CheckCanListen(host, port); !status.ok()) {
      return status;
    }
  }
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer());
  if (core != nullptr) {
    server->service_ =
        std::make_unique<Service>(core, auth_token, peer_identity, logs);
  }
  grpc::ServerBuilder builder;
  // One coordinator per port: never share it with another process.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  // Bounds on what one client can cost: metadata, streams per connection,
  // and the time a connection may take to say hello.
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, 16 * 1024);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 16);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 5000);
  // gRPC 1.51 has no cap on the number of connections; what bounds a flood
  // is the handshake timeout for those that never speak HTTP/2 and this
  // for those that do but make no call.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             idle_connection_ms);
  builder.SetMaxSendMessageSize(kMaxSendBytes);
  // Agents' liveness is their heartbeats' business; pings only find dead
  // TCP connections (see agent/link/agent_channel.cc).
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Agents send a few small messages a second: bandwidth probes (a PING
  // per burst of data) only add packets. 4096 agents: 0.63 -> 0.56 core.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  // No compressed messages: 1.51 checks the size limit before inflating,
  // so a 255 KB gzip bomb became 256 MiB in memory. Nothing of ours
  // compresses; a compressed message now fails to parse and is refused.
  builder.AddChannelArgument(GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION, 0);
  builder.AddListeningPort(JoinHostPort(host, port), credentials,
                           &server->port_);
  if (server->service_) builder.RegisterService(server->service_.get());
  if (store != nullptr) builder.RegisterService(store);
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", JoinHostPort(host, port)));
  }
  return server;
}

CoordinatorServer::~CoordinatorServer() { Shutdown(0); }

void CoordinatorServer::Shutdown(int grace_ms) {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(grace_ms));
  server_->Wait();
  server_.reset();
}

}  // namespace trl

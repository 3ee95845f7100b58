// What a stranger with no token, or a worker (user code), can take from the
// real coordinator: nothing secret from `ps`, a bounded log from a flood of
// refused calls, no memory from a compressed "bomb", and nothing from the
// daemons' /proc files.
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/derived_identity.h"
#include "common/kernel_files.h"
#include "common/tls_credentials.h"
#include "proto/trl_launch.grpc.pb.h"
#include "tests/integration/job_status_probe.h"
#include "tests/integration/launcher_fixture.h"
#include "tests/integration/tcp_relay.h"

namespace trl::testing {
namespace {

// VmRSS of `pid` in KiB, or -1.
long RssKib(pid_t pid) {
  std::istringstream in(
      ReadKernelFile("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

int CountOf(const std::string& text, const std::string& what) {
  int count = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

std::unique_ptr<pb::Store::Stub> StoreStub(int port) {
  return pb::Store::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
}

TEST_F(LauncherTest, PsHidesSecretsInTheCommand) {
  auto coord =
      StartCoordinator(1, 1,
                       {"/bin/sh", "-c", "sleep 30", "sh", "--hub_token",
                        "hf_VERYSECRET", "--api_key=sk-ALSOSECRET"},
                       {"--no_python"});
  ASSERT_TRUE(coord->WaitForOutput("generation 0", seconds(20)))
      << coord->Output();
  std::optional<pb::JobStatus> status;
  ASSERT_TRUE(WaitUntil(
      [&] { return (status = PsJson(port_)) && status->command_size() > 0; },
      seconds(20)));
  std::string shown;
  for (const auto& arg : status->command()) shown += arg + " ";
  EXPECT_EQ(shown.find("VERYSECRET"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("ALSOSECRET"), std::string::npos) << shown;
  EXPECT_NE(shown.find("--hub_token <redacted>"), std::string::npos) << shown;
  coord->Signal(SIGTERM);
  EXPECT_EQ(coord->Wait(seconds(40)), 128 + SIGTERM);
  EXPECT_EQ(coord->Output().find("VERYSECRET"), std::string::npos);
}

TEST_F(LauncherTest, AFloodOfRefusedCallsCostsAFewLogLines) {
  auto coord =
      StartCoordinator(1, 1, {"/bin/sh", "-c", "sleep 30"}, {"--no_python"});
  ASSERT_TRUE(coord->WaitForOutput("generation 0", seconds(20)));
  // 300 strangers: a connection each (a channel of its own), with the
  // identity of another token, and a call.
  auto stranger = ClientSecurityFor(TlsFiles{}, "not-the-token");
  ASSERT_TRUE(stranger.ok());
  int refused = 0;
  for (int i = 0; i < 300; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    SetDerivedServerName(&args);
    auto stub = pb::Coordinator::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(port_), stranger->credentials, args));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(5));
    pb::JobStatus reply;
    if (!stub->GetJobStatus(&context, pb::JobStatusRequest(), &reply).ok()) {
      ++refused;
    }
    // An unauthenticated caller learns nothing of the job.
    EXPECT_TRUE(reply.job_id().empty());
  }
  EXPECT_EQ(refused, 300);
  coord->Signal(SIGTERM);
  coord->Wait(seconds(40));
  EXPECT_LE(CountOf(coord->Stderr(), "andshake"), 10) << coord->Stderr();
  EXPECT_EQ(coord->Stderr().find("not-the-token"), std::string::npos);
}

TEST_F(LauncherTest, ACompressedBombIsRefusedWithoutInflatingIt) {
  auto coord =
      StartCoordinator(1, 1, {"/bin/sh", "-c", "sleep 30"}, {"--no_python"});
  ASSERT_TRUE(coord->WaitForOutput("generation 0", seconds(20)));
  const long before = RssKib(coord->pid());
  auto stub = StoreStub(port_);
  pb::StoreSetRequest request;
  request.set_key("k");
  request.set_value(std::string(64 << 20, '\0'));  // about 64 KB as gzip
  for (int i = 0; i < 4; ++i) {
    grpc::ClientContext context;
    context.set_compression_algorithm(GRPC_COMPRESS_GZIP);
    context.set_deadline(std::chrono::system_clock::now() + seconds(20));
    pb::StoreSetReply reply;
    EXPECT_FALSE(stub->Set(&context, request, &reply).ok());
  }
  const long after = RssKib(coord->pid());
  EXPECT_LT(after - before, 32 * 1024)
      << "RSS grew from " << before << " to " << after << " KiB";
  coord->Signal(SIGTERM);
  coord->Wait(seconds(40));
}

TEST_F(LauncherTest, AWorkerCannotReadItsDaemonsEnvironmentOrMemory) {
  // The daemons and their workers as one unprivileged user (root reads
  // every process's files whatever we do).
  if (getuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0) {
    GTEST_SKIP() << "needs root and setpriv to run the job as another user";
  }
  // Under /tmp itself, not the test's own (private) TMPDIR: the other
  // user must be able to reach it.
  char home_template[] = "/tmp/trl-nobody-XXXXXX";
  ASSERT_NE(mkdtemp(home_template), nullptr);
  const std::string home = home_template;
  chown(home.c_str(), 65534, 65534);
  const std::string probe =
      "if cat /proc/$PPID/environ >/dev/null 2>&1; then echo ENVIRON-READ; "
      "else echo ENVIRON-DENIED; fi; "
      "if (exec 3</proc/$PPID/mem) 2>/dev/null; then echo MEM-OPENED; "
      "else echo MEM-DENIED; fi";
  std::vector<std::string> argv = {"/usr/bin/setpriv",
                                   "--reuid=65534",
                                   "--regid=65534",
                                   "--clear-groups",
                                   "--",
                                   "/usr/bin/env",
                                   "HOME=" + home,
                                   "TMPDIR=" + home,
                                   "HF_HOME=" + home,
                                   "TRL_AUTH_TOKEN=tok-0123456789abcdef-SECRET",
                                   TRL_COORD_BIN,
                                   "start"};
  for (auto& flag : ClusterFlags(1, 1)) argv.push_back(flag);
  for (auto arg : {"--no_python", "/bin/sh", "-c", probe.c_str()}) {
    argv.push_back(arg);
  }
  Subprocess coord(argv);
  ASSERT_EQ(coord.Wait(seconds(30)), 0) << coord.Output();
  EXPECT_NE(coord.Stdout().find("ENVIRON-DENIED"), std::string::npos)
      << coord.Stdout();
  EXPECT_NE(coord.Stdout().find("MEM-DENIED"), std::string::npos)
      << coord.Stdout();
  EXPECT_EQ(coord.Output().find("SECRET"), std::string::npos);
  std::filesystem::remove_all(home);
}

// A listener that records what connects to it and answers nothing that
// makes sense: a fake "coordinator" on the job's port.
class Recorder {
 public:
  explicit Recorder(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&address),
                  sizeof(address)) == 0 &&
             listen(fd_, 16) == 0;
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p = {fd_, POLLIN, 0};
        if (poll(&p, 1, 50) != 1) continue;
        const int client = accept(fd_, nullptr, nullptr);
        if (client < 0) continue;
        char buffer[65536];
        pollfd c = {client, POLLIN, 0};
        while (!stop_ && poll(&c, 1, 200) == 1) {
          const ssize_t n = read(client, buffer, sizeof(buffer));
          if (n <= 0) break;
          std::lock_guard<std::mutex> lock(mutex_);
          received_.append(buffer, static_cast<size_t>(n));
        }
        close(client);
      }
    });
  }
  ~Recorder() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  bool bound() const { return bound_; }
  std::string Received() {
    std::lock_guard<std::mutex> lock(mutex_);
    return received_;
  }

 private:
  int fd_ = -1;
  bool bound_ = false;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::string received_;
  std::thread thread_;
};

constexpr char kClusterToken[] = "c0ffee-cluster-token-0123456789abcdef";

// What an agent with kClusterToken would hold in memory: the token and the
// private key derived from it. None of it may reach a fake.
std::vector<std::string> Secrets() {
  auto identity = DeriveIdentity(kClusterToken);
  std::vector<std::string> secrets = {kClusterToken};
  if (identity.ok()) {
    // The key's body, without its PEM armour.
    std::string key = identity->private_key_pem;
    const size_t start = key.find('\n') + 1;
    secrets.push_back(key.substr(start, key.rfind("\n-----") - start));
  }
  return secrets;
}

// A fake coordinator that speaks gRPC in plaintext, as the one of the
// attack did: it records what each Attach call carries (headers) and ends
// the call.
class RecordingCoordinator : public pb::Coordinator::CallbackService {
 public:
  grpc::ServerBidiReactor<pb::AgentMessage, pb::CoordinatorMessage>* Attach(
      grpc::CallbackServerContext* context) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++calls_;
      for (const auto& [key, value] : context->client_metadata()) {
        headers_ += std::string(key.data(), key.size()) + ": " +
                    std::string(value.data(), value.size()) + "\n";
      }
    }
    class Ended : public grpc::ServerBidiReactor<pb::AgentMessage,
                                                 pb::CoordinatorMessage> {
     public:
      Ended() { Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "")); }
      void OnDone() override { delete this; }
    };
    return new Ended;
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  std::string headers() {
    std::lock_guard<std::mutex> lock(mutex_);
    return headers_;
  }

 private:
  std::mutex mutex_;
  int calls_ = 0;
  std::string headers_;
};

TEST_F(LauncherTest, AFakeCoordinatorLearnsNothingAndCommandsNothing) {
  // A stranger (another local user, say) answers on the job's port, with a
  // real gRPC server in plaintext, and a raw listener that records bytes
  // would learn no more (TLS: the first bytes are a ClientHello).
  RecordingCoordinator fake;
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port_),
                           grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(&fake);
  auto server = builder.BuildAndStart();
  ASSERT_TRUE(server && bound_port == port_);
  std::vector<std::string> argv = {TRL_AGENT_BIN, "--machine_rank", "1"};
  for (auto& flag : ClusterFlags(2, 2)) argv.push_back(flag);
  Subprocess agent(argv, {std::string("TRL_AUTH_TOKEN=") + kClusterToken});
  EXPECT_EQ(agent.Wait(seconds(30)), 2) << agent.Output();
  EXPECT_NE(agent.Stderr().find("cannot authenticate"), std::string::npos)
      << agent.Stderr();
  EXPECT_EQ(fake.calls(), 0) << fake.headers();
  for (const std::string& secret : Secrets()) {
    EXPECT_EQ(fake.headers().find(secret), std::string::npos)
        << "the fake received a secret";
  }
  server->Shutdown(std::chrono::system_clock::now());

  // The same with a listener that keeps every byte.
  Recorder recorder(port_);
  ASSERT_TRUE(recorder.bound());
  Subprocess again(argv, {std::string("TRL_AUTH_TOKEN=") + kClusterToken});
  EXPECT_EQ(again.Wait(seconds(30)), 2) << again.Output();
  const std::string received = recorder.Received();
  EXPECT_FALSE(received.empty()) << "the agent never reached the fake";
  for (const std::string& secret : Secrets()) {
    EXPECT_EQ(received.find(secret), std::string::npos)
        << "the fake received a secret";
  }
}

TEST_F(LauncherTest, AFakeCoordinatorWithItsOwnTlsGetsNoCall) {
  // A real gRPC server with TLS and a certificate of its own (the identity
  // of another token): the agent's handshake fails before it sends a call.
  auto other = DeriveIdentity("the-attackers-own-token");
  ASSERT_TRUE(other.ok());
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port_),
                           DerivedServerCredentials(*other, false),
                           &bound_port);
  pb::Coordinator::AsyncService any_call;  // registered, never answered
  builder.RegisterService(&any_call);
  auto cq = builder.AddCompletionQueue();
  auto server = builder.BuildAndStart();
  ASSERT_TRUE(server && bound_port == port_);
  std::vector<std::string> argv = {TRL_AGENT_BIN, "--machine_rank", "1"};
  for (auto& flag : ClusterFlags(2, 2)) argv.push_back(flag);
  Subprocess agent(argv, {std::string("TRL_AUTH_TOKEN=") + kClusterToken});
  EXPECT_EQ(agent.Wait(seconds(30)), 2) << agent.Output();
  EXPECT_NE(agent.Stderr().find("cannot authenticate"), std::string::npos);
  server->Shutdown(std::chrono::system_clock::now());
  cq->Shutdown();
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok)) {
  }
}

TEST_F(LauncherTest, ACaptureOfAWholeJobHoldsNoSecret) {
  // Machine 1's agent reaches the coordinator through a relay that keeps
  // every byte of every connection, both ways, for a whole job.
  TcpRelay relay(port_);
  std::vector<std::string> agent_argv = {TRL_AGENT_BIN, "--machine_rank", "1"};
  for (auto& flag : ClusterFlagsOn(2, 4, relay.port())) {
    agent_argv.push_back(flag);
  }
  const std::string token_env = std::string("TRL_AUTH_TOKEN=") + kClusterToken;
  Subprocess agent(agent_argv, {token_env});
  std::vector<std::string> coord_argv = {TRL_COORD_BIN, "start"};
  for (auto& flag : ClusterFlags(2, 4)) coord_argv.push_back(flag);
  for (auto& arg : Worker()) coord_argv.push_back(arg);
  Subprocess coord(coord_argv, {token_env});
  ASSERT_EQ(coord.Wait(seconds(30)), 0) << coord.Output();
  ASSERT_EQ(agent.Wait(seconds(30)), 0) << agent.Output();
  RememberWorkerPids(coord.Stdout() + agent.Stdout());
  const std::string captured = relay.Captured();
  ASSERT_GT(captured.size(), 1000u);
  for (const std::string& secret : Secrets()) {
    EXPECT_EQ(captured.find(secret), std::string::npos)
        << "the capture holds a secret";
  }
  // Encrypted: no message of ours is readable on the wire.
  EXPECT_EQ(captured.find("trl.launch.v1"), std::string::npos);
  EXPECT_EQ(captured.find("TRL_STORE_TOKEN"), std::string::npos);
  EXPECT_EQ(captured.find("MASTER_ADDR"), std::string::npos);
}

// The environment a worker of the running job got, read from a file it
// wrote: what a hostile worker holds.
std::map<std::string, std::string> ReadEnvFile(const std::string& path) {
  std::map<std::string, std::string> env;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t equals = line.find('=');
    if (equals != std::string::npos) {
      env[line.substr(0, equals)] = line.substr(equals + 1);
    }
  }
  return env;
}

TEST_F(LauncherTest, AWorkersStoreCredentialGrantsNothingElse) {
  const std::string env_file =
      ::testing::TempDir() + "/trl-worker-env-" + std::to_string(getpid());
  std::filesystem::remove(env_file);
  auto coord = StartCoordinator(
      1, 1, {"/bin/sh", "-c", "env > " + env_file + "; sleep 30"},
      {"--no_python"});
  ASSERT_TRUE(WaitUntil(
      [&] { return ReadEnvFile(env_file).count("TRL_STORE_TOKEN") > 0; },
      seconds(20)))
      << coord->Output();
  const auto env = ReadEnvFile(env_file);
  const std::string store = env.at("TRL_COORDINATOR_ADDR");
  const std::string token = env.at("TRL_STORE_TOKEN");
  const int64_t generation = std::stoll(env.at("TRL_GENERATION"));
  EXPECT_EQ(env.count("TRL_AUTH_TOKEN"), 0u);
  EXPECT_EQ(env.count("TRL_TLS_KEY"), 0u);
  // What the worker has to reach the store: the public certificate.
  std::ifstream ca_file(env.at("TRL_TLS_CA"));
  std::stringstream ca;
  ca << ca_file.rdbuf();
  ASSERT_NE(ca.str().find("BEGIN CERTIFICATE"), std::string::npos);
  grpc::SslCredentialsOptions server_only;
  server_only.pem_root_certs = ca.str();
  auto worker_tls = grpc::SslCredentials(server_only);
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride(env.at("TRL_TLS_SERVER_NAME"));
  auto store_channel = grpc::CreateCustomChannel(store, worker_tls, args);
  auto deadline = [] { return std::chrono::system_clock::now() + seconds(5); };

  // ps and Attach on the store's port: refused on their headers (the port
  // serves the store only; call_authenticator.h).
  {
    auto stub = pb::Coordinator::NewStub(store_channel);
    grpc::ClientContext context;
    context.set_deadline(deadline());
    context.AddMetadata("authorization", "Bearer " + token);
    pb::JobStatus reply;
    const auto status =
        stub->GetJobStatus(&context, pb::JobStatusRequest(), &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << status.error_message();
    EXPECT_TRUE(reply.job_id().empty());
  }
  {
    auto stub = pb::Coordinator::NewStub(store_channel);
    grpc::ClientContext context;
    context.set_deadline(deadline());
    context.AddMetadata("authorization", "Bearer " + token);
    auto stream = stub->Attach(&context);
    pb::CoordinatorMessage message;
    EXPECT_FALSE(stream->Read(&message));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  // ps on the coordinator's own port: no identity, no stream.
  {
    auto stub = pb::Coordinator::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(port_), worker_tls, args));
    grpc::ClientContext context;
    context.set_deadline(deadline());
    context.AddMetadata("authorization", "Bearer " + token);
    pb::JobStatus reply;
    EXPECT_FALSE(
        stub->GetJobStatus(&context, pb::JobStatusRequest(), &reply).ok());
    EXPECT_TRUE(reply.job_id().empty());
  }
  // The store itself: its own generation only.
  auto store_stub = pb::Store::NewStub(store_channel);
  auto set = [&](int64_t in_generation) {
    grpc::ClientContext context;
    context.set_deadline(deadline());
    context.AddMetadata("authorization", "Bearer " + token);
    pb::StoreSetRequest request;
    request.mutable_scope()->set_job_id(env.at("TRL_JOB_ID"));
    request.mutable_scope()->set_generation(in_generation);
    request.set_key("k");
    request.set_value("v");
    pb::StoreSetReply reply;
    return store_stub->Set(&context, request, &reply);
  };
  EXPECT_TRUE(set(generation).ok());
  EXPECT_FALSE(set(generation + 1).ok());
  EXPECT_FALSE(set(generation - 1).ok());
  coord->Signal(SIGTERM);
  coord->Wait(seconds(40));
  std::filesystem::remove(env_file);
}

}  // namespace
}  // namespace trl::testing

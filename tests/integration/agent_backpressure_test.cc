// Agents flooding the coordinator over real gRPC streams (a real
// CoordinatorServer and Coordinator in this process, real client streams
// on loopback) while its owner is held up or slow: a stream over its share
// of the owner's queue is read no more, so its writes block (HTTP/2 flow
// control), the queue stays within the caps, another agent's heartbeat is
// acknowledged and a status query answered, and the server and the
// coordinator end with streams paused. coordinator.h: EventQueueCaps.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "coordinator/owner/coordinator.h"
#include "coordinator/ports/grpc_service.h"
#include "proto/trl_launch.grpc.pb.h"
#include "tests/lib/coordinator_harness.h"
#include "tests/lib/gate.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;
using std::chrono::milliseconds;
using std::chrono::seconds;

long ResidentKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

pb::AgentMessage Heartbeat() {
  pb::AgentMessage message;
  message.mutable_heartbeat();
  return message;
}

// One agent's stream, on a connection of its own. Reads what the
// coordinator sends on a thread; floods on another.
class Agent {
 public:
  explicit Agent(int port) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    stub_ = pb::Coordinator::NewStub(
        grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                  grpc::InsecureChannelCredentials(), args));
    stream_ = stub_->Attach(&context_);
    reader_ = std::thread([this] {
      pb::CoordinatorMessage message;
      while (stream_->Read(&message)) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (message.has_heartbeat_ack()) ++acks_;
        if (message.has_registration_reply()) ++replies_;
        changed_.notify_all();
      }
    });
  }
  ~Agent() { End(); }

  bool Write(const pb::AgentMessage& message) {
    return stream_->Write(message);
  }
  // Writes `message` as fast as the stream takes it, at most `most` times.
  void Flood(const pb::AgentMessage& message, uint64_t most) {
    writer_ = std::thread([this, message, most] {
      while (!ending_ && written_ < most && stream_->Write(message)) {
        ++written_;
      }
    });
  }
  uint64_t written() const { return written_; }
  bool RepliedWithin(milliseconds wait) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, wait, [this] { return replies_ > 0; });
  }
  bool AckedWithin(milliseconds wait) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, wait, [this] { return acks_ > 0; });
  }
  // Cancels the stream (a blocked write returns) and waits for both.
  void End() {
    if (ended_) return;
    ended_ = true;
    ending_ = true;
    context_.TryCancel();
    if (writer_.joinable()) writer_.join();
    reader_.join();
    stream_->Finish();
  }

 private:
  std::unique_ptr<pb::Coordinator::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<
      grpc::ClientReaderWriter<pb::AgentMessage, pb::CoordinatorMessage>>
      stream_;
  std::thread reader_, writer_;
  std::atomic<bool> ending_{false};
  bool ended_ = false;
  std::atomic<uint64_t> written_{0};
  std::mutex mutex_;
  std::condition_variable changed_;
  int acks_ = 0;
  int replies_ = 0;
};

// Machines 0 and 1 flood, 2 beats, 3 never comes (the job waits).
class AgentBackpressureTest : public ::testing::Test {
 protected:
  AgentBackpressureTest() : options_(TwoMachineCpuJob()) {
    options_.config.num_machines = 4;
    options_.config.num_processes = 4;
    options_.policy.tick_interval = milliseconds(50);
    core_ = std::make_unique<Coordinator>(
        options_,
        [](const std::string&) {
          return absl::StatusOr<RendezvousData>(RendezvousData{1234, ""});
        },
        [] { return std::chrono::steady_clock::now(); });
    auto server = CoordinatorServer::Start("127.0.0.1", 0, core_.get(), "",
                                           grpc::InsecureServerCredentials());
    EXPECT_TRUE(server.ok()) << server.status();
    if (server.ok()) server_ = std::move(*server);
  }
  ~AgentBackpressureTest() override {
    gate_.Open();
    for (auto* agent : {&flooder_, &flooder2_, &beating_}) {
      if (*agent) (*agent)->End();
    }
    if (server_) server_->Shutdown(0);
    core_.reset();
  }
  std::unique_ptr<Agent> NewAgent() {
    return std::make_unique<Agent>(server_->port());
  }
  // Machine 0's registration holds the owner until the gate opens.
  void HoldTheOwnerOnMachine0() {
    core_->OnRegistered([this](int machine_rank, AgentLink*) {
      if (machine_rank == 0) gate_.Hold();
    });
  }

  CoordinatorOptions options_;
  // Holds the owner (in the registration callback) until opened.
  Gate gate_{std::chrono::seconds(60)};
  std::unique_ptr<Coordinator> core_;
  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<Agent> flooder_, flooder2_, beating_;
};

TEST_F(AgentBackpressureTest, AFloodingStreamIsReadNoMoreWhileTheOwnerIsHeld) {
  ASSERT_TRUE(server_);
  HoldTheOwnerOnMachine0();
  const long rss_before = ResidentKiB();
  flooder_ = NewAgent();
  ASSERT_TRUE(flooder_->Write(Registration(options_, 0, 3000)));
  ASSERT_TRUE(gate_.HeldWithin(seconds(10)));
  flooder_->Flood(Heartbeat(), 100000);

  // The writes stop: the coordinator reads no more of the stream.
  uint64_t written = 0;
  const auto give_up = std::chrono::steady_clock::now() + seconds(20);
  do {
    written = flooder_->written();
    std::this_thread::sleep_for(milliseconds(500));
  } while (flooder_->written() != written &&
           std::chrono::steady_clock::now() < give_up);
  const EventQueueStats stats = core_->QueueStats();
  const long rss_after = ResidentKiB();
  std::printf(
      "held owner: %llu heartbeats written; queue high-water %zu "
      "events, %zu bytes; RSS %ld -> %ld KiB\n",
      static_cast<unsigned long long>(flooder_->written()),
      stats.high_water_events, stats.high_water_bytes, rss_before, rss_after);
  EXPECT_LT(flooder_->written(), 100000u) << "the flood was never held";
  EXPECT_EQ(flooder_->written(), written) << "the writes never stopped";
  EXPECT_LE(stats.stream_high_water_events, 64u);
  EXPECT_LE(stats.queued_events, 65u);  // the registration, being run
  EXPECT_EQ(stats.paused_streams, 1u);

  // Let go, the owner catches up and the stream is read again.
  gate_.Open();
  EXPECT_TRUE(flooder_->RepliedWithin(seconds(5)));
  const uint64_t resumed_at = flooder_->written();
  const auto resume_by = std::chrono::steady_clock::now() + seconds(10);
  while (flooder_->written() == resumed_at &&
         std::chrono::steady_clock::now() < resume_by) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_GT(flooder_->written(), resumed_at) << "the writes never resumed";
  EXPECT_LE(core_->QueueStats().stream_high_water_events, 64u);
}

// Two streams flood a slow owner (every registration, repeated or not,
// costs it 200 us): a third agent's heartbeat is acknowledged and a
// status query over gRPC answered within a few seconds.
TEST_F(AgentBackpressureTest, UnderAFloodAnotherAgentIsAckedAndStatusAnswered) {
  ASSERT_TRUE(server_);
  beating_ = NewAgent();
  ASSERT_TRUE(beating_->Write(Registration(options_, 2, 3000)));
  ASSERT_TRUE(beating_->RepliedWithin(seconds(10)));
  core_->OnRegistered([](int, AgentLink*) {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    while (std::chrono::steady_clock::now() < until) {
    }
  });
  flooder_ = NewAgent();
  flooder2_ = NewAgent();
  flooder_->Flood(Registration(options_, 0, 3000), 50000);
  flooder2_->Flood(Registration(options_, 1, 3000), 50000);
  std::this_thread::sleep_for(milliseconds(1000));

  auto stub = pb::Coordinator::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                          grpc::InsecureChannelCredentials()));
  auto status = std::async(std::launch::async, [&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(3));
    pb::JobStatus reply;
    return stub->GetJobStatus(&context, pb::JobStatusRequest(), &reply);
  });
  ASSERT_TRUE(beating_->Write(Heartbeat()));
  EXPECT_TRUE(beating_->AckedWithin(seconds(3)))
      << "a heartbeat waited behind the flood";
  EXPECT_TRUE(status.get().ok()) << "a status query waited behind the flood";

  const EventQueueStats stats = core_->QueueStats();
  std::printf(
      "slow owner: %llu + %llu registrations written; queue "
      "high-water %zu events, %zu bytes; %llu pauses\n",
      static_cast<unsigned long long>(flooder_->written()),
      static_cast<unsigned long long>(flooder2_->written()),
      stats.high_water_events, stats.high_water_bytes,
      static_cast<unsigned long long>(stats.pauses));
  EXPECT_LE(stats.stream_high_water_events, 64u);
  EXPECT_LE(stats.high_water_events, 2 * 64u + 4);
  EXPECT_GT(stats.pauses, 2u);
}

// The server shut down with streams paused and the owner held: once the
// owner is let go the paused streams end (they are read again, and the
// read fails), and so do the server and the coordinator.
TEST_F(AgentBackpressureTest, TheServerEndsWithStreamsPaused) {
  ASSERT_TRUE(server_);
  HoldTheOwnerOnMachine0();
  flooder_ = NewAgent();
  ASSERT_TRUE(flooder_->Write(Registration(options_, 0, 3000)));
  ASSERT_TRUE(gate_.HeldWithin(seconds(10)));
  flooder_->Flood(Heartbeat(), 100000);
  flooder2_ = NewAgent();
  flooder2_->Flood(Heartbeat(), 100000);
  const auto give_up = std::chrono::steady_clock::now() + seconds(10);
  while (core_->QueueStats().paused_streams < 2 &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(core_->QueueStats().paused_streams, 2u);

  auto ended = std::async(std::launch::async, [this] {
    server_->Shutdown(0);
    core_.reset();
  });
  std::this_thread::sleep_for(milliseconds(200));
  gate_.Open();
  if (ended.wait_for(seconds(20)) != std::future_status::ready) {
    // The future's destructor would wait for the hung shutdown until
    // ctest's timeout (120 s): end the test process now, failed.
    ADD_FAILURE() << "the server or the coordinator did not end with paused "
                     "streams";
    std::fflush(nullptr);
    std::_Exit(1);
  }
}

}  // namespace
}  // namespace trl

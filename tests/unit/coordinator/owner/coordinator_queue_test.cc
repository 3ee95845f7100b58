// The owner's queue of agents' messages is bounded (coordinator.h,
// EventQueueCaps): a stream that sends faster than the owner handles its
// messages is paused at its share and resumed once the owner caught up;
// other streams, queries and stop requests still get through; the owner
// itself never waits; a coordinator with paused streams still ends.
//
// The in-memory streams here play gRPC's part (grpc_service.cc): they
// post as fast as they can and read no more while paused. The owner is
// held up through the registration callback, which runs on it: once
// (a gate) or on every repeated registration (a slow owner).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/owner/coordinator.h"
#include "tests/lib/coordinator_harness.h"
#include "tests/lib/fake_agent_link.h"
#include "tests/lib/gate.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Posts `message` on `link` as a gRPC stream does: as fast as it can,
// reading no more while paused, until stopped. At most 50,000 messages
// (some 20 MB queued if nothing paused it).
class Flood {
 public:
  Flood(Coordinator* core, FakeAgentLink* link, pb::AgentMessage message)
      : thread_([this, core, link, message] {
          int pauses = 0;
          while (!stop_ && posted_ < 50000) {
            ++posted_;
            if (!core->OnMessage(link, message)) {
              ++pauses;
              link->ResumedWithin(pauses, stop_, seconds(60));
            }
          }
        }) {}
  ~Flood() { Stop(); }
  uint64_t Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return posted_;
  }
  uint64_t posted() const { return posted_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> posted_{0};
  std::thread thread_;
};

pb::AgentMessage Heartbeat() {
  pb::AgentMessage message;
  message.mutable_heartbeat();
  return message;
}

class CoordinatorQueueTest : public ::testing::Test {
 protected:
  CoordinatorQueueTest() : options_(TwoMachineCpuJob()) {
    options_.policy.tick_interval = milliseconds(50);
  }
  ~CoordinatorQueueTest() override {
    gate_.Open();  // whatever the test did, nothing stays held
    core_.reset();
  }
  void Start(EventQueueCaps caps) {
    core_ = std::make_unique<Coordinator>(
        options_,
        [](const std::string&) {
          return absl::StatusOr<RendezvousData>(RendezvousData{1234, ""});
        },
        [] { return std::chrono::steady_clock::now(); }, caps);
  }
  // Machine 0's registration on `link` holds the owner until the gate
  // opens; machine 1's passes.
  void HoldTheOwnerOnRegistration() {
    core_->OnRegistered([this](int machine_rank, AgentLink*) {
      if (machine_rank == 0) gate_.Hold();
    });
  }
  // Every registration (a stream may repeat its own) costs the owner
  // `cost`: a slow owner.
  void SlowOwner(std::chrono::microseconds cost) {
    core_->OnRegistered([cost](int, AgentLink*) {
      const auto until = std::chrono::steady_clock::now() + cost;
      while (std::chrono::steady_clock::now() < until) {
      }
    });
  }

  CoordinatorOptions options_;
  Gate gate_;
  FakeAgentLink a_, b_, flooder_, flooder2_;  // outlive core_
  std::unique_ptr<Coordinator> core_;
};

TEST_F(CoordinatorQueueTest, AFloodingStreamIsPausedAtItsShareOfTheQueue) {
  EventQueueCaps caps;
  caps.stream_events = 8;
  Start(caps);
  HoldTheOwnerOnRegistration();
  core_->OnMessage(&a_, Registration(options_, 0, 3000));
  ASSERT_TRUE(gate_.HeldWithin(seconds(5)));

  // The owner is held: a stream sending as fast as it can is paused by
  // its 8th message, and stays paused.
  Flood flood(core_.get(), &flooder_, Heartbeat());
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(flood.posted(), 8u);
  EventQueueStats stats = core_->QueueStats();
  EXPECT_EQ(stats.queued_events, 9u);  // and a_'s registration
  EXPECT_EQ(stats.stream_high_water_events, 8u);
  EXPECT_EQ(stats.paused_streams, 1u);
  EXPECT_EQ(stats.pauses, 1u);
  // Another stream still has its own share.
  EXPECT_TRUE(core_->OnMessage(&b_, Registration(options_, 1, 3000)));

  // Once the owner handled them, the stream reads again (and is paused
  // again at its share: the owner is fast now, the flood goes on).
  gate_.Open();
  EXPECT_TRUE(flooder_.ResumedWithin(1, std::atomic<bool>(false), seconds(5)));
  const auto give_up = std::chrono::steady_clock::now() + seconds(10);
  while (flood.posted() <= 8 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  const uint64_t posted = flood.Stop();
  EXPECT_GT(posted, 8u);
  stats = core_->QueueStats();
  EXPECT_LE(stats.stream_high_water_events, 8u);
  EXPECT_LE(stats.high_water_events, 10u);
}

// Large messages: the share is bytes too (1 MiB by default; 4 KiB here).
TEST_F(CoordinatorQueueTest, AStreamIsPausedAtItsShareOfBytes) {
  EventQueueCaps caps;
  caps.stream_bytes = 4096;
  Start(caps);
  HoldTheOwnerOnRegistration();
  core_->OnMessage(&a_, Registration(options_, 0, 3000));
  ASSERT_TRUE(gate_.HeldWithin(seconds(5)));
  pb::AgentMessage large;
  large.mutable_command_check()->set_problem(std::string(1500, 'x'));
  EXPECT_TRUE(core_->OnMessage(&flooder_, large));
  EXPECT_TRUE(core_->OnMessage(&flooder_, large));
  EXPECT_FALSE(core_->OnMessage(&flooder_, large));  // over 4096 bytes
  EXPECT_GE(core_->QueueStats().high_water_bytes, 3 * 1500u);
  gate_.Open();
  EXPECT_TRUE(flooder_.ResumedWithin(1, std::atomic<bool>(false), seconds(5)));
}

// A slow owner (every message costs it 200 us) and two streams flooding
// it for a second: the queue never holds more than their shares, and a
// third agent's heartbeat is acknowledged, a status query answered, soon.
TEST_F(CoordinatorQueueTest, UnderAFloodTheQueueStaysBoundedAndOthersAnswered) {
  EventQueueCaps caps;
  caps.stream_events = 64;
  options_.config.num_machines = 4;  // 0 and 1 flood, 2 beats, 3 never
  options_.config.num_processes = 4;
  Start(caps);
  core_->OnMessage(&a_, Registration(options_, 2, 3000));
  SlowOwner(std::chrono::microseconds(200));
  Flood flood(core_.get(), &flooder_, Registration(options_, 0, 3000));
  Flood flood2(core_.get(), &flooder2_, Registration(options_, 1, 3000));
  std::this_thread::sleep_for(milliseconds(500));

  auto status =
      std::async(std::launch::async, [this] { return core_->Status(); });
  core_->OnMessage(&a_, Heartbeat());
  EXPECT_EQ(status.wait_for(seconds(3)), std::future_status::ready)
      << "a status query waited behind the flood";
  EXPECT_TRUE(a_.AckedWithin(seconds(3)))
      << "a heartbeat waited behind the flood";
  std::this_thread::sleep_for(milliseconds(500));
  const uint64_t posted = flood.Stop() + flood2.Stop();

  const EventQueueStats stats = core_->QueueStats();
  std::printf(
      "flood: %llu messages posted; queue high-water %zu events, "
      "%zu bytes; %llu pauses\n",
      static_cast<unsigned long long>(posted), stats.high_water_events,
      stats.high_water_bytes, static_cast<unsigned long long>(stats.pauses));
  EXPECT_LE(stats.stream_high_water_events, 64u);
  EXPECT_LE(stats.high_water_events, 2 * 64u + 3);
  EXPECT_GT(stats.pauses, 2u);  // the owner did fall behind
  EXPECT_EQ(status.get().state(), "waiting_for_agents");
}

// The total: 3 streams of up to 100 each, but 10 in all. A stream paused
// for the total resumes once the total is down to half.
TEST_F(CoordinatorQueueTest, TheTotalCapPausesEveryStreamThatPostsOverIt) {
  EventQueueCaps caps;
  caps.stream_events = 100;
  caps.total_events = 10;
  Start(caps);
  HoldTheOwnerOnRegistration();
  core_->OnMessage(&a_, Registration(options_, 0, 3000));
  ASSERT_TRUE(gate_.HeldWithin(seconds(5)));
  int accepted = 0;
  for (int i = 0; i < 8; ++i) accepted += core_->OnMessage(&b_, Heartbeat());
  EXPECT_EQ(accepted, 8);  // 9 queued with a_'s registration
  EXPECT_FALSE(core_->OnMessage(&flooder_, Heartbeat()));   // the 10th
  EXPECT_FALSE(core_->OnMessage(&flooder2_, Heartbeat()));  // over: paused
  EXPECT_EQ(core_->QueueStats().paused_streams, 2u);
  // Control events and queries are not counted, and not refused.
  core_->RequestStop("the test stops it", 3);
  auto status =
      std::async(std::launch::async, [this] { return core_->Status(); });

  gate_.Open();
  const std::atomic<bool> never(false);
  EXPECT_TRUE(flooder_.ResumedWithin(1, never, seconds(5)));
  EXPECT_TRUE(flooder2_.ResumedWithin(1, never, seconds(5)));
  EXPECT_EQ(b_.resumes(), 0);  // never paused
  EXPECT_EQ(status.wait_for(seconds(5)), std::future_status::ready);
  EXPECT_EQ(core_->QueueStats().paused_streams, 0u);
  EXPECT_EQ(core_->QueueStats().queued_events, 0u);
}

// Messages posted by the owner itself (code an event runs) are never
// refused: the owner would wait for itself.
TEST_F(CoordinatorQueueTest, TheOwnerIsNeverPaused) {
  EventQueueCaps caps;
  caps.stream_events = 2;
  caps.total_events = 2;
  Start(caps);
  std::atomic<int> refused{0};
  core_->OnRegistered([this, &refused](int, AgentLink*) {
    for (int i = 0; i < 10; ++i) {
      if (!core_->OnMessage(&b_, Heartbeat())) ++refused;
    }
  });
  core_->OnMessage(&a_, Registration(options_, 0, 3000));
  auto status =
      std::async(std::launch::async, [this] { return core_->Status(); });
  ASSERT_EQ(status.wait_for(seconds(5)), std::future_status::ready);
  core_->Status();  // queued after what the owner posted
  EXPECT_EQ(refused, 0);
  EXPECT_EQ(core_->QueueStats().queued_events, 0u);
  core_->OnRegistered(nullptr);
}

// A coordinator destroyed with streams paused, one of them ending, while
// the owner is held: it ends once the owner is let go, having handled
// what they queued and resumed each once (a gRPC stream can then end),
// the one that ended before its end was handled.
TEST_F(CoordinatorQueueTest, ACoordinatorWithPausedStreamsEnds) {
  EventQueueCaps caps;
  caps.stream_events = 4;
  Start(caps);
  HoldTheOwnerOnRegistration();
  core_->OnMessage(&a_, Registration(options_, 0, 3000));
  ASSERT_TRUE(gate_.HeldWithin(seconds(5)));
  for (FakeAgentLink* link : {&flooder_, &flooder2_}) {
    int accepted = 0;
    while (accepted < 100 && core_->OnMessage(link, Heartbeat())) ++accepted;
    EXPECT_EQ(accepted, 3);
  }
  EXPECT_EQ(core_->QueueStats().paused_streams, 2u);

  Coordinator* const core = core_.get();
  const size_t queued = core->QueueStats().queued_all;
  auto ended =
      std::async(std::launch::async, [&] { core->OnDisconnected(&flooder2_); });
  const auto give_up = std::chrono::steady_clock::now() + seconds(5);
  while (core->QueueStats().queued_all == queued &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_GT(core->QueueStats().queued_all, queued);  // the end is queued
  auto destroyed = std::async(std::launch::async, [this] { core_.reset(); });
  std::this_thread::sleep_for(milliseconds(100));
  gate_.Open();
  ASSERT_EQ(ended.wait_for(seconds(10)), std::future_status::ready);
  ASSERT_EQ(destroyed.wait_for(seconds(20)), std::future_status::ready)
      << "the coordinator did not end with paused streams";
  EXPECT_EQ(flooder_.resumes(), 1);
  EXPECT_EQ(flooder2_.resumes(), 1);
}

// Heartbeat datagrams (the UDP thread's batches) go ahead of agents'
// queued messages: at 16,384 agents a batch waited behind thousands of
// stream messages, the socket's buffer filled, acks were dropped and the
// agents fell back to heartbeats on their streams, which queued more.
// Here the owner is held on the first of 200 messages it has already
// taken from the queue: a batch posted then runs before the second.
TEST_F(CoordinatorQueueTest, HeartbeatDatagramsGoAheadOfQueuedMessages) {
  EventQueueCaps caps;
  caps.stream_events = 1000;
  // Machine 2 never registers: the job never starts, so nothing but this
  // test's messages is queued (no generation's slow work coming back).
  options_.config.num_machines = 3;
  options_.config.num_processes = 3;
  Start(caps);
  // Shared with the owner's callback, which may outlive this test's body
  // (an ASSERT returns while registrations are still queued).
  struct Seen {
    Gate first_of_batch;
    std::atomic<int> handled{0};
    std::atomic<long> queued_at_second{-1};
  };
  auto seen = std::make_shared<Seen>();
  struct OpenAtEnd {
    Gate* gate;
    ~OpenAtEnd() { gate->Open(); }
  } open_at_end{&seen->first_of_batch};
  Coordinator* const core = core_.get();
  core_->OnRegistered([this, seen, core](int machine_rank, AgentLink*) {
    if (machine_rank == 0) {
      gate_.Hold();
      return;
    }
    const int handled = ++seen->handled;
    if (handled == 1) seen->first_of_batch.Hold();
    // On the owner: what is still queued, the datagrams' lane included.
    if (handled == 2) {
      seen->queued_at_second = static_cast<long>(core->QueueStats().queued_all);
    }
  });
  core_->OnMessage(&a_, Registration(options_, 0, 3000));
  ASSERT_TRUE(gate_.HeldWithin(seconds(5)));
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(core_->OnMessage(&b_, Registration(options_, 1, 3000)));
  }
  // The owner takes all 200 at once and is held on the first.
  gate_.Open();
  ASSERT_TRUE(seen->first_of_batch.HeldWithin(seconds(5)));
  EXPECT_EQ(core_->QueueStats().queued_all, 0u);
  auto answered = std::async(std::launch::async, [this] {
    const std::string not_a_heartbeat = "x";
    core_->OnHeartbeatDatagrams({not_a_heartbeat});
  });
  const auto give_up = std::chrono::steady_clock::now() + seconds(10);
  while (core_->QueueStats().queued_all == 0 &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_EQ(core_->QueueStats().queued_all, 1u);  // the datagrams' batch
  seen->first_of_batch.Open();
  ASSERT_EQ(answered.wait_for(seconds(10)), std::future_status::ready);
  // The batch is answered once it ran, which may be before the owner
  // reaches the second message: what it saw there is read after all 200.
  while (seen->handled < 200 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(seen->handled, 200);  // and nothing queued was lost
  EXPECT_EQ(seen->queued_at_second, 0)
      << "the datagrams waited behind the messages the owner had taken";
  core_->OnRegistered(nullptr);
}

}  // namespace
}  // namespace trl

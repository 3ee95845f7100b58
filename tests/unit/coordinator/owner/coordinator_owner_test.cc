// The coordinator's owner thread (coordinator.h) with its real threads and
// an in-memory agent stream: the slow work of a generation's start (here a
// rendezvous that blocks until the test lets it go, as the NCCL id helper
// may for 10 s) never holds up what the owner does meanwhile: a status
// query is answered and a heartbeat acknowledged while it blocks. A
// generation prepared for a job that changed meanwhile (a machine left) is
// not started; the next one is prepared anew (the core alone, below).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/owner/coordinator.h"
#include "tests/lib/coordinator_harness.h"
#include "tests/lib/fake_agent_link.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;
using std::chrono::milliseconds;
using std::chrono::seconds;

// A rendezvous that blocks until released, and counts its calls.
class BlockingRendezvous {
 public:
  RendezvousSource Source() {
    return [this](const std::string&) -> absl::StatusOr<RendezvousData> {
      std::unique_lock<std::mutex> lock(mutex_);
      ++calls_;
      changed_.notify_all();
      changed_.wait_for(lock, seconds(20), [this] { return released_; });
      return RendezvousData{1234, ""};
    };
  }
  bool CalledWithin(int calls, milliseconds wait) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, wait, [&] { return calls_ >= calls; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int calls_ = 0;
  bool released_ = false;
};

pb::AgentMessage Heartbeat() {
  pb::AgentMessage message;
  message.mutable_heartbeat();
  return message;
}

class CoordinatorOwnerTest : public ::testing::Test {
 protected:
  CoordinatorOwnerTest() : options_(TwoMachineCpuJob()) {
    options_.policy.tick_interval = milliseconds(50);
    core_ = std::make_unique<Coordinator>(options_, rendezvous_.Source(), [] {
      return std::chrono::steady_clock::now();
    });
  }
  ~CoordinatorOwnerTest() override {
    rendezvous_.Release();  // whatever the test did, nothing stays blocked
    core_.reset();
  }
  void Register(FakeAgentLink* link, int machine_rank) {
    core_->OnMessage(link, Registration(options_, machine_rank, 3000));
  }

  CoordinatorOptions options_;
  BlockingRendezvous rendezvous_;
  std::unique_ptr<Coordinator> core_;
};

TEST_F(CoordinatorOwnerTest, ASlowRendezvousHoldsUpNeitherStatusNorHeartbeats) {
  FakeAgentLink a, b;
  Register(&a, 0);
  Register(&b, 1);
  ASSERT_TRUE(rendezvous_.CalledWithin(1, milliseconds(5000)));

  // The rendezvous blocks: the owner goes on answering.
  auto status =
      std::async(std::launch::async, [this] { return core_->Status(); });
  ASSERT_EQ(status.wait_for(milliseconds(2000)), std::future_status::ready)
      << "a status query waited for the rendezvous";
  EXPECT_EQ(status.get().state(), "waiting_for_agents");
  core_->OnMessage(&a, Heartbeat());
  EXPECT_TRUE(a.AckedWithin(milliseconds(2000)))
      << "a heartbeat waited for the rendezvous";
  EXPECT_TRUE(a.AssignmentsWithin(milliseconds(0)).empty());

  rendezvous_.Release();
  for (FakeAgentLink* link : {&a, &b}) {
    const auto assignments = link->AssignmentsWithin(milliseconds(5000));
    ASSERT_EQ(assignments.size(), 1u);
    EXPECT_EQ(assignments[0].generation(), 0);
    EXPECT_EQ(assignments[0].job_environment().at("MASTER_PORT"), "1234");
  }
  EXPECT_EQ(rendezvous_.calls(), 1);
  EXPECT_EQ(core_->Status().state(), "running");
}

// The owner times its ticks on the injected clock, as the core times its
// deadlines: a test moves a fake clock and the owner ticks, with no real
// second passing. Machine 0 beats every second of the fake clock, machine 1
// is silent: it is lost once its 3 s are up (ticks a second apart, so the
// owner's stall excuse never applies). With ticks on the real clock, the
// first tick came only at machine 1's deadline, 3 s after the last one: a
// stall, which excused 2 s of its silence, and nothing was lost by 4 s.
TEST(CoordinatorFakeClockTest, ATestMovesTheClockAndTheOwnerTicks) {
  CoordinatorOptions options = TwoMachineCpuJob();
  options.policy.tick_interval = seconds(1);
  options.policy.agent_heartbeat_timeout = seconds(3);
  std::atomic<int64_t> now_ms{1000000};
  Coordinator coordinator(
      options,
      [](const std::string&) {
        return absl::StatusOr<RendezvousData>(RendezvousData{1234, ""});
      },
      [&now_ms] { return TimePoint{} + milliseconds(now_ms.load()); },
      EventQueueCaps(), [] { return int64_t{1767225600000}; });
  FakeAgentLink a, b;
  coordinator.OnMessage(&a, Registration(options, 0, 3000));
  coordinator.OnMessage(&b, Registration(options, 1, 3000));
  ASSERT_EQ(a.AssignmentsWithin(milliseconds(5000)).size(), 1u);
  ASSERT_EQ(b.AssignmentsWithin(milliseconds(5000)).size(), 1u);

  for (int second = 1; second <= 4; ++second) {
    now_ms += 1000;
    coordinator.OnMessage(&a, Heartbeat());
    coordinator.Nudge();  // returns once the owner has ticked
  }
  EXPECT_TRUE(a.StoppedWithin(milliseconds(2000)))
      << "machine 1, silent for 4 s of the coordinator's clock, was not lost";
  // The events carry the injected wall clock.
  const pb::JobEvents events = coordinator.Events();
  ASSERT_GT(events.events_size(), 0);
  EXPECT_EQ(events.events(0).unix_ms(), 1767225600000);
}

// The core alone, with slow work that runs only when the test says: a
// generation prepared for a job that changed meanwhile (machine 1 left
// and came back on a new stream) is dropped and prepared anew.
TEST(CoordinatorCoreOffloadTest,
     AGenerationPreparedForAJobThatChangedDoesNotStart) {
  const CoordinatorOptions options = TwoMachineCpuJob();
  TimePoint now = TimePoint{} + seconds(1000);
  int rendezvous_calls = 0;
  CoordinatorCore core(
      options,
      [&](const std::string&) -> absl::StatusOr<RendezvousData> {
        ++rendezvous_calls;
        return RendezvousData{1234, ""};
      },
      [&] { return now; });
  std::vector<std::pair<std::function<void()>, std::function<void()>>> held;
  core.SetOffload([&](std::function<void()> work, std::function<void()> done) {
    held.emplace_back(std::move(work), std::move(done));
  });
  FakeAgentLink a, b, b_again;
  core.OnMessage(&a, Registration(options, 0, 3000));
  core.OnMessage(&b, Registration(options, 1, 3000));
  ASSERT_EQ(held.size(), 1u);
  EXPECT_TRUE(core.WorkOutstanding());
  core.Tick();  // still ready: no second preparation meanwhile
  ASSERT_EQ(held.size(), 1u);

  core.OnDisconnected(&b);
  held[0].first();
  held[0].second();
  EXPECT_FALSE(core.WorkOutstanding());
  EXPECT_TRUE(a.AssignmentsWithin(milliseconds(0)).empty());
  EXPECT_EQ(core.Status().state(), "waiting_for_agents");

  core.OnMessage(&b_again, Registration(options, 1, 3000));
  ASSERT_EQ(held.size(), 2u);
  held[1].first();
  held[1].second();
  EXPECT_EQ(rendezvous_calls, 2);
  for (FakeAgentLink* link : {&a, &b_again}) {
    const auto assignments = link->AssignmentsWithin(milliseconds(0));
    ASSERT_EQ(assignments.size(), 1u);
    EXPECT_EQ(assignments[0].generation(), 0);
  }
  EXPECT_TRUE(b.AssignmentsWithin(milliseconds(0)).empty());
  EXPECT_EQ(core.Status().state(), "running");
}

// Code an event runs on the owner may ask the coordinator again (the log
// relay, a defence counter): it is answered there and then, instead of
// waiting for the owner, which is itself.
TEST_F(CoordinatorOwnerTest, AQueryFromTheOwnerItselfIsAnsweredAtOnce) {
  core_->ReportDefences([this] {
    Coordinator::DefenceCounts counts;
    counts.refused_calls = core_->AgentPeers().size() + 7;
    return counts;
  });
  auto status =
      std::async(std::launch::async, [this] { return core_->Status(); });
  ASSERT_EQ(status.wait_for(milliseconds(5000)), std::future_status::ready)
      << "the owner waited for itself";
  EXPECT_EQ(status.get().refused_calls(), 7u);
}

TEST_F(CoordinatorOwnerTest, QueriesAfterTheJobEndedStillAnswer) {
  core_->RequestStop("the test stops it", 3);
  const auto outcome =
      core_->WaitForOutcome(std::chrono::steady_clock::now() + seconds(5));
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->exit_code, 3);
  EXPECT_EQ(core_->Status().state(), "stopped");
  EXPECT_TRUE(core_->WaitForFarewells(std::chrono::steady_clock::now()));
}

// The owner and the slow-work thread carry names (`top -H`, `perf`), so
// an operator can tell the owner's load from gRPC's.
TEST_F(CoordinatorOwnerTest, TheOwnerAndTheSlowWorkThreadsAreNamed) {
  core_->Status();  // the owner has run
  // The slow-work thread names itself when it starts, which nothing here
  // waits for: look again until both names are there (or 10 s passed).
  std::multiset<std::string> names;
  const auto give_up = std::chrono::steady_clock::now() + seconds(10);
  do {
    names.clear();
    for (const auto& task :
         std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      std::getline(comm, name);
      names.insert(name);
    }
    if (names.count("trl-owner") && names.count("trl-slow-work")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (std::chrono::steady_clock::now() < give_up);
  EXPECT_EQ(names.count("trl-owner"), 1u);
  EXPECT_EQ(names.count("trl-slow-work"), 1u);
}

}  // namespace
}  // namespace trl

// What a coordinator keeps in its state file, and what a restarted one does
// with it: a generation that cannot be kept does not start; the restart
// budget, the rest of a backoff and the failure history outlive the
// process. Real files, a Coordinator on a fake clock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "coordinator/owner/core.h"
#include "coordinator/record/state_file.h"
#include "tests/lib/coordinator_harness.h"
#include "tests/lib/fake_agent_link.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;
using std::chrono::milliseconds;
using std::chrono::seconds;

class JobPersistenceTest : public ::testing::Test {
 protected:
  JobPersistenceTest() : options_(TwoMachineCpuJob()) {
    dir_ = ::testing::TempDir() + "/trl-persist-" + std::to_string(getpid()) +
           "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    options_.state_file = dir_ + "/job.state";
    options_.identity = "identity";
    options_.policy.restart.max_restarts = 2;
    options_.policy.restart.initial_backoff = seconds(10);
    options_.policy.restart.max_backoff = seconds(30);
  }
  ~JobPersistenceTest() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<CoordinatorCore> NewCoordinator() {
    return CoordinatorOnClock(options_, [this] { return now_; });
  }
  void RegisterBoth(CoordinatorCore& core) {
    core.OnMessage(&links_[0], Registration(options_, 0, 3000));
    core.OnMessage(&links_[1], Registration(options_, 1, 3000));
  }
  static pb::AgentMessage Exited(int64_t generation, int exit_code,
                                 int signal = 0) {
    pb::AgentMessage message;
    auto* exited = message.mutable_worker_exited();
    exited->set_generation(generation);
    exited->set_local_rank(0);
    exited->set_exit_code(exit_code);
    exited->set_signal(signal);
    return message;
  }
  // Machine 1's worker of `generation` fails; machine 0's ends on the stop.
  void FailGeneration(CoordinatorCore& core, int64_t generation) {
    core.OnMessage(&links_[1], Exited(generation, 3));
    core.OnMessage(&links_[0], Exited(generation, 0, 15));
  }

  CoordinatorOptions options_;
  std::string dir_;
  TimePoint now_ = TimePoint() + seconds(1000);
  FakeAgentLink links_[2];
};

TEST_F(JobPersistenceTest, AGenerationThatCannotBeKeptDoesNotStart) {
  // A regular file where the state file's directory should be: every write
  // fails, as on a full disk.
  std::ofstream(dir_ + "/file") << "x";
  options_.state_file = dir_ + "/file/job.state";
  auto core = NewCoordinator();
  RegisterBoth(*core);
  EXPECT_TRUE(links_[0].generations().empty());
  EXPECT_TRUE(links_[1].generations().empty());
  const auto outcome = core->outcome();
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->exit_code, 1);
  EXPECT_NE(outcome->summary.find("generation 0 does not start"),
            std::string::npos)
      << outcome->summary;
  EXPECT_NE(outcome->summary.find(options_.state_file), std::string::npos)
      << outcome->summary;
}

TEST_F(JobPersistenceTest, TheStateIsKeptBeforeTheGenerationIsAssigned) {
  auto core = NewCoordinator();
  RegisterBoth(*core);
  ASSERT_EQ(links_[0].generations(), std::vector<int64_t>{0});
  auto record = LoadJobRecord(options_.state_file);
  ASSERT_TRUE(record.ok() && record->has_value()) << record.status();
  EXPECT_EQ((*record)->generation, 0);
  EXPECT_EQ((*record)->restarts_used, 0);
}

TEST_F(JobPersistenceTest, BudgetBackoffAndHistoryOutliveACoordinator) {
  {
    auto first = NewCoordinator();
    RegisterBoth(*first);
    ASSERT_EQ(links_[0].generations(), std::vector<int64_t>{0});
    FailGeneration(*first, 0);  // the first restart: at once
    ASSERT_EQ(links_[0].generations(), (std::vector<int64_t>{0, 1}));
    FailGeneration(*first, 1);  // the second: after 10 s of backoff
    EXPECT_EQ(first->Status().restarts_used(), 2);
  }  // killed during the backoff
  auto record = LoadJobRecord(options_.state_file);
  ASSERT_TRUE(record.ok() && record->has_value()) << record.status();
  EXPECT_EQ((*record)->restarts_used, 2);
  ASSERT_EQ((*record)->failures.size(), 2u);
  EXPECT_NE((*record)->failures[0].reason.find("exited with code 3"),
            std::string::npos)
      << (*record)->failures[0].reason;
  EXPECT_GT((*record)->not_before_unix_ms, 0);

  options_.resume = *record;
  auto second = NewCoordinator();
  RegisterBoth(*second);
  EXPECT_EQ(links_[0].generations(), (std::vector<int64_t>{0, 1}))
      << "the rest of the backoff was not kept";
  EXPECT_EQ(second->Status().failures_size(), 2);
  now_ += seconds(11);
  second->Tick();
  ASSERT_EQ(links_[0].generations(), (std::vector<int64_t>{0, 1, 2}));
  // The budget (2) is spent: this failure ends the job.
  FailGeneration(*second, 2);
  const auto outcome = second->outcome();
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->exit_code, 3);
  EXPECT_NE(outcome->summary.find("all 2 restarts used"), std::string::npos)
      << outcome->summary;
}

TEST(JobStateFileFormatTest, FailuresAndBackoffRoundTrip) {
  const std::string path = ::testing::TempDir() + "/trl-format-" +
                           std::to_string(getpid()) + ".state";
  JobRecord record;
  record.job_id = "job-1";
  record.generation = 7;
  record.restarts_used = 3;
  record.identity = "abc";
  record.not_before_unix_ms = 1234567890123;
  FailureRecord failure;
  failure.generation = 6;
  failure.rank = 5;
  failure.machine_rank = 2;
  failure.hostname = "node02";
  failure.exit.exit_code = 9;
  failure.reason = "rank 5 exited\twith code 9\nsecond line";
  record.failures = {failure, FailureRecord{}};
  ASSERT_TRUE(SaveJobRecord(path, record).ok());
  auto loaded = LoadJobRecord(path);
  ASSERT_TRUE(loaded.ok() && loaded->has_value()) << loaded.status();
  EXPECT_EQ((*loaded)->not_before_unix_ms, 1234567890123);
  ASSERT_EQ((*loaded)->failures.size(), 2u);
  const FailureRecord& back = (*loaded)->failures[0];
  EXPECT_EQ(back.generation, 6);
  EXPECT_EQ(back.rank, 5);
  EXPECT_EQ(back.machine_rank, 2);
  EXPECT_EQ(back.hostname, "node02");
  EXPECT_EQ(back.exit.exit_code, 9);
  EXPECT_EQ(back.reason, "rank 5 exited with code 9 second line");
  EXPECT_EQ((*loaded)->failures[1].rank, -1);
  RemoveJobRecord(path);
}

}  // namespace
}  // namespace trl

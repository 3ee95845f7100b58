// JobRecordKeeper on its own: a resumed job's record reads back as it was
// kept (its backoff capped), the file is written only when the restarts or
// failures change or the last write failed, a generation's start counts as
// kept, and the file goes at the end. Real files; an offload that runs in
// line and counts.
#include "coordinator/owner/job_record_keeper.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/lib/coordinator_harness.h"

namespace trl {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int64_t kWallMs = 1'700'000'000'000;
const TimePoint kNow = TimePoint{} + seconds(1000);

class JobRecordKeeperTest : public ::testing::Test {
 protected:
  JobRecordKeeperTest() : machine_(JobSettingsOf(TwoMachineCpuJob()), kNow) {
    dir_ = ::testing::TempDir() + "/trl-keeper-" + std::to_string(getpid()) +
           "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/job.state";
  }
  ~JobRecordKeeperTest() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<JobRecordKeeper> Keeper(const std::string& path) {
    return std::make_unique<JobRecordKeeper>(
        path, "job", "identity", [] { return kNow; }, [] { return kWallMs; },
        [this](std::function<void()> work, std::function<void()> done) {
          ++writes_;
          work();
          done();
        });
  }
  // What an earlier coordinator kept: generation 3, 2 restarts, one
  // failure (with its last lines), a cordoned host, 5 s of backoff left.
  static JobRecord Earlier() {
    JobRecord record;
    record.job_id = "job";
    record.identity = "identity";
    record.generation = 3;
    record.restarts_used = 2;
    record.not_before_unix_ms = kWallMs + 5000;
    FailureRecord failure;
    failure.generation = 3;
    failure.rank = 1;
    failure.machine_rank = 1;
    failure.hostname = "node02";
    failure.exit.exit_code = 3;
    failure.exit.last_lines = {"Traceback"};
    record.failures = {failure};
    record.cordoned["node03"] = Cordon{3, "failed 3 times"};
    return record;
  }

  JobStateMachine machine_;
  std::string dir_, path_;
  int writes_ = 0;
};

TEST_F(JobRecordKeeperTest, AResumedJobIsRecordedAsItWasKept) {
  Keeper(path_)->Resume(Earlier(), seconds(30), machine_);
  const JobRecord record = Keeper(path_)->RecordOf(machine_, 4);
  EXPECT_EQ(record.job_id, "job");
  EXPECT_EQ(record.identity, "identity");
  EXPECT_EQ(record.generation, 4);
  EXPECT_EQ(record.restarts_used, 2);
  EXPECT_EQ(record.not_before_unix_ms, kWallMs + 5000);
  ASSERT_EQ(record.failures.size(), 1u);
  EXPECT_EQ(record.failures[0].hostname, "node02");
  EXPECT_TRUE(record.failures[0].exit.last_lines.empty());
  ASSERT_EQ(record.cordoned.count("node03"), 1u);
  EXPECT_EQ(record.cordoned.at("node03").reason, "failed 3 times");
}

TEST_F(JobRecordKeeperTest, AResumedBackoffIsNeverLongerThanItsCap) {
  JobRecord earlier = Earlier();
  earlier.not_before_unix_ms = kWallMs + 3'600'000;  // the clock jumped back
  Keeper(path_)->Resume(earlier, seconds(30), machine_);
  EXPECT_EQ(machine_.next_start_not_before(), kNow + seconds(30));
  EXPECT_EQ(Keeper(path_)->RecordOf(machine_, 4).not_before_unix_ms,
            kWallMs + 30'000);
}

TEST_F(JobRecordKeeperTest, TheFileIsWrittenOnlyWhenRestartsOrFailuresChange) {
  auto resumed = Keeper(path_);
  resumed->Resume(Earlier(), seconds(30), machine_);
  resumed->KeepIfChanged(machine_);  // what it resumed from is kept
  EXPECT_EQ(writes_, 0);
  // One that kept nothing yet sees 2 restarts and a failure.
  auto fresh = Keeper(path_);
  fresh->KeepIfChanged(machine_);
  EXPECT_EQ(writes_, 1);
  auto kept = LoadJobRecord(path_);
  ASSERT_TRUE(kept.ok() && kept->has_value());
  EXPECT_EQ((*kept)->generation, 3);
  EXPECT_EQ((*kept)->restarts_used, 2);
  fresh->KeepIfChanged(machine_);
  EXPECT_EQ(writes_, 1);
  fresh->Keep(machine_);  // whatever changed
  EXPECT_EQ(writes_, 2);
}

TEST_F(JobRecordKeeperTest, AGenerationsStartCountsAsKept) {
  Keeper(path_)->Resume(Earlier(), seconds(30), machine_);
  auto keeper = Keeper(path_);
  keeper->Kept(machine_);
  keeper->KeepIfChanged(machine_);
  EXPECT_EQ(writes_, 0);
}

TEST_F(JobRecordKeeperTest, AFailedWriteIsTriedAgainWithTheNextCheck) {
  Keeper(path_)->Resume(Earlier(), seconds(30), machine_);
  // A directory where the file should be: the write fails.
  std::filesystem::create_directories(path_);
  auto keeper = Keeper(path_);
  keeper->KeepIfChanged(machine_);
  EXPECT_EQ(writes_, 1);
  EXPECT_FALSE(std::filesystem::is_regular_file(path_));
  std::filesystem::remove(path_);
  keeper->KeepIfChanged(machine_);
  EXPECT_EQ(writes_, 2);
  EXPECT_TRUE(std::filesystem::is_regular_file(path_));
}

TEST_F(JobRecordKeeperTest, TheFileGoesAtTheEnd) {
  auto keeper = Keeper(path_);
  keeper->Keep(machine_);
  ASSERT_TRUE(std::filesystem::exists(path_));
  keeper->Remove();
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(JobRecordKeeperTest, WithoutAStateFileNothingIsWritten) {
  Keeper(path_)->Resume(Earlier(), seconds(30), machine_);
  auto keeper = Keeper("");
  EXPECT_FALSE(keeper->keeps());
  keeper->KeepIfChanged(machine_);
  keeper->Keep(machine_);
  keeper->Remove();
  EXPECT_EQ(writes_, 0);
}

}  // namespace
}  // namespace trl

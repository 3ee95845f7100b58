// DecisionJournal on its own: an event carries the generation and the
// wall clock; registrations reach the file only with the next flush; a
// stall and a cordon are told once (a cordon again once uncordoned); what
// a stop, the end and a generation's start say. A real state machine it
// only reads; a real events file.
#include "coordinator/owner/decision_journal.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/lib/coordinator_harness.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;
using std::chrono::seconds;

constexpr int64_t kWallMs = 1'700'000'000'000;
const TimePoint kStart = TimePoint{} + seconds(1000);

JobSettings TickedEverySecond() {
  CoordinatorOptions options = TwoMachineCpuJob();
  options.policy.tick_interval = seconds(1);
  return JobSettingsOf(options);
}

class DecisionJournalTest : public ::testing::Test {
 protected:
  DecisionJournalTest() : machine_(TickedEverySecond(), kStart) {
    dir_ = ::testing::TempDir() + "/trl-journal-" + std::to_string(getpid()) +
           "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    state_file_ = dir_ + "/job.state";
    machine_.ResumeAfter(3, 1);
    journal_ = std::make_unique<DecisionJournal>(
        machine_, state_file_, /*resume=*/false, [] { return kWallMs; });
  }
  ~DecisionJournalTest() override { std::filesystem::remove_all(dir_); }

  // The events of `kind`, in order.
  std::vector<pb::JobEvent> OfKind(const std::string& kind) const {
    std::vector<pb::JobEvent> found;
    const pb::JobEvents all = journal_->Events();
    for (const auto& event : all.events()) {
      if (event.kind() == kind) found.push_back(event);
    }
    return found;
  }
  size_t InFile() const {
    auto read = ReadJobEvents(JobEventLog::PathFor(state_file_));
    return read.ok() ? read->events_size() : 0;
  }

  JobStateMachine machine_;
  std::string dir_, state_file_;
  std::unique_ptr<DecisionJournal> journal_;
};

TEST_F(DecisionJournalTest, AnEventCarriesTheGenerationAndTheWallClock) {
  journal_->Note("spare", -1, "a spare registered");
  ASSERT_EQ(OfKind("spare").size(), 1u);
  const pb::JobEvent event = OfKind("spare")[0];
  EXPECT_EQ(event.generation(), 3);
  EXPECT_EQ(event.unix_ms(), kWallMs);
  EXPECT_EQ(event.machine_rank(), -1);
  EXPECT_EQ(event.text(), "a spare registered");
  EXPECT_EQ(InFile(), 1u);
}

TEST_F(DecisionJournalTest, RegistrationsReachTheFileWithTheNextFlush) {
  journal_->Note("registered", 0, "host node01");
  journal_->Note("rejoined", 1, "host node02");
  EXPECT_EQ(journal_->Events().events_size(), 2);
  EXPECT_EQ(InFile(), 0u);
  journal_->Flush();
  EXPECT_EQ(InFile(), 2u);
}

TEST_F(DecisionJournalTest, AStallIsToldOnce) {
  machine_.Tick(kStart);
  machine_.Tick(kStart + seconds(10));  // 9 s late
  journal_->TellStalls();
  journal_->TellStalls();
  ASSERT_EQ(OfKind("stalled").size(), 1u);
  EXPECT_EQ(OfKind("stalled")[0].text(),
            "the coordinator did not run for 9.0 s");
  machine_.Tick(kStart + seconds(15));  // 4 s more
  journal_->TellStalls();
  ASSERT_EQ(OfKind("stalled").size(), 2u);
  EXPECT_EQ(OfKind("stalled")[1].text(),
            "the coordinator did not run for 4.0 s");
}

TEST_F(DecisionJournalTest, ACordonIsToldOnceAndAgainOnceUncordoned) {
  machine_.RestoreCordons({{"node03", Cordon{3, "failed 3 times"}}});
  journal_->TellNewCordons();
  journal_->TellNewCordons();
  ASSERT_EQ(OfKind("cordoned").size(), 1u);
  EXPECT_EQ(OfKind("cordoned")[0].text(), "host node03: failed 3 times");
  ASSERT_TRUE(machine_.Uncordon("node03").ok());
  journal_->TellUncordoned("node03");
  ASSERT_EQ(OfKind("uncordoned").size(), 1u);
  EXPECT_EQ(OfKind("uncordoned")[0].text(), "host node03 is uncordoned");
  machine_.RestoreCordons({{"node03", Cordon{4, "failed again"}}});
  journal_->TellNewCordons();
  ASSERT_EQ(OfKind("cordoned").size(), 2u);
  EXPECT_EQ(OfKind("cordoned")[1].text(), "host node03: failed again");
}

TEST_F(DecisionJournalTest, AStopAndTheEndSayWhy) {
  journal_->TellStopping("machine 1 failed");
  journal_->TellFinished(JobOutcome{JobPhase::kSucceeded, 0, "all done"});
  ASSERT_EQ(OfKind("stopping").size(), 1u);
  EXPECT_EQ(OfKind("stopping")[0].text(), "machine 1 failed");
  ASSERT_EQ(OfKind("finished").size(), 1u);
  EXPECT_EQ(OfKind("finished")[0].text(), "succeeded (exit code 0): all done");
}

TEST_F(DecisionJournalTest, AGenerationsStartSaysItsSizeAndTheRestartsUsed) {
  GenerationStart start;
  start.generation = 4;
  start.world_size = 2;
  start.num_machines = 2;
  journal_->TellGenerationStarted(start, 29500, 3);
  ASSERT_EQ(OfKind("generation").size(), 1u);
  EXPECT_EQ(OfKind("generation")[0].text(),
            "world size 2, restarts used 1 of 3");
}

}  // namespace
}  // namespace trl

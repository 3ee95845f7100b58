// Farewells on its own: a machine told at the end is awaited until its
// agent says it heard; one cut off is awaited until its time is up; a
// spare's word is its stream's only; an agent back after the end waits
// only if its machine is awaited.
#include "coordinator/owner/farewells.h"

#include <gtest/gtest.h>

#include "tests/lib/fake_agent_link.h"

namespace trl {
namespace {

using std::chrono::seconds;

const TimePoint kEnd = TimePoint{} + seconds(1000);

class FarewellsTest : public ::testing::Test {
 protected:
  Farewells farewells_;
  FakeAgentLink machine0_, machine1_, spare_, returned_;
};

TEST_F(FarewellsTest, AMachineToldAtTheEndIsAwaitedUntilItSaysItHeard) {
  farewells_.ToldAtTheEnd(&machine0_, 0);
  farewells_.AwaitUntil(0, kEnd + seconds(5));  // told: no deadline
  EXPECT_FALSE(farewells_.AllHeard(kEnd + seconds(3600)));
  EXPECT_FALSE(farewells_.Heard(&machine1_));  // never told
  EXPECT_TRUE(farewells_.Heard(&machine0_));
  EXPECT_FALSE(farewells_.Heard(&machine0_));  // once
  EXPECT_TRUE(farewells_.AllHeard(kEnd));
}

TEST_F(FarewellsTest, AMachinesOldAgentBackIsToldApartFromTheSpareHoldingIt) {
  // A spare holds machine 1 and was told at the end; machine 1's old agent
  // comes back (as machine 1) before the spare said it heard: its word
  // does not stand for the spare's.
  farewells_.ToldAtTheEnd(&spare_, 1);
  farewells_.AwaitOldAgentUntil(1, kEnd + seconds(5));
  EXPECT_TRUE(farewells_.ToldOnReturn(&returned_, 1, /*spare=*/false));
  EXPECT_TRUE(farewells_.Heard(&returned_));
  EXPECT_FALSE(farewells_.AllHeard(kEnd)) << "the spare has not heard";
  EXPECT_TRUE(farewells_.Heard(&spare_));
  EXPECT_TRUE(farewells_.AllHeard(kEnd));
}

// Spares are keyed -1, -2, ... by the spare pool: an idle spare's word
// stands for nobody else (a key of -2 once took machine 0's old agent's
// wait with it, and -1 the wait for a spare cut off).
TEST_F(FarewellsTest, AnIdleSparesWordLeavesEveryoneElseAwaited) {
  FakeAgentLink spare2;
  farewells_.ToldAtTheEnd(&spare_, -1);
  farewells_.ToldAtTheEnd(&spare2, -2);
  farewells_.AwaitUntil(kSpareCutOff, kEnd + seconds(5));
  farewells_.AwaitOldAgentUntil(0, kEnd + seconds(5));
  EXPECT_TRUE(farewells_.Heard(&spare_));
  EXPECT_TRUE(farewells_.Heard(&spare2));
  EXPECT_FALSE(farewells_.AllHeard(kEnd));
  EXPECT_TRUE(farewells_.ToldOnReturn(&returned_, -1, /*spare=*/true));
  EXPECT_TRUE(farewells_.Heard(&returned_));
  EXPECT_FALSE(farewells_.AllHeard(kEnd)) << "machine 0's old agent";
  FakeAgentLink old_agent;
  EXPECT_TRUE(farewells_.ToldOnReturn(&old_agent, 0, /*spare=*/false));
  EXPECT_TRUE(farewells_.Heard(&old_agent));
  EXPECT_TRUE(farewells_.AllHeard(kEnd));
}

// The spare that held machine 1, cut off at the end, registers again as a
// spare standing for machine 1: it is the machine's holder, not its old
// agent, whose own wait stays.
TEST_F(FarewellsTest, AStandInBackIsToldAsTheMachinesHolder) {
  farewells_.AwaitUntil(1, kEnd + seconds(3));
  farewells_.AwaitOldAgentUntil(1, kEnd + seconds(5));
  EXPECT_TRUE(farewells_.ToldOnReturn(&returned_, 1, /*spare=*/true));
  EXPECT_TRUE(farewells_.Heard(&returned_));
  EXPECT_FALSE(farewells_.AllHeard(kEnd)) << "the old agent's wait went";
  EXPECT_TRUE(farewells_.AllHeard(kEnd + seconds(6)));
}

TEST_F(FarewellsTest, ARankNoMachineHasIsNotAwaited) {
  farewells_.AwaitUntil(kSpareCutOff, kEnd + seconds(5));
  farewells_.AwaitOldAgentUntil(0, kEnd + seconds(5));
  EXPECT_FALSE(farewells_.ToldOnReturn(&returned_, -1, /*spare=*/false));
  EXPECT_FALSE(farewells_.ToldOnReturn(&returned_, -2, /*spare=*/false));
  EXPECT_FALSE(farewells_.ToldOnReturn(&returned_, -5, /*spare=*/true));
  EXPECT_FALSE(farewells_.ToldOnReturn(&returned_, 2147483647, false));
}

TEST_F(FarewellsTest, AMachineCutOffIsAwaitedUntilItsTimeIsUp) {
  farewells_.AwaitUntil(1, kEnd + seconds(5));
  EXPECT_FALSE(farewells_.AllHeard(kEnd + seconds(5)));
  EXPECT_TRUE(
      farewells_.AllHeard(kEnd + seconds(5) + std::chrono::nanoseconds(1)));
}

TEST_F(FarewellsTest, ASparesWordIsAwaitedOnlyOnItsStream) {
  farewells_.ToldAtTheEnd(&spare_, -1);
  EXPECT_TRUE(farewells_.AllHeard(kEnd));
  EXPECT_TRUE(farewells_.Heard(&spare_));
}

TEST_F(FarewellsTest, AnAgentBackAfterTheEndWaitsOnlyIfItsMachineIsAwaited) {
  farewells_.AwaitUntil(1, kEnd + seconds(5));
  EXPECT_FALSE(farewells_.ToldOnReturn(&returned_, 0, false));
  EXPECT_FALSE(farewells_.Heard(&returned_));
  EXPECT_TRUE(farewells_.ToldOnReturn(&returned_, 1, false));
  // Its stream ended before it said so: its machine is still awaited.
  farewells_.StreamEnded(&returned_);
  EXPECT_FALSE(farewells_.Heard(&returned_));
  EXPECT_FALSE(farewells_.AllHeard(kEnd));
  EXPECT_TRUE(farewells_.ToldOnReturn(&returned_, 1, false));
  EXPECT_TRUE(farewells_.Heard(&returned_));
  EXPECT_TRUE(farewells_.AllHeard(kEnd));
}

}  // namespace
}  // namespace trl

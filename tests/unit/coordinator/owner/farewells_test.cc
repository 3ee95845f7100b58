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
  farewells_.AwaitUntil(OldAgentOf(1), kEnd + seconds(5));
  EXPECT_TRUE(farewells_.ToldOnReturn(&returned_, 1));
  EXPECT_TRUE(farewells_.Heard(&returned_));
  EXPECT_FALSE(farewells_.AllHeard(kEnd)) << "the spare has not heard";
  EXPECT_TRUE(farewells_.Heard(&spare_));
  EXPECT_TRUE(farewells_.AllHeard(kEnd));
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
  EXPECT_FALSE(farewells_.ToldOnReturn(&returned_, 0));
  EXPECT_FALSE(farewells_.Heard(&returned_));
  EXPECT_TRUE(farewells_.ToldOnReturn(&returned_, 1));
  // Its stream ended before it said so: its machine is still awaited.
  farewells_.StreamEnded(&returned_);
  EXPECT_FALSE(farewells_.Heard(&returned_));
  EXPECT_FALSE(farewells_.AllHeard(kEnd));
  EXPECT_TRUE(farewells_.ToldOnReturn(&returned_, 1));
  EXPECT_TRUE(farewells_.Heard(&returned_));
  EXPECT_TRUE(farewells_.AllHeard(kEnd));
}

}  // namespace
}  // namespace trl

// A failure's stop held until every machine has kept where its workers
// stand (coordinator/owner/capture_barrier.h).
#include "coordinator/owner/capture_barrier.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

using Message = CaptureBarrier::Message;
using std::chrono::milliseconds;

Message StopOf(int64_t generation, const std::string& reason) {
  Message stop;
  stop.mutable_stop()->set_generation(generation);
  stop.mutable_stop()->set_reason(reason);
  return stop;
}

const TimePoint kStart = TimePoint() + std::chrono::seconds(100);

TEST(CaptureBarrierTest, TheStopGoesOnceTheLastMachineHasCaptured) {
  CaptureBarrier barrier;
  EXPECT_FALSE(barrier.Hold(3, {0, 1, 2}, StopOf(3, "rank 5 hung"),
                            kStart + milliseconds(11000)));
  EXPECT_TRUE(barrier.holding());
  EXPECT_FALSE(barrier.Captured(0, 3));
  EXPECT_FALSE(barrier.Captured(2, 3));
  EXPECT_FALSE(barrier.Captured(2, 3));  // said twice: still waiting for 1
  EXPECT_FALSE(barrier.Due(kStart + milliseconds(10999)));
  const std::optional<Message> stop = barrier.Captured(1, 3);
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->stop().reason(), "rank 5 hung");
  EXPECT_FALSE(barrier.holding());
  EXPECT_FALSE(barrier.deadline());
  EXPECT_FALSE(barrier.Captured(1, 3));  // sent once
}

TEST(CaptureBarrierTest, AnOlderGenerationsWordCountsForNothing) {
  CaptureBarrier barrier;
  barrier.Hold(4, {0, 1}, StopOf(4, "x"), kStart + milliseconds(11000));
  EXPECT_FALSE(barrier.Captured(0, 3));
  EXPECT_FALSE(barrier.Captured(1, 3));
  EXPECT_TRUE(barrier.holding());
  EXPECT_EQ(barrier.awaited().size(), 2u);
}

TEST(CaptureBarrierTest, ASilentMachineHoldsTheStopOnlyUntilTheDeadline) {
  CaptureBarrier barrier;
  barrier.Hold(0, {0, 1}, StopOf(0, "x"), kStart + milliseconds(11000));
  EXPECT_FALSE(barrier.Captured(0, 0));
  EXPECT_EQ(barrier.deadline(), kStart + milliseconds(11000));
  EXPECT_FALSE(barrier.Due(kStart + milliseconds(10999)));
  EXPECT_TRUE(barrier.Due(kStart + milliseconds(11000)));
  EXPECT_FALSE(barrier.holding());
}

TEST(CaptureBarrierTest, AMachineGoneIsAwaitedNoLonger) {
  CaptureBarrier barrier;
  barrier.Hold(0, {0, 1}, StopOf(0, "x"), kStart + milliseconds(11000));
  EXPECT_FALSE(barrier.Captured(0, 0));
  EXPECT_TRUE(barrier.Gone(1));
}

TEST(CaptureBarrierTest, ANewStopReleasesTheOneHeld) {
  CaptureBarrier barrier;
  barrier.Hold(0, {0, 1}, StopOf(0, "first"), kStart + milliseconds(11000));
  const std::optional<Message> earlier =
      barrier.Hold(0, {0, 1}, StopOf(0, "second"), kStart);
  ASSERT_TRUE(earlier);
  EXPECT_EQ(earlier->stop().reason(), "first");
  const std::optional<Message> now = barrier.Release();
  ASSERT_TRUE(now);
  EXPECT_EQ(now->stop().reason(), "second");
  EXPECT_FALSE(barrier.Release());
}

}  // namespace
}  // namespace trl

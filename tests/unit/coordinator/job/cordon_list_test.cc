// CordonList alone: failures counted per host within the window, the
// cordon at the count, uncordon clearing the count, and its refusals.
#include "coordinator/job/cordon_list.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

using std::chrono::seconds;
const CordonList::TimePoint kStart = CordonList::TimePoint{} + seconds(1000);

TEST(CordonListTest, AHostIsCordonedAtItsCountWithinTheWindow) {
  CordonList cordons(3, seconds(60));
  EXPECT_FALSE(cordons.NoteFailure("a", "rank 0 exited 1", kStart));
  EXPECT_FALSE(cordons.NoteFailure("b", "rank 2 exited 1", kStart));
  EXPECT_FALSE(
      cordons.NoteFailure("a", "rank 0 exited 1", kStart + seconds(10)));
  EXPECT_FALSE(cordons.Cordoned("a"));
  EXPECT_TRUE(
      cordons.NoteFailure("a", "rank 1 exited 7", kStart + seconds(20)));
  ASSERT_TRUE(cordons.Cordoned("a"));
  EXPECT_FALSE(cordons.Cordoned("b"));
  EXPECT_EQ(cordons.At("a").failures, 3);
  EXPECT_EQ(cordons.At("a").reason,
            "3 failures within 60 s, the last: rank 1 exited 7");
  // Once cordoned, more failures change nothing.
  EXPECT_FALSE(cordons.NoteFailure("a", "again", kStart + seconds(21)));
  EXPECT_EQ(cordons.At("a").failures, 3);
}

TEST(CordonListTest, FailuresOlderThanTheWindowDoNotCount) {
  CordonList cordons(2, seconds(60));
  EXPECT_FALSE(cordons.NoteFailure("a", "x", kStart));
  EXPECT_FALSE(cordons.NoteFailure("a", "x", kStart + seconds(61)));
  EXPECT_FALSE(cordons.Cordoned("a"));
  EXPECT_TRUE(cordons.NoteFailure("a", "x", kStart + seconds(62)));
}

TEST(CordonListTest, UncordonStartsTheCountAgainAndNamesTheCordonedWhenWrong) {
  CordonList cordons(2, seconds(60));
  cordons.NoteFailure("a", "x", kStart);
  cordons.NoteFailure("a", "x", kStart + seconds(1));
  cordons.NoteFailure("b", "x", kStart);
  cordons.NoteFailure("b", "x", kStart + seconds(1));
  const absl::Status wrong = cordons.Uncordon("c");
  EXPECT_EQ(wrong.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(wrong.message(), "host c is not cordoned (cordoned: a, b)");
  ASSERT_TRUE(cordons.Uncordon("a").ok());
  EXPECT_FALSE(cordons.Cordoned("a"));
  EXPECT_FALSE(cordons.NoteFailure("a", "x", kStart + seconds(2)));  // 1 of 2
  EXPECT_TRUE(cordons.NoteFailure("a", "x", kStart + seconds(3)));
}

TEST(CordonListTest, NeverWhenTheCountIsZeroOrTheHostUnknown) {
  CordonList never(0, seconds(60));
  for (int i = 0; i < 10; ++i)
    EXPECT_FALSE(never.NoteFailure("a", "x", kStart));
  EXPECT_TRUE(never.empty());
  CordonList cordons(1, seconds(60));
  EXPECT_FALSE(cordons.NoteFailure("", "x", kStart));
  EXPECT_TRUE(cordons.empty());
  EXPECT_EQ(CordonList(1, seconds(1)).Uncordon("a").message(),
            "host a is not cordoned (cordoned: none)");
}

}  // namespace
}  // namespace trl

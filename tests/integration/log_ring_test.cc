// The agent's kept worker output for `trl-coord logs`
// (agent/console/log_ring.h): bounded rings, subscriptions, and drops instead
// of waits.
#include "agent/console/log_ring.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace trl {
namespace {

namespace pb = trl::launch::v1;
using std::chrono::milliseconds;

// Every batch the ring has now, in order.
std::vector<pb::LogBatch> Drain(LogRing& ring) {
  std::vector<pb::LogBatch> batches;
  pb::LogBatch batch;
  while (ring.TakeBatch(&batch, 1 << 20, milliseconds(0))) {
    batches.push_back(batch);
  }
  return batches;
}

TEST(LogRingTest, KeepsTheLastLinesOfEachRankWithinItsBounds) {
  LogRing ring(LogRing::Limits{5, 1 << 20, 1 << 20});
  for (int i = 0; i < 12; ++i) {
    ring.Append(i % 2, false, "line " + std::to_string(i));
  }
  ring.Subscribe(1, {1}, /*follow=*/false);
  const auto batches = Drain(ring);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_TRUE(batches[0].history_done());
  ASSERT_EQ(batches[0].lines_size(), 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(batches[0].lines(i).rank(), 1);
    EXPECT_EQ(batches[0].lines(i).text(), "line " + std::to_string(3 + 2 * i));
    EXPECT_GT(batches[0].lines(i).unix_ms(), 0);
  }
  // Ended with its history: nothing more.
  ring.Append(1, false, "later");
  EXPECT_TRUE(Drain(ring).empty());

  // Bytes bound too: 10 lines of 1000 bytes in 4 KiB keep at most 4.
  LogRing small(LogRing::Limits{1000, 4096, 1 << 20});
  for (int i = 0; i < 10; ++i) small.Append(0, false, std::string(1000, 'x'));
  EXPECT_LE(small.HeldBytes(), 4096u);
  small.Subscribe(2, {}, false);
  EXPECT_LE(Drain(small).at(0).lines_size(), 4);
}

// A subscription sent again (the agent registered again) asks only for
// the lines read after the last one its client saw.
TEST(LogRingTest, HistoryAfterATimeHoldsOnlyTheLinesReadLater) {
  LogRing ring;
  ring.Append(0, false, "seen");
  ring.Subscribe(1, {}, /*follow=*/false);
  const auto first = Drain(ring);
  ASSERT_EQ(first.size(), 1u);
  const int64_t seen_ms = first[0].lines(0).unix_ms();
  // The next line is read in a later millisecond.
  while (std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() <= seen_ms) {
  }
  ring.Append(0, false, "not seen");
  ring.Subscribe(2, {}, /*follow=*/false, seen_ms);
  const auto second = Drain(ring);
  ASSERT_EQ(second.size(), 1u);
  ASSERT_EQ(second[0].lines_size(), 1);
  EXPECT_EQ(second[0].lines(0).text(), "not seen");
  ring.Subscribe(3, {}, /*follow=*/false, 0);
  EXPECT_EQ(Drain(ring).at(0).lines_size(), 2);
}

TEST(LogRingTest, FollowSendsHistoryThenNewLinesInOrder) {
  LogRing ring;
  ring.Append(0, false, "old 0");
  ring.Append(1, true, "old 1");
  ring.Subscribe(7, {}, /*follow=*/true);
  ring.Append(1, false, "new 1");
  ring.Append(0, false, "new 0");
  std::vector<std::string> seen;
  bool history_done = false;
  for (const auto& batch : Drain(ring)) {
    EXPECT_EQ(batch.subscription(), 7u);
    history_done |= batch.history_done();
    for (const auto& line : batch.lines()) seen.push_back(line.text());
  }
  EXPECT_TRUE(history_done);
  EXPECT_EQ(seen,
            (std::vector<std::string>{"old 0", "old 1", "new 1", "new 0"}));
  ring.Unsubscribe(7);
  ring.Append(0, false, "after");
  EXPECT_TRUE(Drain(ring).empty());
}

// Nobody reads: Append drops for the subscription, counts it, and keeps
// the queue within its bound; the reader sees a marker where lines went.
TEST(LogRingTest, AFullQueueDropsLinesWithAMarkerAndNeverWaits) {
  LogRing ring(LogRing::Limits{1000, 1 << 20, 64 * 1024});
  ring.Subscribe(3, {}, /*follow=*/true);
  Drain(ring);  // the (empty) history
  const std::string text(100, 'y');
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100000; ++i) ring.Append(0, false, text);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_LT(seconds, 5.0);
  // 1 MiB ring + 64 KiB queue, with their entries' overhead.
  EXPECT_LE(ring.HeldBytes(), (1u << 20) + 64 * 1024 + 4096);
  uint64_t lines = 0;
  uint64_t dropped = 0;
  for (const auto& batch : Drain(ring)) {
    for (const auto& line : batch.lines()) {
      if (line.dropped() > 0) {
        dropped += line.dropped();
        EXPECT_TRUE(line.text().empty());
      } else {
        ++lines;
      }
    }
  }
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(lines + dropped, 100000u);
  // Once read, lines flow again.
  ring.Append(0, false, "again");
  const auto batches = Drain(ring);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].lines(0).text(), "again");
}

// What a progress report sends: each rank's newest line since the last
// report, nothing for a rank that printed nothing since.
TEST(LogRingTest, NewestLinesAfterGivesEachRanksNewestLineOnce) {
  LogRing ring;
  ring.Append(0, false, "step 1", 0);
  ring.Append(0, false, "step 2", 0);
  ring.Append(1, true, "warming up", 0);
  uint64_t newest = 0;
  auto lines = ring.NewestLinesAfter(0, &newest);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rank, 0);
  EXPECT_EQ(lines[0].text, "step 2");
  EXPECT_EQ(lines[0].generation, 0);
  EXPECT_EQ(lines[1].text, "warming up");
  EXPECT_TRUE(ring.NewestLinesAfter(newest, &newest).empty());
  ring.Append(1, false, "step 3", 1);
  lines = ring.NewestLinesAfter(newest, &newest);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rank, 1);
  EXPECT_EQ(lines[0].text, "step 3");
  EXPECT_EQ(lines[0].generation, 1);
}

// A progress bar's line shows as a terminal would (after its last \r), and
// a long line is cut where a character starts.
TEST(LogRingTest, TheShownPartOfALineIsWhatATerminalShows) {
  EXPECT_EQ(ShownPartOfLine("10%|#  \r50%|#####  \r100%|##########", 100),
            "100%|##########");
  EXPECT_EQ(ShownPartOfLine("loss 0.5", 100), "loss 0.5");
  EXPECT_EQ(ShownPartOfLine("loss 0.5\r", 100), "loss 0.5");  // CRLF
  EXPECT_EQ(ShownPartOfLine("\x1b[32mloss\x1b[0m 0.5", 100), "loss 0.5");
  EXPECT_EQ(ShownPartOfLine("\x1b]0;a title\x07step 3", 100), "step 3");
  EXPECT_EQ(ShownPartOfLine("\x1b]0;a title\x1b\\step 4", 100), "step 4");
  // "é" is two bytes: a cut after 2 bytes of "aé" keeps only "a".
  EXPECT_EQ(ShownPartOfLine("a\xc3\xa9"
                            "b",
                            2),
            "a");
  EXPECT_EQ(ShownPartOfLine("a\xc3\xa9"
                            "b",
                            3),
            "a\xc3\xa9");
}

}  // namespace
}  // namespace trl

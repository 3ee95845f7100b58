// One line of where a worker stands, from a real py-spy dump's shape and
// from /proc's state and wait channel.
#include "agent/core/stack_summary.h"

#include <gtest/gtest.h>

#include "common/where_ranks_stand.h"

namespace trl {
namespace {

// `py-spy dump --native --full-filenames --pid P` of a rank waiting in a
// Gloo all-reduce (py-spy 0.3/0.4: innermost frame first, native frames
// without a line).
constexpr char kInAllReduce[] = R"dump(Process 4242: /venv/bin/python3 train.py
Python v3.11.2 (/usr/bin/python3.11)

Thread 4242 (idle): "MainThread"
    __futex_abstimed_wait_common (libc.so.6)
    gloo::transport::tcp::UnboundBuffer::waitRecv (libgloo.so)
    all_reduce (/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py:79)
    all_reduce (/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py:2501)
    wrapper (/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py:83)
    step (/home/u/model.py:12)
    <module> (/home/u/train.py:88)
Thread 4250 (idle): "Thread-1 (_monitor)"
    wait (/usr/lib/python3.11/threading.py:324)
)dump";

TEST(StackSummaryTest, TheInnermostFrameAndTheScriptsOwn) {
  // The innermost frame with a line is a library's; the script's own
  // innermost frame follows.
  EXPECT_EQ(WhereInPython(kInAllReduce),
            "in all_reduce (torch/distributed/c10d_logger.py:79), from "
            "model.py:12");
}

TEST(StackSummaryTest, ASleepInTheScriptItself) {
  constexpr char kAsleep[] = R"(Process 77: python3 train.py
Python v3.11.2 (/usr/bin/python3.11)

Thread 77 (idle): "MainThread"
    clock_nanosleep (libc.so.6)
    <module> (/home/u/train.py:41)
)";
  EXPECT_EQ(WhereInPython(kAsleep), "in <module> (train.py:41)");
}

TEST(StackSummaryTest, TheMainThreadEvenWhenListedLater) {
  constexpr char kLater[] = R"(Thread 12 (idle): "loader"
    get (queue.py:180)
Thread 11 (active): "MainThread"
    forward (/w/net.py:7)
)";
  EXPECT_EQ(WhereInPython(kLater), "in forward (net.py:7)");
  EXPECT_EQ(WhereInPython("Error: failed to find python interpreter"), "");
  EXPECT_EQ(WhereInPython(""), "");
}

TEST(StackSummaryTest, TheKernelsViewNamesStateAndWaitChannel) {
  EXPECT_EQ(WhereInTheKernel('S', "hrtimer_nanosleep\n"),
            "state S (sleeping) in the kernel at hrtimer_nanosleep");
  EXPECT_EQ(WhereInTheKernel('R', "0"), "state R (running)");
  EXPECT_EQ(WhereInTheKernel('D', ""), "state D (uninterruptible wait)");
}

TEST(StackSummaryTest, RanksAreGroupedByWhereTheyStandAndTheOddOneNamed) {
  EXPECT_EQ(WhereRanksStand({{3, "in all_reduce (x.py:1)"},
                             {5, "in <module> (train.py:41)"},
                             {0, "in all_reduce (x.py:1)"}}),
            "ranks 0, 3 in all_reduce (x.py:1); rank 5 in <module> "
            "(train.py:41), the odd one out");
  // Two ranks apart: neither is odd.
  EXPECT_EQ(WhereRanksStand({{0, "in a"}, {1, "in b"}}),
            "rank 0 in a; rank 1 in b");
  EXPECT_EQ(WhereRanksStand({}), "");
}

TEST(StackSummaryTest, ARankAloneIsNamedWithItsMachineWhenAsked) {
  const auto runs_on = [](int rank) {
    return rank < 2 ? std::string("on machine 0 (host node01)")
                    : std::string("on machine 1 (host node02)");
  };
  EXPECT_EQ(WhereRanksStand({{0, "in all_reduce (x.py:13)"},
                             {1, "in all_reduce (x.py:13)"},
                             {2, "in all_reduce (x.py:13)"},
                             {3, "in <module> (x.py:11)"}},
                            runs_on),
            "ranks 0-2 in all_reduce (x.py:13); rank 3 on machine 1 (host "
            "node02) in <module> (x.py:11), the odd one out");
}

TEST(StackSummaryTest, ALargeJobIsSaidInRangesAndWithinBounds) {
  // 16,384 ranks: all but two in one place, one apart, one odd.
  std::vector<std::pair<int, std::string>> ranks;
  for (int rank = 0; rank < 16384; ++rank) {
    ranks.emplace_back(rank, rank == 5      ? "in time.sleep (train.py:41)"
                             : rank == 9000 ? "state D (disk sleep)"
                                            : "in all_reduce (train.py:88)");
  }
  EXPECT_EQ(WhereRanksStand(ranks),
            "ranks 0-4, 6-8999, 9001-16383 in all_reduce (train.py:88); rank "
            "5 in time.sleep (train.py:41), the odd one out; rank 9000 state "
            "D (disk sleep), the odd one out");
  // Every rank in a place of its own: 8 named, the rest counted.
  std::vector<std::pair<int, std::string>> scattered;
  for (int rank = 0; rank < 100; ++rank) {
    scattered.emplace_back(rank,
                           "in step (train.py:" + std::to_string(rank) + ")");
  }
  const std::string said = WhereRanksStand(scattered);
  const std::string counted = "; and 92 ranks in 92 other places";
  ASSERT_GT(said.size(), counted.size());
  EXPECT_EQ(said.substr(said.size() - counted.size()), counted) << said;
  // Every other rank in one place: a list past 4 KiB is cut.
  std::vector<std::pair<int, std::string>> alternate;
  for (int rank = 0; rank < 4000; ++rank) {
    alternate.emplace_back(rank, rank % 2 ? "in a" : "in b");
  }
  EXPECT_LT(WhereRanksStand(alternate).size(), 2 * 4096u + 100);
  EXPECT_NE(WhereRanksStand(alternate).find("... [cut]"), std::string::npos);
}

}  // namespace
}  // namespace trl

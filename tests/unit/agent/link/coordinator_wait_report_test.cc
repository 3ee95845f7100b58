// What an agent says while it waits for its coordinator: nothing in the
// first second, then what stands in the way, told apart (a refused port, no
// route, no answer, a TLS handshake that fails or stalls), again when it
// changes and every interval; and the probe that tells the first three
// apart on real sockets.
#include "agent/link/coordinator_wait_report.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "common/network.h"
#include "tests/lib/loopback_listener.h"

namespace trl {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = CoordinatorWaitReport::Clock;
using Problem = CoordinatorWaitProblem;

const Clock::time_point kStart = Clock::time_point() + seconds(1000);

CoordinatorWaitObservation Seen(Problem problem, int error = 0) {
  CoordinatorWaitObservation seen;
  seen.problem = problem;
  seen.error = error;
  return seen;
}

CoordinatorWaitReport Report(milliseconds interval = seconds(15)) {
  return CoordinatorWaitReport("10.0.0.9", 47020, interval, seconds(900),
                               "/home/u/.trl/token", kStart);
}

TEST(CoordinatorWaitReportTest, SaysNothingInTheFirstSecond) {
  auto report = Report();
  EXPECT_EQ(report.Observe(Seen(Problem::kRefused), kStart), "");
  EXPECT_EQ(report.Observe(Seen(Problem::kRefused), kStart + milliseconds(999)),
            "");
  const std::string line =
      report.Observe(Seen(Problem::kRefused), kStart + seconds(1));
  EXPECT_NE(line.find("waiting for the coordinator at 10.0.0.9:47020 for 1 s"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("the wait ends in 899 s"), std::string::npos) << line;
}

TEST(CoordinatorWaitReportTest, RepeatsEveryIntervalAndSaysAChangeThatHeld) {
  auto report = Report(seconds(15));
  ASSERT_NE(report.Observe(Seen(Problem::kRefused), kStart + seconds(1)), "");
  EXPECT_EQ(report.Observe(Seen(Problem::kRefused), kStart + seconds(15)), "");
  const std::string again =
      report.Observe(Seen(Problem::kRefused), kStart + seconds(16));
  EXPECT_NE(again.find("for 16 s"), std::string::npos) << again;
  // The coordinator's port opens but its handshake fails: said once that
  // has held for a second.
  EXPECT_EQ(
      report.Observe(Seen(Problem::kHandshakeFails), kStart + seconds(17)), "");
  const std::string changed =
      report.Observe(Seen(Problem::kHandshakeFails), kStart + seconds(18));
  EXPECT_NE(changed.find("TLS handshake fails"), std::string::npos) << changed;
  EXPECT_EQ(
      report.Observe(Seen(Problem::kHandshakeFails), kStart + seconds(19)), "");
}

// A link that flaps between two answers every 100 ms (an ICMP rate limit:
// no route, then no answer) is said every interval, not at every flap; an
// errno that changes with the same problem is no change either.
TEST(CoordinatorWaitReportTest, AFlappingLinkIsSaidEveryIntervalNotEveryFlap) {
  auto report = Report(seconds(15));
  int lines = 0;
  for (int ms = 0; ms < 30000; ms += 100) {
    const Problem problem =
        (ms / 100) % 2 == 0 ? Problem::kUnreachable : Problem::kNoAnswer;
    const int error = (ms / 100) % 3 == 0 ? EHOSTUNREACH : ENETUNREACH;
    if (!report.Observe(Seen(problem, error), kStart + milliseconds(ms))
             .empty()) {
      ++lines;
    }
  }
  EXPECT_EQ(lines, 2);  // at 1 s and at 16 s
}

TEST(CoordinatorWaitReportTest, AZeroIntervalSaysEachProblemOnce) {
  auto report = Report(milliseconds(0));
  ASSERT_NE(report.Observe(Seen(Problem::kNoAnswer), kStart + seconds(2)), "");
  EXPECT_EQ(report.Observe(Seen(Problem::kNoAnswer), kStart + seconds(600)),
            "");
  EXPECT_EQ(report.Observe(Seen(Problem::kRefused), kStart + seconds(601)), "");
  EXPECT_NE(report.Observe(Seen(Problem::kRefused), kStart + seconds(602)), "");
}

TEST(CoordinatorWaitReportTest, EachProblemNamesWhatToCheck) {
  const auto say = [](Problem problem, int error, const std::string& origin) {
    return DescribeCoordinatorWaitProblem(Seen(problem, error), "10.0.0.9",
                                          47020, origin);
  };
  const std::string refused = say(Problem::kRefused, ECONNREFUSED, "t");
  EXPECT_NE(refused.find("connection refused"), std::string::npos);
  EXPECT_NE(refused.find("main_process_port 47020"), std::string::npos);
  const std::string no_route = say(Problem::kUnreachable, ENETUNREACH, "t");
  EXPECT_NE(no_route.find("no route to 10.0.0.9"), std::string::npos);
  EXPECT_NE(no_route.find("ip route get 10.0.0.9"), std::string::npos);
  const std::string silent = say(Problem::kNoAnswer, 0, "t");
  EXPECT_NE(silent.find("firewall drops port 47020"), std::string::npos);
  const std::string stalled = say(Problem::kHandshakeStalled, 0, "t");
  EXPECT_NE(stalled.find("frozen"), std::string::npos);
  const std::string token =
      say(Problem::kHandshakeFails, 0, "/home/u/.trl/token");
  EXPECT_NE(token.find("another token than this agent's (/home/u/.trl/token)"),
            std::string::npos)
      << token;
  const std::string certificates = say(Problem::kHandshakeFails, 0, "");
  EXPECT_NE(certificates.find("--tls_ca"), std::string::npos);
  // Five problems, five different sentences.
  EXPECT_NE(refused, no_route);
  EXPECT_NE(no_route, silent);
  EXPECT_NE(silent, stalled);
  EXPECT_NE(stalled, token);
}

TEST(ProbeTcpPortTest, TellsAnsweredRefusedAndUnreachableApart) {
  LoopbackListener listener(4);
  ASSERT_TRUE(listener.ok());
  const int port = listener.port();
  EXPECT_EQ(ProbeTcpPort("127.0.0.1", port, 1000).outcome, TcpProbe::kAnswered);
  listener.Close();  // nothing listens there now
  const TcpProbe refused = ProbeTcpPort("127.0.0.1", port, 1000);
  EXPECT_EQ(refused.outcome, TcpProbe::kRefused);
  EXPECT_EQ(refused.error, ECONNREFUSED);
  // TCP to the broadcast address: the kernel has no route for it.
  const TcpProbe no_route = ProbeTcpPort("255.255.255.255", port, 1000);
  EXPECT_EQ(no_route.outcome, TcpProbe::kUnreachable);
  EXPECT_EQ(no_route.error, ENETUNREACH);
  EXPECT_EQ(ProbeTcpPort("not-an-address", port, 1000).outcome,
            TcpProbe::kUnreachable);
}

}  // namespace
}  // namespace trl

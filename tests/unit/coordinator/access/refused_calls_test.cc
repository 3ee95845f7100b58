#include "coordinator/access/refused_calls.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

using std::chrono::seconds;

TEST(RefusedCallsTest, AFloodCostsOneLinePerInterval) {
  RefusedCalls calls(seconds(10));
  auto now = RefusedCalls::Clock::time_point() + seconds(1000);
  int lines = 0;
  std::string last;
  // 20,000 refusals over 25 s.
  for (int i = 0; i < 20000; ++i) {
    if (auto line = calls.Refused("ipv4:10.0.0.9:1234", "no auth token", now)) {
      ++lines;
      last = *line;
    }
    now += std::chrono::microseconds(1250);
  }
  EXPECT_EQ(lines, 3);  // at 0, 10 and 20 s
  EXPECT_EQ(calls.total(), 20000u);
  EXPECT_NE(last.find("refused 8000 calls in the last 10 s"), std::string::npos)
      << last;
  EXPECT_NE(last.find("(16001 in all)"), std::string::npos) << last;
}

TEST(RefusedCallsTest, TheFirstRefusalIsLoggedAtOnceWithItsPeer) {
  RefusedCalls calls(seconds(10));
  auto line = calls.Refused("ipv4:1.2.3.4:5", "wrong auth token",
                            RefusedCalls::Clock::time_point() + seconds(5));
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line, "refused a call from ipv4:1.2.3.4:5: wrong auth token");
}

}  // namespace
}  // namespace trl

// Loggers are made on first use, from any thread: gRPC logs from its own
// threads, and two of them asking for a new component at once once made
// spdlog throw ("logger with name 'grpc' already exists"), aborting the
// coordinator under a flood of bad handshakes.
#include "common/logging.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace trl {
namespace {

TEST(LoggingTest, ManyThreadsAskingForNewLoggersAtOnceGetOneEach) {
  for (int round = 0; round < 50; ++round) {
    const std::string name = "race-" + std::to_string(round);
    std::atomic<bool> go{false};
    std::atomic<int> failures{0};
    std::vector<std::shared_ptr<spdlog::logger>> got(8);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        while (!go) {
        }
        try {
          got[t] = ComponentLogger(name);
        } catch (...) {
          ++failures;
        }
      });
    }
    go = true;
    for (auto& thread : threads) thread.join();
    ASSERT_EQ(failures, 0) << "round " << round;
    for (const auto& logger : got) EXPECT_EQ(logger, got[0]);
  }
}

}  // namespace
}  // namespace trl

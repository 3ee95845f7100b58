#include "coordinator/rendezvous/nccl_id_source.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <set>

namespace trl {
namespace {

int CountEntries(const char* dir) {
  int count = 0;
  DIR* handle = opendir(dir);
  while (readdir(handle) != nullptr) ++count;
  closedir(handle);
  return count;
}

class NcclIdSourceTest : public testing::Test {
 protected:
  void SetUp() override {
#ifndef TRL_NCCL_ROOT_BIN
    GTEST_SKIP() << "built without NCCL: no trl-nccl-root to test";
#endif
  }
};

// DESIGN: whatever creates the NCCL unique ids must not leak a thread, a
// socket or a descriptor per generation. 50 generations, counts flat.
TEST_F(NcclIdSourceTest, FiftyGenerationsLeakNothing) {
#ifdef TRL_NCCL_ROOT_BIN
  NcclIdSource source(TRL_NCCL_ROOT_BIN);
  auto first = source.Next("lo");
  ASSERT_TRUE(first.ok()) << first.status();
  const int fds = CountEntries("/proc/self/fd");
  const int threads = CountEntries("/proc/self/task");
  std::set<std::string> ids = {*first};
  std::set<pid_t> helpers = {source.helper_pid()};
  for (int generation = 1; generation < 50; ++generation) {
    const pid_t previous = source.helper_pid();
    auto id = source.Next("lo");
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(id->size(), 256u);
    ids.insert(*id);
    helpers.insert(source.helper_pid());
    EXPECT_NE(kill(previous, 0), 0) << "the previous root still runs";
  }
  EXPECT_EQ(ids.size(), 50u) << "ids must be fresh for every generation";
  EXPECT_EQ(CountEntries("/proc/self/fd"), fds);
  EXPECT_EQ(CountEntries("/proc/self/task"), threads);
  const pid_t last = source.helper_pid();
  source.Release();
  EXPECT_NE(kill(last, 0), 0);
#endif
}

TEST_F(NcclIdSourceTest, MissingHelperIsAnError) {
  NcclIdSource source("/nonexistent/trl-nccl-root");
  auto id = source.Next("");
  EXPECT_FALSE(id.ok());
  EXPECT_EQ(source.helper_pid(), -1);
}

}  // namespace
}  // namespace trl

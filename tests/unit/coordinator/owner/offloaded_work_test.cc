// OffloadedWork (owner/offloaded_work.h): slow work runs in line without an
// Offload, and with one it is outstanding until its `done` has come back.
#include "coordinator/owner/offloaded_work.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

namespace trl {
namespace {

TEST(OffloadedWorkTest, WithoutAnOffloadTheWorkAndItsDoneRunInLine) {
  OffloadedWork work;
  std::vector<int> order;
  work.Run([&] { order.push_back(1); }, [&] { order.push_back(2); });
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_FALSE(work.outstanding());
}

TEST(OffloadedWorkTest, OffloadedWorkIsOutstandingUntilItsDoneComesBack) {
  OffloadedWork work;
  std::vector<std::function<void()>> handed;
  work.SetOffload([&](std::function<void()> slow, std::function<void()> done) {
    handed.push_back(std::move(slow));
    handed.push_back(std::move(done));
  });
  bool ran = false, done = false;
  work.AsOffload()([&] { ran = true; }, [&] { done = true; });
  ASSERT_EQ(handed.size(), 2u);
  EXPECT_FALSE(ran);
  EXPECT_TRUE(work.outstanding());
  handed[0]();
  EXPECT_TRUE(ran);
  EXPECT_TRUE(work.outstanding());  // done has not come back yet
  handed[1]();
  EXPECT_TRUE(done);
  EXPECT_FALSE(work.outstanding());
}

}  // namespace
}  // namespace trl

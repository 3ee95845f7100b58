#include <gtest/gtest.h>

#include "coordinator/rendezvous/store.h"

namespace trl {
namespace {

using std::chrono::seconds;

const TimePoint kStart{};

class RendezvousStoreTest : public ::testing::Test {
 protected:
  RendezvousStoreTest() { store_.OpenGeneration("job", 3, "token-3"); }

  static StoreCaller Gen(int64_t generation, std::string token) {
    return StoreCaller{"job", generation, std::move(token)};
  }

  RendezvousStore store_;
  const StoreCaller caller_ = Gen(3, "token-3");
};

TEST_F(RendezvousStoreTest, SetThenWaitCompletesAtOnceWithValues) {
  ASSERT_TRUE(store_.Set(caller_, "a", "1").ok());
  ASSERT_TRUE(store_.Set(caller_, "b", "two").ok());
  auto id = store_.Wait(caller_, {"b", "a"}, true, kStart + seconds(5));
  ASSERT_TRUE(id.ok());
  auto done = store_.TakeCompletions();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, *id);
  EXPECT_TRUE(done[0].status.ok());
  EXPECT_EQ(done[0].values, (std::vector<std::string>{"two", "1"}));
  EXPECT_TRUE(store_.TakeCompletions().empty());
}

TEST_F(RendezvousStoreTest, WaitCompletesWhenTheLastKeyIsSet) {
  auto id = store_.Wait(caller_, {"a", "b", "a"}, false, kStart + seconds(5));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store_.Set(caller_, "a", "x").ok());
  EXPECT_TRUE(store_.TakeCompletions().empty());
  ASSERT_TRUE(store_.Set(caller_, "a", "y").ok());  // overwrite: still one key
  EXPECT_TRUE(store_.TakeCompletions().empty());
  ASSERT_TRUE(store_.Set(caller_, "b", "z").ok());
  auto done = store_.TakeCompletions();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, *id);
  EXPECT_TRUE(done[0].status.ok());
  EXPECT_TRUE(done[0].values.empty());  // not asked for
  EXPECT_EQ(store_.waiter_count(), 0u);
}

TEST_F(RendezvousStoreTest, WaitPastItsDeadlineFailsNamingTheMissingKeys) {
  auto id = store_.Wait(caller_, {"a", "b"}, true, kStart + seconds(5));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store_.Set(caller_, "a", "x").ok());
  EXPECT_EQ(store_.NextDeadline(), kStart + seconds(5));
  store_.Expire(kStart + seconds(4));
  EXPECT_TRUE(store_.TakeCompletions().empty());
  store_.Expire(kStart + seconds(5));
  auto done = store_.TakeCompletions();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(done[0].status.message().find(": b"), std::string::npos)
      << done[0].status;
  EXPECT_EQ(store_.NextDeadline(), std::nullopt);
  // A key set later completes nothing.
  ASSERT_TRUE(store_.Set(caller_, "b", "y").ok());
  EXPECT_TRUE(store_.TakeCompletions().empty());
}

TEST_F(RendezvousStoreTest, CancelledWaitNeverCompletes) {
  auto id = store_.Wait(caller_, {"a"}, true, kStart + seconds(5));
  ASSERT_TRUE(id.ok());
  store_.Cancel(*id);
  ASSERT_TRUE(store_.Set(caller_, "a", "x").ok());
  store_.Expire(kStart + seconds(10));
  EXPECT_TRUE(store_.TakeCompletions().empty());
}

TEST_F(RendezvousStoreTest, AddCountsFromZeroAndRefusesNonIntegers) {
  EXPECT_EQ(*store_.Add(caller_, "n", 2), 2);
  EXPECT_EQ(*store_.Add(caller_, "n", 5), 7);
  EXPECT_EQ(*store_.Add(caller_, "n", -7), 0);
  ASSERT_TRUE(store_.Set(caller_, "text", "abc").ok());
  EXPECT_EQ(store_.Add(caller_, "text", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store_.Set(caller_, "big", "9223372036854775807").ok());
  EXPECT_EQ(store_.Add(caller_, "big", 1).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(RendezvousStoreTest, AddWakesAWaiterOnItsKey) {
  auto id = store_.Wait(caller_, {"n"}, true, kStart + seconds(5));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store_.Add(caller_, "n", 4).ok());
  auto done = store_.TakeCompletions();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].values, (std::vector<std::string>{"4"}));
}

TEST_F(RendezvousStoreTest, AnOldGenerationCanNeitherReadNorWrite) {
  ASSERT_TRUE(store_.Set(caller_, "a", "gen3").ok());
  auto old_wait = store_.Wait(caller_, {"never"}, false, kStart + seconds(5));
  ASSERT_TRUE(old_wait.ok());

  store_.OpenGeneration("job", 4, "token-4");
  // The old generation's wait ends at once, and says why.
  auto done = store_.TakeCompletions();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, *old_wait);
  EXPECT_EQ(done[0].status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_.key_count(), 0u);  // generation 3's keys are gone

  // Generation 3's callers are refused, even with generation 4's token.
  for (const StoreCaller& stale : {caller_, Gen(3, "token-4")}) {
    EXPECT_EQ(store_.Set(stale, "a", "x").code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(store_.Add(stale, "n", 1).status().code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(store_.Wait(stale, {"a"}, true, kStart).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  auto set_by_new = store_.Set(Gen(4, "token-4"), "a", "gen4");
  EXPECT_TRUE(set_by_new.ok());
  EXPECT_EQ(store_.key_count(), 1u);
}

TEST_F(RendezvousStoreTest, WrongTokenJobOrFutureGenerationIsRefused) {
  EXPECT_EQ(store_.Set(Gen(3, "token-4"), "a", "x").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(store_.Set(Gen(3, ""), "a", "x").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(store_.Set(Gen(4, "token-3"), "a", "x").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_.Set(StoreCaller{"other", 3, "token-3"}, "a", "x").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_.key_count(), 0u);
}

TEST(RendezvousStoreBeforeAnyGeneration, RefusesEverything) {
  RendezvousStore store;
  EXPECT_EQ(store.Set(StoreCaller{"job", 0, ""}, "a", "x").code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(RendezvousStoreLimits, BoundsKeysValuesTotalAndWaiters) {
  StoreLimits limits;
  limits.max_key_bytes = 4;
  limits.max_value_bytes = 8;
  limits.max_total_bytes = 20;
  limits.max_keys_per_wait = 2;
  limits.max_waiters = 1;
  RendezvousStore store(limits);
  store.OpenGeneration("job", 0, "t");
  const StoreCaller caller{"job", 0, "t"};
  EXPECT_EQ(store.Set(caller, "", "x").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Set(caller, "12345", "x").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Set(caller, "k", "123456789").code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store.Set(caller, "k1", "12345678").ok());  // 10 bytes
  ASSERT_TRUE(store.Set(caller, "k1", "1234").ok());      // 6: replaced
  ASSERT_TRUE(store.Set(caller, "k2", "12345678").ok());  // 16
  EXPECT_EQ(store.Set(caller, "k3", "123").code(),        // 21
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store.Wait(caller, {}, false, kStart).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Wait(caller, {"a", "b", "c"}, false, kStart).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store.Wait(caller, {"a"}, false, kStart).ok());
  EXPECT_EQ(store.Wait(caller, {"b"}, false, kStart).status().code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace trl

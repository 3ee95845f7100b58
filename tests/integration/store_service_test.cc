// The coordinator's rendezvous store over real gRPC on loopback: the
// worker library's client against the coordinator's service, with real
// deadlines, tokens and generations.
#include "coordinator/rendezvous/store_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <thread>

#include "worker/store_client.h"

namespace trl::testing {
namespace {

using std::chrono::milliseconds;
using worker::LaunchEnv;
using worker::StoreClient;

class StoreServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(store_.service());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port_, 0);
    token_ = store_.OpenGeneration("job", 0);
  }
  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }

  std::unique_ptr<StoreClient> Client(int64_t generation, std::string token,
                                      std::string job = "job") {
    LaunchEnv env;
    env.job_id = job;
    env.generation = generation;
    env.coordinator_address = "127.0.0.1:" + std::to_string(port_);
    env.store_token = token;
    auto client = StoreClient::Create(env);
    EXPECT_TRUE(client.ok()) << client.status();
    return std::move(*client);
  }

  StoreService store_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string token_;
};

TEST_F(StoreServiceTest, AGetWaitsForAKeyAnotherWorkerSetsLater) {
  auto reader = Client(0, token_);
  auto writer = Client(0, token_);
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(200));
    EXPECT_TRUE(writer->Set("rank1", std::string("addr\0ess", 8)).ok());
  });
  const auto start = std::chrono::steady_clock::now();
  auto values = reader->Get({"rank1"}, milliseconds(10000));
  later.join();
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(values->at(0), std::string("addr\0ess", 8));  // bytes, not text
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(150));
  EXPECT_EQ(*writer->Add("count", 3), 3);
  EXPECT_EQ(*reader->Add("count", 4), 7);
}

TEST_F(StoreServiceTest, AWaitPastItsDeadlineFailsNamingTheKey) {
  auto client = Client(0, token_);
  ASSERT_TRUE(client->Set("present", "x").ok());
  absl::Status waited =
      client->Wait({"present", "never-set"}, milliseconds(300));
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded) << waited;
  EXPECT_NE(waited.message().find("never-set"), std::string::npos) << waited;
  // The store still serves after the expiry.
  EXPECT_TRUE(client->Wait({"present"}, milliseconds(300)).ok());
}

TEST_F(StoreServiceTest, WrongTokenIsRefused) {
  auto intruder = Client(0, "not-the-token");
  EXPECT_EQ(intruder->Set("k", "v").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(intruder->Get({"k"}, milliseconds(100)).status().code(),
            absl::StatusCode::kUnauthenticated);
  auto other_job = Client(0, token_, "another-job");
  EXPECT_EQ(other_job->Set("k", "v").code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(StoreServiceTest, ANewGenerationReleasesAndShutsOutTheOldOne) {
  auto old_worker = Client(0, token_);
  ASSERT_TRUE(old_worker->Set("secret-of-gen0", "x").ok());
  absl::Status pending;
  std::thread waiting(
      [&] { pending = old_worker->Wait({"never"}, milliseconds(30000)); });
  std::this_thread::sleep_for(milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  const std::string token1 = store_.OpenGeneration("job", 1);
  waiting.join();
  // Released at once, not after its 30 s.
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(5000));
  EXPECT_EQ(pending.code(), absl::StatusCode::kFailedPrecondition) << pending;

  EXPECT_NE(token1, token_);
  EXPECT_EQ(old_worker->Set("k", "v").code(),
            absl::StatusCode::kFailedPrecondition);
  auto new_worker = Client(1, token1);
  EXPECT_EQ(new_worker->Wait({"secret-of-gen0"}, milliseconds(200)).code(),
            absl::StatusCode::kDeadlineExceeded);  // gone with generation 0
  EXPECT_TRUE(new_worker->Set("k", "v").ok());
  // Generation 0's token does not open generation 1.
  EXPECT_EQ(Client(1, token_)->Set("k", "w").code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(StoreClientCreate, NeedsTheCoordinatorAndAToken) {
  LaunchEnv env;
  auto client = StoreClient::Create(env);
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("TRL_STORE_TOKEN"),
            std::string::npos);
}

}  // namespace
}  // namespace trl::testing

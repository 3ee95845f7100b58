#include "worker/launch_env.h"

#include <gtest/gtest.h>

namespace trl::worker {
namespace {

EnvironmentMap Torchrun() {
  return {{"RANK", "5"},
          {"LOCAL_RANK", "1"},
          {"WORLD_SIZE", "8"},
          {"LOCAL_WORLD_SIZE", "2"},
          {"GROUP_RANK", "2"},
          {"GROUP_WORLD_SIZE", "4"},
          {"MASTER_ADDR", "10.1.0.1"},
          {"MASTER_PORT", "29500"},
          {"TORCHELASTIC_RESTART_COUNT", "3"}};
}

TEST(LaunchEnv, ReadsTorchrunsVariables) {
  auto env = ParseLaunchEnv(Torchrun());
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_world_size, 2);
  EXPECT_EQ(env->machine_rank, 2);
  EXPECT_EQ(env->num_machines, 4);
  EXPECT_EQ(env->master_addr, "10.1.0.1");
  EXPECT_EQ(env->master_port, 29500);
  EXPECT_EQ(env->generation, 3);  // torchrun's restart count
  EXPECT_FALSE(env->has_store());
}

TEST(LaunchEnv, ReadsTrlLaunchsOwnVariables) {
  EnvironmentMap vars = Torchrun();
  vars["TRL_GENERATION"] = "7";
  vars["TRL_JOB_ID"] = "trl-0badcafe";
  vars["TRL_COORDINATOR_ADDR"] = "10.1.0.1:29400";
  vars["TRL_STORE_TOKEN"] = "secret";
  vars["TRL_HEARTBEAT_FILE"] = "/tmp/hb";
  vars["GLOO_SOCKET_IFNAME"] = "eth1";
  vars["TRL_NCCL_UNIQUE_ID"] = std::string(256, 'a');
  auto env = ParseLaunchEnv(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->generation, 7);  // ours wins over torchrun's counter
  EXPECT_EQ(env->job_id, "trl-0badcafe");
  EXPECT_EQ(env->coordinator_address, "10.1.0.1:29400");
  EXPECT_TRUE(env->has_store());
  EXPECT_EQ(env->heartbeat_file, "/tmp/hb");
  EXPECT_EQ(env->socket_ifname, "eth1");
  EXPECT_EQ(env->nccl_unique_id_hex.size(), 256u);
}

TEST(LaunchEnv, OptionalVariablesHaveDefaults) {
  EnvironmentMap vars = Torchrun();
  vars.erase("GROUP_RANK");
  vars.erase("GROUP_WORLD_SIZE");
  vars.erase("TORCHELASTIC_RESTART_COUNT");
  auto env = ParseLaunchEnv(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->machine_rank, 0);
  EXPECT_EQ(env->num_machines, 1);
  EXPECT_EQ(env->generation, 0);
}

// Each bad environment, and a fragment the error must contain.
struct BadCase {
  std::string variable;
  std::optional<std::string> value;  // nullopt: unset
  std::string expected;
};

class LaunchEnvErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(LaunchEnvErrors, NameTheVariable) {
  EnvironmentMap vars = Torchrun();
  if (GetParam().value) {
    vars[GetParam().variable] = *GetParam().value;
  } else {
    vars.erase(GetParam().variable);
  }
  auto env = ParseLaunchEnv(vars);
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find(GetParam().expected), std::string::npos)
      << env.status();
}

INSTANTIATE_TEST_SUITE_P(
    All, LaunchEnvErrors,
    ::testing::Values(
        BadCase{"RANK", std::nullopt, "RANK is not set"},
        BadCase{"WORLD_SIZE", std::nullopt, "WORLD_SIZE is not set"},
        BadCase{"LOCAL_RANK", std::nullopt, "LOCAL_RANK is not set"},
        BadCase{"MASTER_ADDR", std::nullopt, "MASTER_ADDR is not set"},
        BadCase{"MASTER_PORT", std::nullopt, "MASTER_PORT is not set"},
        BadCase{"RANK", "five", "RANK='five' is not an integer"},
        BadCase{"RANK", "8", "RANK=8 is not below WORLD_SIZE=8"},
        BadCase{"RANK", "-1", "RANK=-1 is out of range"},
        BadCase{"WORLD_SIZE", "0", "WORLD_SIZE=0 is out of range"},
        BadCase{"LOCAL_RANK", "2", "LOCAL_RANK=2 is not below"},
        BadCase{"LOCAL_WORLD_SIZE", "9", "LOCAL_WORLD_SIZE=9 is above"},
        BadCase{"GROUP_RANK", "4", "GROUP_RANK=4 is not below"},
        BadCase{"MASTER_PORT", "70000", "MASTER_PORT=70000 is out of range"},
        BadCase{"MASTER_PORT", "29500x", "MASTER_PORT='29500x'"},
        BadCase{"TRL_GENERATION", "-3", "TRL_GENERATION=-3"},
        BadCase{"TRL_NCCL_UNIQUE_ID", "abc", "TRL_NCCL_UNIQUE_ID must be 256"},
        BadCase{"TRL_NCCL_UNIQUE_ID", std::string(256, 'z'),
                "TRL_NCCL_UNIQUE_ID must be 256"}));

}  // namespace
}  // namespace trl::worker

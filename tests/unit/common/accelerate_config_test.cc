#include "common/accelerate_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace trl {
namespace {

std::string SharedConfigDir() {
  return std::string(TRL_SOURCE_DIR) + "/tests/data/accelerate_configs";
}

absl::StatusOr<AccelerateConfig> Parse(const std::string& text) {
  return ParseAccelerateConfig(text, "test.yaml");
}

absl::Status ParseAndValidate(const std::string& text) {
  auto config = Parse(text);
  if (!config.ok()) return config.status();
  return ValidateAccelerateConfig(*config);
}

TEST(AccelerateConfigTest, ReadsEveryScalarKey) {
  auto config = Parse(R"(
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
mixed_precision: 'bf16'
use_cpu: false
debug: true
num_processes: 16
num_machines: 2
machine_rank: 1
gpu_ids: 0,1
main_process_ip: 10.0.0.1
main_process_port: 29501
rdzv_backend: c10d
same_network: false
main_training_function: main
enable_cpu_affinity: true
downcast_bf16: 'no'
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
)");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->distributed_type, "MULTI_GPU");
  EXPECT_EQ(config->mixed_precision, "bf16");
  EXPECT_TRUE(config->mixed_precision_from_file);
  EXPECT_TRUE(config->debug);
  EXPECT_EQ(config->num_processes, 16);
  EXPECT_EQ(config->num_machines, 2);
  EXPECT_EQ(config->machine_rank, 1);
  EXPECT_EQ(config->gpu_ids, "0,1");
  EXPECT_EQ(config->main_process_ip, "10.0.0.1");
  EXPECT_EQ(config->main_process_port, 29501);
  EXPECT_EQ(config->rdzv_backend, "c10d");
  EXPECT_FALSE(config->same_network);
  EXPECT_TRUE(config->enable_cpu_affinity);
  EXPECT_EQ(config->ProcessesPerMachine(), 8);
  EXPECT_TRUE(ValidateAccelerateConfig(*config).ok());
}

TEST(AccelerateConfigTest, KeepsSectionsInFileOrder) {
  auto config = Parse(R"(
distributed_type: DEEPSPEED
deepspeed_config:
  zero_stage: 3
  offload_optimizer_device: none
  zero3_init_flag: true
)");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->deepspeed_config.size(), 3u);
  EXPECT_EQ(config->deepspeed_config[0].first, "zero_stage");
  EXPECT_EQ(config->deepspeed_config[2].first, "zero3_init_flag");
  EXPECT_EQ(AccelerateConfig::Lookup(config->deepspeed_config, "zero_stage"),
            "3");
}

TEST(AccelerateConfigTest, AFileOverOneMebibyteIsRefused) {
  const std::string path = ::testing::TempDir() + "/trl-big-config.yaml";
  {
    std::ofstream out(path);
    out << "num_machines: 1\n";
    out << "# " << std::string(1 << 20, 'x') << "\n";
  }
  auto config = LoadAccelerateConfigFile(path);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("larger than 1 MiB"),
            std::string::npos)
      << config.status();
  // /dev/zero never ends: refused after 1 MiB, not read forever.
  config = LoadAccelerateConfigFile("/dev/zero");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("larger than 1 MiB"),
            std::string::npos);
  std::filesystem::remove(path);
}

TEST(AccelerateConfigTest, EmptyFileMeansDefaults) {
  auto config = Parse("");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->num_machines, 1);
  EXPECT_EQ(config->num_processes, -1);
}

TEST(AccelerateConfigTest, UnknownKeyNamesKeyAndLine) {
  auto config = Parse("num_machines: 1\nnum_proceses: 4\n");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("test.yaml:2"), std::string::npos)
      << config.status();
  EXPECT_NE(config.status().message().find("num_proceses"), std::string::npos);
}

TEST(AccelerateConfigTest, BadYamlNamesLine) {
  auto config = Parse("num_machines: 1\nnum_processes: [4\n");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("not valid YAML"), std::string::npos)
      << config.status();
}

TEST(AccelerateConfigTest, WrongTypesNameKeyAndValue) {
  auto config = Parse("num_machines: two\n");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("num_machines must be an integer"),
            std::string::npos)
      << config.status();
  EXPECT_NE(config.status().message().find("'two'"), std::string::npos);

  config = Parse("use_cpu: maybe\n");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("use_cpu must be true or false"),
            std::string::npos);

  config = Parse("main_process_ip: [1, 2]\n");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("must be a string"),
            std::string::npos);

  config = Parse("fsdp_config: 3\n");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("fsdp_config must be a mapping"),
            std::string::npos);
}

TEST(AccelerateConfigTest, TopLevelMustBeAMapping) {
  EXPECT_FALSE(Parse("- a\n- b\n").ok());
}

struct InvalidCase {
  const char* yaml;
  const char* expected_fragment;
};

class InvalidConfigTest : public testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidConfigTest, IsRefusedWithAClearMessage) {
  const absl::Status status = ParseAndValidate(GetParam().yaml);
  ASSERT_FALSE(status.ok()) << GetParam().yaml;
  EXPECT_NE(status.message().find(GetParam().expected_fragment),
            std::string::npos)
      << status;
}

INSTANTIATE_TEST_SUITE_P(
    AllRules, InvalidConfigTest,
    testing::Values(
        InvalidCase{"num_machines: 2\nmachine_rank: 2\nnum_processes: 2\n"
                    "main_process_ip: 10.0.0.1\n",
                    "machine_rank 2 must be in 0..num_machines-1"},
        InvalidCase{"num_machines: 1\nmachine_rank: -1\nnum_processes: 1\n",
                    "machine_rank -1"},
        InvalidCase{"num_machines: 2\nnum_processes: 3\n"
                    "main_process_ip: 10.0.0.1\n",
                    "num_processes 3 is not divisible by num_machines 2"},
        InvalidCase{"num_processes: 1\nmain_process_port: 70000\n",
                    "main_process_port 70000 is outside 1..65535"},
        InvalidCase{"num_processes: 1\nmain_process_port: -1\n",
                    "main_process_port -1 is outside 1..65535"},
        InvalidCase{"num_machines: 2\nnum_processes: 2\n",
                    "main_process_ip is required"},
        InvalidCase{"num_machines: 2\nnum_processes: 2\n"
                    "main_process_ip: '1234'\n",
                    "main_process_ip '1234' is neither"},
        InvalidCase{"num_processes: 1\nmain_process_ip: 'bad host!'\n",
                    "is neither an IP address nor a host name"},
        InvalidCase{"num_processes: 1\nmain_process_ip: 300.1.1.1\n",
                    "is neither"},
        InvalidCase{"num_processes: 1\ndistributed_type: XLA\n",
                    "distributed_type 'XLA' is not one trl-launch launches"},
        InvalidCase{"num_processes: 1\nmixed_precision: fp4\n",
                    "mixed_precision 'fp4' is not allowed"},
        InvalidCase{"num_processes: 1\ncompute_environment: AMAZON_SAGEMAKER\n",
                    "compute_environment 'AMAZON_SAGEMAKER' is not supported"},
        InvalidCase{"num_processes: 1\ngpu_ids: zero\n",
                    "gpu_ids 'zero' must be 'all' or a comma-separated list"},
        InvalidCase{"num_processes: 1\nrdzv_backend: zookeeper\n",
                    "rdzv_backend 'zookeeper' is not allowed"},
        InvalidCase{"num_processes: 0\n", "num_processes 0 must be at least 1"},
        InvalidCase{"num_machines: 0\nnum_processes: 1\n",
                    "num_machines 0 must be at least 1"},
        InvalidCase{"num_processes: 2\ndistributed_type: FSDP\nfsdp_config:\n"
                    "  fsdp_cpu_ram_efficient_loading: true\n"
                    "  fsdp_sync_module_states: false\n",
                    "fsdp_sync_module_states"}));

TEST(AccelerateConfigTest, AcceptsHostNamesAndAddresses) {
  for (const char* ip :
       {"10.231.0.1", "node01", "gpu-7.cluster.local", "::1", "fe80::1"}) {
    auto status = ParseAndValidate(
        std::string("num_machines: 2\nnum_processes: 2\nmain_process_ip: ") +
        ip + "\n");
    EXPECT_TRUE(status.ok()) << ip << ": " << status;
  }
}

TEST(AccelerateConfigTest, MissingFileIsNamed) {
  auto config = LoadAccelerateConfigFile("/nonexistent/multi_node.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("/nonexistent/multi_node.yaml"),
            std::string::npos);
}

TEST(AccelerateConfigTest, ParsesEverySharedConfig) {
  const std::string dir = SharedConfigDir();
  int parsed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    auto config = LoadAccelerateConfigFile(entry.path().string());
    ASSERT_TRUE(config.ok()) << entry.path() << ": " << config.status();
    ++parsed;
  }
  EXPECT_EQ(parsed, 8);
}

TEST(AccelerateConfigTest, FingerprintHoldsTheSettingsThatMustAgree) {
  AccelerateConfig config;
  config.num_processes = 8;
  config.num_machines = 2;
  auto fingerprint = AgreementFingerprint(config);
  EXPECT_EQ(fingerprint["num_processes"], "8");
  EXPECT_EQ(fingerprint["num_machines"], "2");
  EXPECT_EQ(fingerprint["distributed_type"], "NO");
  EXPECT_EQ(fingerprint.count("mixed_precision"), 1u);
  // Builds that speak different protocols do not agree either.
  EXPECT_EQ(fingerprint["trl_launch_protocol"], "2");
}

}  // namespace
}  // namespace trl

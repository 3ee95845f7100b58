#include "common/launch_options.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>

namespace trl {
namespace {

std::string ConfigPath(const std::string& name) {
  return std::string(TRL_SOURCE_DIR) + "/tests/data/accelerate_configs/" + name;
}

// Parses `args` as trl-agent would and resolves the config.
absl::StatusOr<AccelerateConfig> Resolve(std::vector<std::string> args,
                                         LocalMachine machine = {}) {
  CLI::App app;
  LaunchOptions options;
  AddLaunchFlags(app, options);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
  return ResolveLaunchConfig(options, machine);
}

TEST(LaunchOptionsTest, BuiltInDefaultIsOneCpuProcess) {
  auto config = Resolve({});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->source, "built-in default");
  EXPECT_EQ(config->num_processes, 1);
  EXPECT_EQ(config->num_machines, 1);
  EXPECT_TRUE(config->use_cpu);
  EXPECT_EQ(config->distributed_type, "NO");
  EXPECT_EQ(config->main_process_ip, "127.0.0.1");
}

TEST(LaunchOptionsTest, BuiltInDefaultUsesEveryGpu) {
  LocalMachine machine;
  machine.gpu_count = 4;
  auto config = Resolve({}, machine);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_processes, 4);
  EXPECT_FALSE(config->use_cpu);
  EXPECT_EQ(config->distributed_type, "MULTI_GPU");
}

TEST(LaunchOptionsTest, BuiltInDefaultWithTwoCpuProcesses) {
  auto config = Resolve({"--num_processes", "2"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_processes, 2);
  EXPECT_EQ(config->distributed_type, "MULTI_CPU");
}

TEST(LaunchOptionsTest, FlagsOverrideTheFileInBothSpellings) {
  auto config = Resolve({"--config_file", ConfigPath("multi_node.yaml"),
                         "--main-process-ip", "10.231.0.1", "--machine_rank",
                         "1", "--num-processes", "4", "--mixed_precision",
                         "FP16", "--gpu-ids", "0,1"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->main_process_ip, "10.231.0.1");
  EXPECT_EQ(config->machine_rank, 1);
  EXPECT_EQ(config->num_processes, 4);
  EXPECT_EQ(config->mixed_precision, "fp16");
  EXPECT_FALSE(config->mixed_precision_from_file);
  EXPECT_EQ(config->gpu_ids, "0,1");
  EXPECT_EQ(config->main_process_port, 9999);  // from the file
}

TEST(LaunchOptionsTest, MultiNodeTemplateNeedsARealAddress) {
  auto config = Resolve({"--config_file", ConfigPath("multi_node.yaml")});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("'1234'"), std::string::npos)
      << config.status();
}

TEST(LaunchOptionsTest, EverySharedConfigIsAccepted) {
  for (const auto& entry : std::filesystem::directory_iterator(
           std::string(TRL_SOURCE_DIR) + "/tests/data/accelerate_configs")) {
    if (entry.path().extension() != ".yaml") continue;
    std::vector<std::string> args = {"--config_file", entry.path().string()};
    if (entry.path().filename() == "multi_node.yaml") {
      args.insert(args.end(), {"--main_process_ip", "10.231.0.1"});
    }
    auto config = Resolve(args);
    EXPECT_TRUE(config.ok()) << entry.path() << ": " << config.status();
  }
}

TEST(LaunchOptionsTest, EveryShippedExampleConfigIsValid) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::string(TRL_SOURCE_DIR) + "/configs")) {
    auto config = Resolve({"--config_file", entry.path().string()});
    EXPECT_TRUE(config.ok()) << entry.path() << ": " << config.status();
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(LaunchOptionsTest, ReadsAccelerateDefaultConfigFile) {
  const auto home = std::filesystem::temp_directory_path() /
                    ("trl-hf-home-" + std::to_string(getpid()));
  std::filesystem::create_directories(home / "accelerate");
  std::ofstream(home / "accelerate" / "default_config.yaml")
      << "distributed_type: MULTI_CPU\nnum_processes: 3\nuse_cpu: true\n";
  LocalMachine machine;
  machine.hf_home = home.string();
  auto config = Resolve({}, machine);
  std::filesystem::remove_all(home);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_processes, 3);
  EXPECT_EQ(config->distributed_type, "MULTI_CPU");
  EXPECT_NE(config->source.find("default_config.yaml"), std::string::npos);
}

TEST(LaunchOptionsTest, ExitCodeLists) {
  auto codes = ParseExitCodeList("2, 64,0");
  ASSERT_TRUE(codes.ok()) << codes.status();
  EXPECT_EQ(*codes, (std::vector<int>{2, 64, 0}));
  EXPECT_TRUE(ParseExitCodeList("")->empty());
  EXPECT_FALSE(ParseExitCodeList("256").ok());
  EXPECT_FALSE(ParseExitCodeList("2,,3").ok());
  EXPECT_FALSE(ParseExitCodeList("-1").ok());
}

TEST(LaunchOptionsTest, BadOverrideIsValidatedAfterwards) {
  auto config = Resolve({"--num_machines", "2", "--num_processes", "3",
                         "--main_process_ip", "10.0.0.1"});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("not divisible"), std::string::npos);
}

// A bad value given as a flag is said to come from the flag: "built-in
// default: main_process_ip 'not an ip!'" sent the user to a file they never
// wrote.
TEST(LaunchOptionsTest, ABadOverrideIsNamedAsTheFlagsNotTheFiles) {
  auto config = Resolve(
      {"--main_process_ip", "not an ip!", "--main_process_port", "47000"});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "built-in default with --main_process_ip, --main_process_port: "
            "main_process_ip 'not an ip!' is neither an IP address nor a "
            "host name (a placeholder?)");
  auto from_file = Resolve({"--config_file", ConfigPath("single_gpu.yaml"),
                            "--num_processes", "3", "--num_machines", "2"});
  ASSERT_FALSE(from_file.ok());
  EXPECT_NE(from_file.status().message().find(
                "single_gpu.yaml with --num_machines, --num_processes: "),
            std::string::npos)
      << from_file.status();
}

TEST(LaunchOptionsTest, AccelerateFlagsThatChooseTheLauncher) {
  LocalMachine two_gpus;
  two_gpus.gpu_count = 2;
  auto config = Resolve({"--config_file", ConfigPath("single_gpu.yaml"),
                         "--multi_gpu", "--num_processes", "2"},
                        two_gpus);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->distributed_type, "MULTI_GPU");
  // As Accelerate: --multi_gpu wins over the file's DeepSpeed.
  config = Resolve(
      {"--config_file", ConfigPath("deepspeed_zero3.yaml"), "--multi_gpu"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->distributed_type, "MULTI_GPU");
  config = Resolve({"--multi_gpu", "--num_processes", "1"});
  EXPECT_FALSE(config.ok());
  config = Resolve({"--multi_gpu", "--cpu"});
  EXPECT_FALSE(config.ok());
  // --use_deepspeed agrees with a DeepSpeed file, and is refused otherwise.
  config = Resolve(
      {"--config_file", ConfigPath("deepspeed_zero3.yaml"), "--use_deepspeed"});
  ASSERT_TRUE(config.ok()) << config.status();
  config = Resolve(
      {"--config_file", ConfigPath("multi_gpu.yaml"), "--use_deepspeed"});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("--use_deepspeed"),
            std::string::npos)
      << config.status();
  config = Resolve({"--config_file", ConfigPath("fsdp1.yaml"), "--use-fsdp",
                    "-q", "--same_network", "--debug", "--enable_cpu_affinity",
                    "--role", "trainer", "--rdzv_backend", "c10d"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->debug);
  EXPECT_TRUE(config->enable_cpu_affinity);
  EXPECT_EQ(config->role, "trainer");
  EXPECT_EQ(config->rdzv_backend, "c10d");
}

TEST(LaunchOptionsTest, DynamoAndThreadFlags) {
  auto config =
      Resolve({"--dynamo_backend", "INDUCTOR", "--dynamo-mode", "max-autotune",
               "--dynamo_use_dynamic", "--dynamo_use_regional_compilation",
               "--num_cpu_threads_per_process", "6", "--cpu"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(AccelerateConfig::Lookup(config->dynamo_config, "dynamo_backend"),
            "inductor");
  EXPECT_EQ(AccelerateConfig::Lookup(config->dynamo_config, "dynamo_mode"),
            "max-autotune");
  EXPECT_EQ(
      AccelerateConfig::Lookup(config->dynamo_config, "dynamo_use_dynamic"),
      "true");
  EXPECT_EQ(AccelerateConfig::Lookup(config->dynamo_config,
                                     "dynamo_use_regional_compilation"),
            "true");
  EXPECT_EQ(config->num_cpu_threads_per_process, 6);
  EXPECT_TRUE(config->cpu_flag);
  CLI::App app;
  LaunchOptions options;
  AddLaunchFlags(app, options);
  std::vector<std::string> args = {"torch_compile_please", "--dynamo_backend"};
  EXPECT_THROW(app.parse(args), CLI::ValidationError);
}

TEST(LaunchOptionsTest, PortZeroIsTheCoordinatorsOnly) {
  CLI::App app;
  LaunchOptions options;
  AddLaunchFlags(app, options);
  std::vector<std::string> args = {"0", "--main_process_port"};
  app.parse(args);
  auto config = ResolveLaunchConfig(options, LocalMachine{});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("cannot learn which port"),
            std::string::npos)
      << config.status();
  options.allow_free_port = true;
  config = ResolveLaunchConfig(options, LocalMachine{});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->main_process_port, 0);
}

}  // namespace
}  // namespace trl

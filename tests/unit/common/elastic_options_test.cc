// --num_machines MIN:MAX and TRL_NUM_MACHINES: parsing, validation, and
// the worker environment of an elastic generation.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include "common/launch_options.h"
#include "common/worker_environment.h"

namespace trl {
namespace {

std::string ConfigPath(const std::string& name) {
  return std::string(TRL_SOURCE_DIR) + "/tests/data/accelerate_configs/" + name;
}

absl::StatusOr<AccelerateConfig> Resolve(std::vector<std::string> args,
                                         LocalMachine machine = {}) {
  CLI::App app;
  LaunchOptions options;
  AddLaunchFlags(app, options);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
  return ResolveLaunchConfig(options, machine);
}

TEST(ElasticOptionsTest, ParsesNAndRanges) {
  auto plain = ParseNumMachines("3", "--num_machines");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->min, 3);
  EXPECT_EQ(plain->max, 3);
  auto range = ParseNumMachines("2:4", "--num_machines");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->min, 2);
  EXPECT_EQ(range->max, 4);
  for (const char* bad : {"0", "0:2", "3:2", "2:", ":2", "a:b", "1:2:3", ""}) {
    auto parsed = ParseNumMachines(bad, "--num_machines");
    ASSERT_FALSE(parsed.ok()) << bad;
    // The error names the flag and the value.
    EXPECT_NE(parsed.status().message().find("--num_machines '" +
                                             std::string(bad) + "'"),
              std::string::npos)
        << parsed.status().message();
  }
  EXPECT_NE(ParseNumMachines("3:2", "--num_machines")
                .status()
                .message()
                .find("MIN 3 is greater than MAX 2"),
            std::string::npos);
}

TEST(ElasticOptionsTest, RangeIsMaxMachinesAndTheFileStaysAnInteger) {
  // multi_node.yaml: 2 machines, 8 processes. num_processes is the total
  // at MAX machines, so per machine = 8 / 2 here.
  auto config =
      Resolve({"--config_file", ConfigPath("multi_node.yaml"), "--num_machines",
               "1:2", "--main_process_ip", "10.0.0.1"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_machines, 2);
  EXPECT_EQ(config->min_machines, 1);
  EXPECT_TRUE(config->Elastic());
  EXPECT_EQ(config->ProcessesPerMachine(), 4);
}

TEST(ElasticOptionsTest, NToNIsN) {
  auto config = Resolve({"--num_machines", "2:2", "--num_processes", "4",
                         "--main_process_ip", "10.0.0.1"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_machines, 2);
  EXPECT_FALSE(config->Elastic());
}

TEST(ElasticOptionsTest, EnvironmentGivesItUnlessTheFlagDoes) {
  LocalMachine machine;
  machine.environment["TRL_NUM_MACHINES"] = "2:3";
  auto config = Resolve(
      {"--num_processes", "6", "--main_process_ip", "10.0.0.1"}, machine);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->MinMachines(), 2);
  EXPECT_EQ(config->num_machines, 3);
  auto flag = Resolve({"--num_machines", "3", "--num_processes", "6",
                       "--main_process_ip", "10.0.0.1"},
                      machine);
  ASSERT_TRUE(flag.ok()) << flag.status();
  EXPECT_FALSE(flag->Elastic());
  machine.environment["TRL_NUM_MACHINES"] = "4:1";
  auto bad = Resolve({}, machine);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TRL_NUM_MACHINES '4:1'"),
            std::string::npos)
      << bad.status().message();
}

TEST(ElasticOptionsTest, MachineRankBelowMaxAndProcessesCountedAtMax) {
  auto rank =
      Resolve({"--num_machines", "2:3", "--machine_rank", "3",
               "--num_processes", "6", "--main_process_ip", "10.0.0.1"});
  ASSERT_FALSE(rank.ok());
  EXPECT_NE(rank.status().message().find("elastic range 2:3"),
            std::string::npos)
      << rank.status().message();
  EXPECT_TRUE(Resolve({"--num_machines", "2:3", "--machine_rank", "2",
                       "--num_processes", "6", "--main_process_ip", "10.0.0.1"})
                  .ok());
  auto processes = Resolve({"--num_machines", "2:3", "--num_processes", "4",
                            "--main_process_ip", "10.0.0.1"});
  ASSERT_FALSE(processes.ok());
  EXPECT_NE(processes.status().message().find("counted at MAX"),
            std::string::npos)
      << processes.status().message();
}

TEST(ElasticOptionsTest, WorkersSeeTheGenerationsShape) {
  AccelerateConfig config;
  config.distributed_type = "MULTI_CPU";
  config.use_cpu = true;
  config.num_machines = 3;
  config.min_machines = 2;
  config.num_processes = 6;
  JobEnvironmentInputs inputs;
  inputs.world_size = 4;
  inputs.num_machines = 2;
  inputs.generation = 5;
  Environment job = BuildJobEnvironment(config, inputs);
  EXPECT_EQ(job["WORLD_SIZE"], "4");
  EXPECT_EQ(job["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(job["TRL_GENERATION"], "5");
  // Machine 2 is the second member: GROUP_RANK 1, its ranks from 2.
  job["GROUP_RANK"] = "1";
  RankEnvironmentInputs rank;
  rank.machine_rank = 2;
  rank.rank_offset = 2;
  rank.local_world_size = 2;
  rank.local_rank = 1;
  const Environment env = BuildWorkerEnvironment({}, job, rank);
  EXPECT_EQ(env.at("GROUP_RANK"), "1");
  EXPECT_EQ(env.at("RANK"), "3");
  EXPECT_EQ(env.at("TRL_MACHINE_RANK"), "2");
  // Without it (a fixed-size job), GROUP_RANK is the machine rank.
  job.erase("GROUP_RANK");
  EXPECT_EQ(BuildWorkerEnvironment({}, job, rank).at("GROUP_RANK"), "2");
}

}  // namespace
}  // namespace trl

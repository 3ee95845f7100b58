#include "common/worker_environment.h"

#include <gtest/gtest.h>

#include "common/accelerate_config.h"
#include "common/rank_layout.h"

namespace trl {
namespace {

AccelerateConfig Load(const std::string& name) {
  auto config = LoadAccelerateConfigFile(
      std::string(TRL_SOURCE_DIR) + "/tests/data/accelerate_configs/" + name);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

JobEnvironmentInputs Inputs() {
  JobEnvironmentInputs inputs;
  inputs.job_id = "job-1";
  inputs.generation = 3;
  inputs.world_size = 16;
  inputs.max_restarts = 5;
  inputs.master_addr = "10.231.0.1";
  inputs.master_port = 41000;
  inputs.coordinator_address = "10.231.0.1:9999";
  return inputs;
}

// Every key of `expected` is in `env` with exactly that value.
void ExpectContains(const Environment& env, const Environment& expected) {
  for (const auto& [name, value] : expected) {
    auto it = env.find(name);
    if (it == env.end()) {
      ADD_FAILURE() << name << " is missing";
    } else {
      EXPECT_EQ(it->second, value) << name;
    }
  }
}

TEST(JobEnvironmentTest, TorchrunVariables) {
  AccelerateConfig config = Load("multi_gpu.yaml");
  config.num_machines = 2;
  const Environment env = BuildJobEnvironment(config, Inputs());
  ExpectContains(
      env, {{"WORLD_SIZE", "16"},
            {"ROLE_WORLD_SIZE", "16"},
            {"GROUP_WORLD_SIZE", "2"},
            {"ROLE_NAME", "default"},
            {"MASTER_ADDR", "10.231.0.1"},
            {"MASTER_PORT", "41000"},
            {"TORCHELASTIC_RESTART_COUNT", "3"},
            {"TORCHELASTIC_MAX_RESTARTS", "5"},
            {"TORCHELASTIC_RUN_ID", "job-1"},
            {"TORCHELASTIC_USE_AGENT_STORE", "False"},
            {"TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT"},
            {"TRL_JOB_ID", "job-1"},
            {"TRL_GENERATION", "3"},
            {"TRL_COORDINATOR_ADDR", "10.231.0.1:9999"}});
  EXPECT_EQ(env.count("TRL_NCCL_UNIQUE_ID"), 0u);
}

TEST(JobEnvironmentTest, NcclUniqueIdWhenGiven) {
  JobEnvironmentInputs inputs = Inputs();
  inputs.nccl_unique_id_hex = "abcd";
  const Environment env = BuildJobEnvironment(Load("multi_gpu.yaml"), inputs);
  EXPECT_EQ(env.at("TRL_NCCL_UNIQUE_ID"), "abcd");
}

TEST(JobEnvironmentTest, MultiGpuAsAccelerateSetsIt) {
  const Environment env = BuildJobEnvironment(Load("multi_gpu.yaml"), Inputs());
  ExpectContains(env,
                 {{"ACCELERATE_MIXED_PRECISION", "bf16"},
                  {"ACCELERATE_DYNAMO_BACKEND", "NO"},
                  {"ACCELERATE_DYNAMO_MODE", "default"},
                  {"ACCELERATE_DYNAMO_USE_FULLGRAPH", "False"},
                  {"ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION", "False"}});
  // Accelerate leaves it unset unless asked: torch.compile then decides.
  EXPECT_EQ(env.count("ACCELERATE_DYNAMO_USE_DYNAMIC"), 0u);
  EXPECT_EQ(env.count("ACCELERATE_USE_CPU"), 0u);
  EXPECT_EQ(env.count("ACCELERATE_USE_FSDP"), 0u);
  EXPECT_EQ(env.count("ACCELERATE_USE_DEEPSPEED"), 0u);
  EXPECT_EQ(env.count("ACCELERATE_DEBUG_MODE"), 0u);
}

TEST(JobEnvironmentTest, DeepSpeedAsAccelerateSetsIt) {
  const Environment env =
      BuildJobEnvironment(Load("deepspeed_zero3.yaml"), Inputs());
  ExpectContains(
      env, {{"ACCELERATE_USE_DEEPSPEED", "true"},
            {"ACCELERATE_MIXED_PRECISION", "bf16"},
            {"ACCELERATE_CONFIG_DS_FIELDS",
             "deepspeed_multinode_launcher,offload_optimizer_device,"
             "offload_param_device,zero3_init_flag,zero3_save_16bit_model,zero_"
             "stage,mixed_precision"},
            {"ACCELERATE_DEEPSPEED_ZERO_STAGE", "3"},
            {"ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "none"},
            {"ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE", "none"},
            {"ACCELERATE_DEEPSPEED_ZERO3_INIT", "true"},
            {"ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL", "true"}});
  // The DeepSpeed launcher sets no dynamo variables.
  EXPECT_EQ(env.count("ACCELERATE_DYNAMO_BACKEND"), 0u);
}

TEST(JobEnvironmentTest, DeepSpeedZero1GradientAccumulation) {
  const Environment env =
      BuildJobEnvironment(Load("deepspeed_zero1.yaml"), Inputs());
  ExpectContains(env, {{"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "1"},
                       {"ACCELERATE_DEEPSPEED_ZERO_STAGE", "1"},
                       {"ACCELERATE_DEEPSPEED_ZERO3_INIT", "false"}});
}

TEST(JobEnvironmentTest, FsdpAsAccelerateSetsIt) {
  const Environment env = BuildJobEnvironment(Load("fsdp1.yaml"), Inputs());
  ExpectContains(env, {{"ACCELERATE_USE_FSDP", "true"},
                       {"FSDP_VERSION", "1"},
                       {"FSDP_RESHARD_AFTER_FORWARD", "full_shard"},
                       {"FSDP_OFFLOAD_PARAMS", "false"},
                       {"FSDP_AUTO_WRAP_POLICY", "TRANSFORMER_BASED_WRAP"},
                       {"FSDP_BACKWARD_PREFETCH", "BACKWARD_PRE"},
                       {"FSDP_STATE_DICT_TYPE", "FULL_STATE_DICT"},
                       {"FSDP_FORWARD_PREFETCH", "true"},
                       {"FSDP_USE_ORIG_PARAMS", "true"},
                       {"FSDP_CPU_RAM_EFFICIENT_LOADING", "true"},
                       {"FSDP_SYNC_MODULE_STATES", "true"},
                       {"FSDP_ACTIVATION_CHECKPOINTING", "false"},
                       {"FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD", "false"},
                       {"FSDP_SHARDING_STRATEGY", "FULL_SHARD"},
                       {"ACCELERATE_DYNAMO_BACKEND", "NO"}});
  const Environment env2 = BuildJobEnvironment(Load("fsdp2.yaml"), Inputs());
  ExpectContains(
      env2, {{"FSDP_VERSION", "2"}, {"FSDP_RESHARD_AFTER_FORWARD", "true"}});
}

TEST(JobEnvironmentTest, CpuRunsSayCpu) {
  AccelerateConfig config;
  config.distributed_type = "MULTI_CPU";
  config.use_cpu = true;
  config.debug = true;
  const Environment env = BuildJobEnvironment(config, Inputs());
  ExpectContains(env, {{"ACCELERATE_USE_CPU", "True"},
                       {"ACCELERATE_MIXED_PRECISION", "no"},
                       {"ACCELERATE_DEBUG_MODE", "true"}});
}

TEST(WorkerEnvironmentTest, RankVariables) {
  RankEnvironmentInputs inputs;
  inputs.machine_rank = 1;
  inputs.rank_offset = 8;
  inputs.local_world_size = 8;
  inputs.local_rank = 3;
  inputs.interface_name = "eth1";
  inputs.error_file = "/tmp/e.json";
  inputs.heartbeat_file = "/tmp/hb";
  const Environment env = BuildWorkerEnvironment(
      {{"PATH", "/bin"}}, {{"WORLD_SIZE", "16"}}, inputs);
  ExpectContains(env, {{"PATH", "/bin"},
                       {"WORLD_SIZE", "16"},
                       {"RANK", "11"},
                       {"ROLE_RANK", "11"},
                       {"LOCAL_RANK", "3"},
                       {"LOCAL_WORLD_SIZE", "8"},
                       {"GROUP_RANK", "1"},
                       {"TORCHELASTIC_ERROR_FILE", "/tmp/e.json"},
                       {"TRL_HEARTBEAT_FILE", "/tmp/hb"},
                       {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
                       {"OMP_NUM_THREADS", "1"},
                       {"NCCL_SOCKET_IFNAME", "eth1"},
                       {"GLOO_SOCKET_IFNAME", "eth1"}});
  EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 0u);  // gpu_ids: all
}

TEST(WorkerEnvironmentTest, UserSettingsWin) {
  RankEnvironmentInputs inputs;
  inputs.local_world_size = 2;
  inputs.interface_name = "eth1";
  const Environment env =
      BuildWorkerEnvironment({{"OMP_NUM_THREADS", "8"},
                              {"NCCL_SOCKET_IFNAME", "ib0"},
                              {"GLOO_SOCKET_IFNAME", "ib0"},
                              {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"},
                              {"RANK", "99"}},
                             {{"WORLD_SIZE", "2"}}, inputs);
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "8");
  EXPECT_EQ(env.at("NCCL_SOCKET_IFNAME"), "ib0");
  EXPECT_EQ(env.at("GLOO_SOCKET_IFNAME"), "ib0");
  EXPECT_EQ(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "0");
  EXPECT_EQ(env.at("RANK"), "0");  // the launcher's own variables always win
}

TEST(WorkerEnvironmentTest, TheClusterTokenIsNeverPassedOn) {
  const Environment env = BuildWorkerEnvironment(
      {{"TRL_AUTH_TOKEN", "cluster-secret"}, {"HOME", "/home/u"}},
      {{"TRL_STORE_TOKEN", "generation-secret"}}, RankEnvironmentInputs{});
  EXPECT_EQ(env.count("TRL_AUTH_TOKEN"), 0u);
  EXPECT_EQ(env.at("TRL_STORE_TOKEN"), "generation-secret");
  EXPECT_EQ(env.at("HOME"), "/home/u");
}

TEST(WorkerEnvironmentTest, OneGpuProcessPerNodeGetsOneThreadAsInAccelerate) {
  RankEnvironmentInputs inputs;
  inputs.local_world_size = 1;
  const Environment job = BuildJobEnvironment(Load("multi_gpu.yaml"), Inputs());
  EXPECT_EQ(BuildWorkerEnvironment({}, job, inputs).at("OMP_NUM_THREADS"), "1");
}

// A CPU config with `local` processes per machine, each machine with 8
// physical cores.
Environment CpuWorker(const AccelerateConfig& config, int local,
                      const Environment& inherited = {}) {
  RankEnvironmentInputs inputs;
  inputs.local_world_size = local;
  inputs.physical_cores = 8;
  return BuildWorkerEnvironment(inherited,
                                BuildJobEnvironment(config, Inputs()), inputs);
}

TEST(WorkerEnvironmentTest, CpuProcessesShareThePhysicalCoresAsInAccelerate) {
  AccelerateConfig config;
  config.distributed_type = "MULTI_CPU";
  config.use_cpu = true;
  config.num_processes = 4;
  EXPECT_EQ(CpuWorker(config, 2).at("OMP_NUM_THREADS"), "4");
  EXPECT_EQ(CpuWorker(config, 3).at("OMP_NUM_THREADS"), "2");
  EXPECT_EQ(CpuWorker(config, 16).at("OMP_NUM_THREADS"), "1");
  EXPECT_EQ(CpuWorker(config, 2).count(kOmpShareOfPhysicalCores), 0u);
  // The user's own OMP_NUM_THREADS wins over the share ...
  EXPECT_EQ(
      CpuWorker(config, 2, {{"OMP_NUM_THREADS", "3"}}).at("OMP_NUM_THREADS"),
      "3");
  // ... and --num_cpu_threads_per_process over both.
  config.num_cpu_threads_per_process = 6;
  EXPECT_EQ(
      CpuWorker(config, 2, {{"OMP_NUM_THREADS", "3"}}).at("OMP_NUM_THREADS"),
      "6");
  // Accelerate's CPU launcher also pins OpenMP.
  ExpectContains(BuildJobEnvironment(config, Inputs()),
                 {{"KMP_AFFINITY", "granularity=fine,compact,1,0"},
                  {"KMP_BLOCKTIME", "1"}});
}

TEST(WorkerEnvironmentTest, ThreadsFlagAlsoForGpuJobsButNotDeepSpeed) {
  AccelerateConfig config = Load("multi_gpu.yaml");
  config.num_cpu_threads_per_process = 5;
  EXPECT_EQ(CpuWorker(config, 2).at("OMP_NUM_THREADS"), "5");
  // Accelerate's DeepSpeed launcher leaves it to torchrun: 1 with several
  // local processes, nothing with one.
  config = Load("deepspeed_zero3.yaml");
  config.num_cpu_threads_per_process = 5;
  EXPECT_EQ(CpuWorker(config, 2).at("OMP_NUM_THREADS"), "1");
  EXPECT_EQ(CpuWorker(config, 1).count("OMP_NUM_THREADS"), 0u);
}

TEST(JobEnvironmentTest, DynamoSettingsFromTheFile) {
  AccelerateConfig config = Load("multi_gpu.yaml");
  config.dynamo_config = {{"dynamo_backend", "INDUCTOR"},
                          {"dynamo_use_dynamic", "false"},
                          {"dynamo_use_regional_compilation", "true"}};
  ExpectContains(BuildJobEnvironment(config, Inputs()),
                 {{"ACCELERATE_DYNAMO_BACKEND", "INDUCTOR"},
                  {"ACCELERATE_DYNAMO_USE_DYNAMIC", "False"},
                  {"ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION", "True"}});
}

TEST(WorkerEnvironmentTest, TheFlightRecorderDumpsInTheRunDirectory) {
  RankEnvironmentInputs inputs;
  inputs.flight_recorder_stem = "/logs/job/gen2/nccl_flight_recorder.rank";
  const Environment env =
      BuildWorkerEnvironment({}, {{"WORLD_SIZE", "2"}}, inputs);
  const std::string stem = inputs.flight_recorder_stem;
  // Both names of each setting: PyTorch 2.6+ and the versions before.
  ExpectContains(env, {{"TORCH_FR_BUFFER_SIZE", "2000"},
                       {"TORCH_NCCL_TRACE_BUFFER_SIZE", "2000"},
                       {"TORCH_NCCL_DUMP_ON_TIMEOUT", "1"},
                       {"TORCH_FR_DUMP_TEMP_FILE", stem},
                       {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", stem},
                       {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", stem}});
}

TEST(WorkerEnvironmentTest,
     AFlightRecorderSettingOfTheUsersIsKeptUnderAnyName) {
  RankEnvironmentInputs inputs;
  inputs.flight_recorder_stem = "/logs/job/gen2/nccl_flight_recorder.rank";
  // The user turned the recorder off under the old name, and dumps to a
  // place of their own under the new one: neither is overridden by the
  // other name of its pair, which newer PyTorch would read first.
  const Environment env =
      BuildWorkerEnvironment({{"TORCH_NCCL_TRACE_BUFFER_SIZE", "0"},
                              {"TORCH_FR_DUMP_TEMP_FILE", "/scratch/fr_"}},
                             {{"WORLD_SIZE", "2"}}, inputs);
  EXPECT_EQ(env.count("TORCH_FR_BUFFER_SIZE"), 0u);
  EXPECT_EQ(env.at("TORCH_NCCL_TRACE_BUFFER_SIZE"), "0");
  EXPECT_EQ(env.at("TORCH_FR_DUMP_TEMP_FILE"), "/scratch/fr_");
  EXPECT_EQ(env.count("TORCH_NCCL_DEBUG_INFO_TEMP_FILE"), 0u);
  EXPECT_EQ(env.at("TORCH_NCCL_DEBUG_INFO_PIPE_FILE"),
            inputs.flight_recorder_stem);
  // Dump-on-timeout off: the pipe would be read every 8 minutes, not every
  // second, so it is not made either.
  const Environment off = BuildWorkerEnvironment(
      {{"TORCH_NCCL_DUMP_ON_TIMEOUT", "0"}}, {{"WORLD_SIZE", "2"}}, inputs);
  EXPECT_EQ(off.at("TORCH_NCCL_DUMP_ON_TIMEOUT"), "0");
  EXPECT_EQ(off.count("TORCH_NCCL_DEBUG_INFO_PIPE_FILE"), 0u);
  EXPECT_EQ(off.at("TORCH_FR_BUFFER_SIZE"), "2000");
}

TEST(WorkerEnvironmentTest,
     NoFlightRecorderForAPlainProcessOrWithoutARunDirectory) {
  RankEnvironmentInputs inputs;
  inputs.flight_recorder_stem = "/logs/job/gen0/nccl_flight_recorder.rank";
  EXPECT_EQ(BuildWorkerEnvironment({}, {}, inputs)
                .count("TORCH_NCCL_DEBUG_INFO_PIPE_FILE"),
            0u);
  EXPECT_EQ(
      BuildWorkerEnvironment({}, {{"WORLD_SIZE", "2"}}, RankEnvironmentInputs{})
          .count("TORCH_NCCL_DEBUG_INFO_PIPE_FILE"),
      0u);
}

TEST(JobEnvironmentTest, NoWithOneProcessIsAPlainProcess) {
  // Accelerate's plain launcher: no torchrun variables, so the script sees
  // DistributedType.NO, not a world of one.
  const Environment job =
      BuildJobEnvironment(Load("single_gpu.yaml"), Inputs());
  for (const char* name :
       {"WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "ROLE_NAME",
        "GROUP_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
        "TORCHELASTIC_RESTART_COUNT"}) {
    EXPECT_EQ(job.count(name), 0u) << name;
  }
  ExpectContains(job, {{"ACCELERATE_USE_CPU", "False"},
                       {"ACCELERATE_MIXED_PRECISION", "bf16"},
                       {"ACCELERATE_DYNAMO_BACKEND", "NO"},
                       {"TRL_JOB_ID", "job-1"}});
  RankEnvironmentInputs inputs;
  inputs.gpu_ids = "1";
  inputs.error_file = "/tmp/e.json";
  const Environment env = BuildWorkerEnvironment({}, job, inputs);
  for (const char* name :
       {"RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "ROLE_RANK",
        "TORCHELASTIC_ERROR_FILE", "GROUP_RANK"}) {
    EXPECT_EQ(env.count(name), 0u) << name;
  }
  ExpectContains(env, {{"TRL_MACHINE_RANK", "0"},
                       {"OMP_NUM_THREADS", "1"},
                       {"CUDA_VISIBLE_DEVICES", "1"}});
}

TEST(JobEnvironmentTest, MultiCpuWithOneProcessIsAPlainProcess) {
  // Accelerate runs MULTI_CPU through its plain launcher too: one process
  // is an ordinary one; more need mpirun (trl-launch starts them itself).
  AccelerateConfig config = Load("single_gpu.yaml");
  config.distributed_type = "MULTI_CPU";
  const Environment one = BuildJobEnvironment(config, Inputs());
  EXPECT_EQ(one.count("WORLD_SIZE"), 0u);
  EXPECT_EQ(one.count("MASTER_ADDR"), 0u);
  ExpectContains(one, {{"ACCELERATE_USE_CPU", "True"}});
  config.num_processes = 2;
  const Environment two = BuildJobEnvironment(config, Inputs());
  ExpectContains(two, {{"WORLD_SIZE", "16"}, {"ACCELERATE_USE_CPU", "True"}});
}

TEST(JobEnvironmentTest, DeepSpeedAndFsdpWithUseCpuKeepTheirVariables) {
  // Accelerate picks the launcher by distributed_type; use_cpu from the
  // file only gives the processes their share of the cores.
  AccelerateConfig deepspeed = Load("deepspeed_zero3.yaml");
  deepspeed.use_cpu = true;
  Environment env = BuildJobEnvironment(deepspeed, Inputs());
  ExpectContains(env, {{"ACCELERATE_USE_DEEPSPEED", "true"},
                       {"ACCELERATE_DEEPSPEED_ZERO_STAGE", "3"}});
  EXPECT_EQ(env.count("ACCELERATE_USE_CPU"), 0u);
  AccelerateConfig fsdp = Load("fsdp1.yaml");
  fsdp.use_cpu = true;
  env = BuildJobEnvironment(fsdp, Inputs());
  ExpectContains(env, {{"ACCELERATE_USE_FSDP", "true"},
                       {"FSDP_VERSION", "1"},
                       {"ACCELERATE_DYNAMO_BACKEND", "NO"}});
  EXPECT_EQ(env.count("ACCELERATE_USE_CPU"), 0u);
  EXPECT_EQ(CpuWorker(fsdp, 2).at("OMP_NUM_THREADS"), "4");
  // The --cpu flag does override: Accelerate's CPU launcher.
  fsdp.cpu_flag = true;
  env = BuildJobEnvironment(fsdp, Inputs());
  EXPECT_EQ(env.at("ACCELERATE_USE_CPU"), "True");
  EXPECT_EQ(env.count("ACCELERATE_USE_FSDP"), 0u);
}

TEST(WorkerEnvironmentTest, GpuIdsBecomeCudaVisibleDevices) {
  RankEnvironmentInputs inputs;
  inputs.gpu_ids = "0,2";
  EXPECT_EQ(BuildWorkerEnvironment({}, {}, inputs).at("CUDA_VISIBLE_DEVICES"),
            "0,2");
  // Not for CPU runs.
  EXPECT_EQ(BuildWorkerEnvironment({}, {{"ACCELERATE_USE_CPU", "True"}}, inputs)
                .count("CUDA_VISIBLE_DEVICES"),
            0u);
}

TEST(WorkerEnvironmentTest, DeepSpeedAddsLaunchDirectoryToPythonPath) {
  RankEnvironmentInputs inputs;
  inputs.working_directory = "/work/run";
  const Environment env =
      BuildWorkerEnvironment({{"PYTHONPATH", "/opt/lib"}},
                             {{"ACCELERATE_USE_DEEPSPEED", "true"}}, inputs);
  EXPECT_EQ(env.at("PYTHONPATH"), "/opt/lib:/work/run");
}

TEST(RankLayoutTest, ContiguousPerMachineInMachineRankOrder) {
  const RankLayout layout = ComputeRankLayout({4, 4, 2});
  EXPECT_EQ(layout.world_size, 10);
  EXPECT_EQ(layout.rank_offsets, (std::vector<int>{0, 4, 8}));
  EXPECT_EQ(ComputeRankLayout({}).world_size, 0);
}

}  // namespace
}  // namespace trl

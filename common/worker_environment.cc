#include "common/worker_environment.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"

namespace trl {
namespace {

std::string Lower(const std::string& text) {
  return absl::AsciiStrToLower(text);
}

// Python's str(bool) spelling, which Accelerate uses for some variables.
std::string PythonBool(const std::string& text) {
  return Lower(text) == "true" ? "True" : "False";
}

void AddDynamoVariables(const AccelerateConfig& config, Environment& env) {
  const auto& dynamo = config.dynamo_config;
  env["ACCELERATE_DYNAMO_BACKEND"] = absl::AsciiStrToUpper(
      AccelerateConfig::Lookup(dynamo, "dynamo_backend", "no"));
  env["ACCELERATE_DYNAMO_MODE"] =
      AccelerateConfig::Lookup(dynamo, "dynamo_mode", "default");
  env["ACCELERATE_DYNAMO_USE_FULLGRAPH"] = PythonBool(
      AccelerateConfig::Lookup(dynamo, "dynamo_use_fullgraph", "false"));
  // Unset unless the file or the flag says: torch.compile then decides.
  if (const std::string dynamic =
          AccelerateConfig::Lookup(dynamo, "dynamo_use_dynamic", "");
      !dynamic.empty()) {
    env["ACCELERATE_DYNAMO_USE_DYNAMIC"] = PythonBool(dynamic);
  }
  env["ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION"] =
      PythonBool(AccelerateConfig::Lookup(
          dynamo, "dynamo_use_regional_compilation", "false"));
}

void AddFsdpVariables(const AccelerateConfig& config, Environment& env) {
  const auto& fsdp = config.fsdp_config;
  auto get = [&fsdp](const std::string& key, const std::string& fallback) {
    return AccelerateConfig::Lookup(fsdp, key, fallback);
  };
  env["ACCELERATE_USE_FSDP"] = "true";
  env["FSDP_VERSION"] = get("fsdp_version", "1");
  // Accelerate 1.16 exports these always, with its parser's defaults.
  env["FSDP_SHARDING_STRATEGY"] = get("fsdp_sharding_strategy", "FULL_SHARD");
  env["FSDP_RESHARD_AFTER_FORWARD"] =
      Lower(get("fsdp_reshard_after_forward", "true"));
  env["FSDP_OFFLOAD_PARAMS"] = Lower(get("fsdp_offload_params", "false"));
  env["FSDP_MIN_NUM_PARAMS"] = get("fsdp_min_num_params", "100000000");
  const std::vector<std::pair<std::string, std::string>> optional = {
      {"fsdp_auto_wrap_policy", "FSDP_AUTO_WRAP_POLICY"},
      {"fsdp_transformer_layer_cls_to_wrap", "FSDP_TRANSFORMER_CLS_TO_WRAP"},
      {"fsdp_backward_prefetch", "FSDP_BACKWARD_PREFETCH"},
      {"fsdp_state_dict_type", "FSDP_STATE_DICT_TYPE"},
      {"fsdp_ignored_modules", "FSDP_IGNORED_MODULES"},
  };
  for (const auto& [key, name] : optional) {
    if (const std::string v = get(key, ""); !v.empty()) env[name] = v;
  }
  env["FSDP_FORWARD_PREFETCH"] = Lower(get("fsdp_forward_prefetch", "false"));
  env["FSDP_USE_ORIG_PARAMS"] = Lower(get("fsdp_use_orig_params", "true"));
  env["FSDP_CPU_RAM_EFFICIENT_LOADING"] =
      Lower(get("fsdp_cpu_ram_efficient_loading", "true"));
  env["FSDP_SYNC_MODULE_STATES"] =
      Lower(get("fsdp_sync_module_states", "true"));
  env["FSDP_ACTIVATION_CHECKPOINTING"] =
      Lower(get("fsdp_activation_checkpointing", "false"));
  env["FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD"] =
      Lower(get("fsdp_activation_checkpointing_offload", "false"));
}

void AddDeepSpeedVariables(const AccelerateConfig& config, Environment& env) {
  const auto& ds = config.deepspeed_config;
  std::vector<std::string> fields;
  for (const auto& [key, value] : ds) fields.push_back(key);
  if (config.mixed_precision_from_file) fields.push_back("mixed_precision");
  env["ACCELERATE_CONFIG_DS_FIELDS"] = Lower(absl::StrJoin(fields, ","));
  env["ACCELERATE_USE_DEEPSPEED"] = "true";
  struct Mapping {
    const char* key;
    const char* name;
    bool lower;
  };
  const Mapping mappings[] = {
      {"zero_stage", "ACCELERATE_DEEPSPEED_ZERO_STAGE", false},
      {"gradient_accumulation_steps", "ACCELERATE_GRADIENT_ACCUMULATION_STEPS",
       false},
      {"gradient_clipping", "ACCELERATE_GRADIENT_CLIPPING", true},
      {"offload_optimizer_device",
       "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", true},
      {"offload_param_device", "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE",
       true},
      {"zero3_init_flag", "ACCELERATE_DEEPSPEED_ZERO3_INIT", true},
      {"zero3_save_16bit_model", "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL",
       true},
      {"deepspeed_config_file", "ACCELERATE_DEEPSPEED_CONFIG_FILE", false},
      {"deepspeed_moe_layer_cls_names",
       "ACCELERATE_DEEPSPEED_MOE_LAYER_CLS_NAMES", false},
  };
  for (const auto& m : mappings) {
    const std::string value = AccelerateConfig::Lookup(ds, m.key, "");
    if (!value.empty()) env[m.name] = m.lower ? Lower(value) : value;
  }
}

// PyTorch's NCCL flight recorder, on and dumping under `stem`, for every
// setting the user left alone. A setting is a group of variables (PyTorch
// 2.6 renamed some and reads the new name first; the pipe is read once a
// second only with dump-on-timeout on): a user's value for any variable of
// a group leaves the whole group as it is.
void AddFlightRecorderVariables(const Environment& inherited,
                                const std::string& stem, Environment& env) {
  using Group = std::vector<std::pair<const char*, std::string>>;
  const std::vector<Group> settings = {
      {{"TORCH_FR_BUFFER_SIZE", "2000"},
       {"TORCH_NCCL_TRACE_BUFFER_SIZE", "2000"}},
      {{"TORCH_NCCL_DUMP_ON_TIMEOUT", "1"},
       {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", stem}},
      {{"TORCH_FR_DUMP_TEMP_FILE", stem},
       {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", stem}},
  };
  for (const Group& group : settings) {
    const bool users = std::any_of(
        group.begin(), group.end(),
        [&inherited](const auto& v) { return inherited.count(v.first) > 0; });
    if (users) continue;
    for (const auto& [name, value] : group) env[name] = value;
  }
}

}  // namespace

int LocalPhysicalCoreCount() {
  std::set<std::string> cores;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator("/sys/devices/system/cpu", error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 4 || name.compare(0, 3, "cpu") != 0 ||
        !std::all_of(name.begin() + 3, name.end(),
                     [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    for (const char* file : {"core_cpus_list", "thread_siblings_list"}) {
      std::ifstream in(entry.path() / "topology" / file);
      std::string siblings;
      if (in >> siblings) {
        cores.insert(siblings);
        break;
      }
    }
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  return std::max(1u, std::thread::hardware_concurrency());
}

Environment BuildJobEnvironment(const AccelerateConfig& config,
                                const JobEnvironmentInputs& in) {
  Environment env;
  // distributed_type NO or MULTI_CPU with one process: Accelerate's plain
  // launcher starts the script as an ordinary process (DistributedType.NO),
  // without torchrun's variables, which would make it a world of one.
  const bool plain = (config.distributed_type == "NO" ||
                      config.distributed_type == "MULTI_CPU") &&
                     config.num_processes == 1 && config.num_machines == 1;
  if (!plain) {
    const std::string world = std::to_string(in.world_size);
    env["WORLD_SIZE"] = world;
    env["ROLE_WORLD_SIZE"] = world;
    env["GROUP_WORLD_SIZE"] = std::to_string(
        in.num_machines > 0 ? in.num_machines : config.num_machines);
    env["ROLE_NAME"] = config.role;
    env["MASTER_ADDR"] = in.master_addr;
    env["MASTER_PORT"] = std::to_string(in.master_port);
    // The job's global generation: every rank of a generation agrees on it.
    env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(in.generation);
    env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(in.max_restarts);
    env["TORCHELASTIC_RUN_ID"] = in.job_id;
    env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
    // torchrun's launcher exports the signals it forwards (its default
    // list), and its workers inherit them.
    env["TORCHELASTIC_SIGNALS_TO_HANDLE"] = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
  }

  env["ACCELERATE_MIXED_PRECISION"] = config.mixed_precision;
  if (config.debug) env["ACCELERATE_DEBUG_MODE"] = "true";
  if (config.enable_cpu_affinity) env["ACCELERATE_CPU_AFFINITY"] = "1";
  // Accelerate picks its launcher by distributed_type; only the --cpu flag
  // overrides that (use_cpu from the file does not make a DeepSpeed or FSDP
  // job a CPU one). NO and MULTI_CPU run its plain (CPU) launcher.
  const bool simple_launcher = config.cpu_flag ||
                               config.distributed_type == "NO" ||
                               config.distributed_type == "MULTI_CPU";
  const bool deepspeed =
      !simple_launcher && config.distributed_type == "DEEPSPEED";
  if (simple_launcher) {
    const bool cpu = config.use_cpu || config.distributed_type == "MULTI_CPU";
    env["ACCELERATE_USE_CPU"] = cpu ? "True" : "False";
    if (cpu) {
      env["KMP_AFFINITY"] = "granularity=fine,compact,1,0";
      env["KMP_BLOCKTIME"] = "1";
    }
    AddDynamoVariables(config, env);
  } else if (deepspeed) {
    AddDeepSpeedVariables(config, env);
  } else {
    AddDynamoVariables(config, env);
    if (config.distributed_type == "FSDP") AddFsdpVariables(config, env);
    if (config.distributed_type == "MEGATRON_LM") {
      env["ACCELERATE_USE_MEGATRON_LM"] = "true";
    }
  }
  // OMP_NUM_THREADS: Accelerate's DeepSpeed launcher leaves it to torchrun
  // (1 with several local processes); the others set
  // --num_cpu_threads_per_process, else the inherited value, else for CPU
  // jobs (use_cpu) each process's share of the physical cores, else 1.
  if (!deepspeed) {
    if (config.num_cpu_threads_per_process > 0) {
      env["OMP_NUM_THREADS"] =
          std::to_string(config.num_cpu_threads_per_process);
    } else if (config.use_cpu) {
      env[kOmpShareOfPhysicalCores] = "1";
    }
  }

  env["TRL_JOB_ID"] = in.job_id;
  env["TRL_GENERATION"] = std::to_string(in.generation);
  env["TRL_COORDINATOR_ADDR"] = in.coordinator_address;
  if (!in.nccl_unique_id_hex.empty()) {
    env["TRL_NCCL_UNIQUE_ID"] = in.nccl_unique_id_hex;
  }
  if (!in.store_token.empty()) env["TRL_STORE_TOKEN"] = in.store_token;
  return env;
}

Environment BuildWorkerEnvironment(const Environment& inherited,
                                   const Environment& job_environment,
                                   const RankEnvironmentInputs& in) {
  Environment env = inherited;
  // The cluster's token opens every node; a worker gets at most its
  // generation's store token.
  env.erase("TRL_AUTH_TOKEN");
  for (const auto& [name, value] : job_environment) env[name] = value;
  const bool share_of_cores = env.erase(kOmpShareOfPhysicalCores) > 0;
  auto set_unless_inherited = [&](const std::string& name,
                                  const std::string& value) {
    if (inherited.count(name) == 0 && !value.empty()) env[name] = value;
  };

  const bool distributed = job_environment.count("WORLD_SIZE") > 0;
  if (distributed) {
    const int rank = in.rank_offset + in.local_rank;
    env["RANK"] = std::to_string(rank);
    env["ROLE_RANK"] = std::to_string(rank);
    env["LOCAL_RANK"] = std::to_string(in.local_rank);
    env["LOCAL_WORLD_SIZE"] = std::to_string(in.local_world_size);
    if (!in.error_file.empty()) env["TORCHELASTIC_ERROR_FILE"] = in.error_file;
    set_unless_inherited("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
    if (!in.flight_recorder_stem.empty()) {
      AddFlightRecorderVariables(inherited, in.flight_recorder_stem, env);
    }
    // An elastic generation's job environment gives the machine's place
    // among its members; otherwise it is the machine rank.
    if (job_environment.count("GROUP_RANK") == 0) {
      env["GROUP_RANK"] = std::to_string(in.machine_rank);
    }
  }
  // Also for a plain process (which Accelerate gives no GROUP_RANK): an
  // agent finds what an earlier agent of its machine left running by it
  // (stale_workers.cc).
  if (!in.heartbeat_file.empty()) env["TRL_HEARTBEAT_FILE"] = in.heartbeat_file;
  env["TRL_MACHINE_RANK"] = std::to_string(in.machine_rank);

  if (job_environment.count("OMP_NUM_THREADS") == 0) {
    const bool deepspeed = job_environment.count("ACCELERATE_USE_DEEPSPEED");
    if (deepspeed) {
      // torchrun's own default.
      if (in.local_world_size > 1) set_unless_inherited("OMP_NUM_THREADS", "1");
    } else {
      int threads = 1;
      if (share_of_cores) {
        const int cores = in.physical_cores > 0 ? in.physical_cores
                                                : LocalPhysicalCoreCount();
        threads = std::max(1, cores / std::max(1, in.local_world_size));
      }
      set_unless_inherited("OMP_NUM_THREADS", std::to_string(threads));
    }
  }
  set_unless_inherited("NCCL_SOCKET_IFNAME", in.interface_name);
  set_unless_inherited("GLOO_SOCKET_IFNAME", in.interface_name);

  auto use_cpu = job_environment.find("ACCELERATE_USE_CPU");
  const bool uses_gpus =
      use_cpu == job_environment.end() || use_cpu->second != "True";
  if (uses_gpus && !in.gpu_ids.empty() && in.gpu_ids != "all") {
    env["CUDA_VISIBLE_DEVICES"] = in.gpu_ids;
  }
  if (job_environment.count("ACCELERATE_USE_DEEPSPEED") &&
      !in.working_directory.empty()) {
    // As Accelerate's DeepSpeed launcher: the launch directory is importable.
    auto it = inherited.find("PYTHONPATH");
    env["PYTHONPATH"] = (it == inherited.end() || it->second.empty())
                            ? in.working_directory
                            : it->second + ":" + in.working_directory;
  }
  return env;
}

}  // namespace trl

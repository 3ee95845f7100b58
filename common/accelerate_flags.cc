#include "common/accelerate_flags.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace trl {
namespace {

// Why each group of flags is refused; the flags themselves follow.
constexpr char kTpu[] =
    "TPU launches are not supported: trl-launch runs LOCAL_MACHINE GPU and "
    "CPU jobs";
constexpr char kNotSupportedHardware[] =
    "Intel IPEX/XPU launches are not supported: trl-launch runs CUDA GPU and "
    "CPU jobs";
constexpr char kSageMaker[] =
    "Amazon SageMaker launches are not supported: run trl-coord start on "
    "machine 0 and trl-agent on the others";
constexpr char kMpirun[] =
    "trl-launch starts every machine's CPU workers itself (trl-agent on each "
    "machine); there is no mpirun and no hostfile";
constexpr char kDeepSpeedRunner[] =
    "trl-launch starts every machine's workers itself (trl-agent on each "
    "machine); DeepSpeed's multi-node runner and its hostfile are not used";
constexpr char kRendezvous[] =
    "the coordinator is the rendezvous; torchrun's rendezvous settings do "
    "not apply";
constexpr char kTee[] =
    "worker output always reaches the console with [rank N], and with "
    "--log_dir also DIR/<job>/gen<G>/rank<R>.log";
constexpr char kNotPassedOn[] =
    "trl-launch does not pass these settings on to the workers";

std::vector<AccelerateLaunchFlag> BuildTable() {
  std::vector<AccelerateLaunchFlag> table;
  auto honoured = [&](std::string name, bool value,
                      std::string short_name = "") {
    table.push_back({std::move(name), std::move(short_name), value, true, ""});
  };
  auto refused = [&](std::string name, bool value, std::string reason,
                     std::string short_name = "") {
    table.push_back({std::move(name), std::move(short_name), value, false,
                     std::move(reason)});
  };
  auto in_file = [](const std::string& section, const std::string& key) {
    return absl::StrCat("set ", section, ".", key,
                        " in the config file instead (trl-launch reads "
                        "DeepSpeed and FSDP settings from the file only)");
  };

  // Honoured: registered by AddLaunchFlags (launch_options.cc).
  honoured("--help", false, "-h");
  honoured("--config_file", true);
  honoured("--quiet", false, "-q");
  honoured("--cpu", false);
  honoured("--multi_gpu", false);
  honoured("--mixed_precision", true);
  honoured("--num_processes", true);
  honoured("--num_machines", true);
  honoured("--num_cpu_threads_per_process", true);
  honoured("--enable_cpu_affinity", false);
  honoured("--dynamo_backend", true);
  honoured("--dynamo_mode", true);
  honoured("--dynamo_use_fullgraph", false);
  honoured("--dynamo_use_dynamic", false);
  honoured("--dynamo_use_regional_compilation", false);
  honoured("--use_deepspeed", false);
  honoured("--use_fsdp", false);
  honoured("--use_megatron_lm", false);
  honoured("--gpu_ids", true);
  honoured("--same_network", false);
  honoured("--machine_rank", true);
  honoured("--main_process_ip", true);
  honoured("--main_process_port", true);
  honoured("--log_dir", true);
  honoured("--role", true);
  honoured("--rdzv_backend", true);
  honoured("--max_restarts", true);
  honoured("--monitor_interval", true);
  honoured("--module", false, "-m");
  honoured("--no_python", false);
  honoured("--debug", false);

  refused("--tee", true, kTee, "-t");
  refused("--rdzv_conf", true, kRendezvous);
  for (const char* name : {"--tpu", "--tpu_cluster", "--no_tpu_cluster",
                           "--tpu_use_sudo", "--downcast_bf16"}) {
    refused(name, false, kTpu);
  }
  for (const char* name : {"--vm", "--env", "--main_training_function"}) {
    refused(name, true, kTpu);
  }
  refused("--ipex", false, kNotSupportedHardware);
  refused("--use_xpu", false, kNotSupportedHardware);
  refused("--aws_access_key_id", true, kSageMaker);
  refused("--aws_secret_access_key", true, kSageMaker);
  refused("--mpirun_hostfile", true, kMpirun);
  refused("--mpirun_ccl", true, kMpirun);
  for (const char* name :
       {"--deepspeed_hostfile", "--deepspeed_exclusion_filter",
        "--deepspeed_inclusion_filter", "--deepspeed_multinode_launcher"}) {
    refused(name, true, kDeepSpeedRunner);
  }
  for (const char* key :
       {"deepspeed_config_file", "zero_stage", "offload_optimizer_device",
        "offload_param_device", "offload_optimizer_nvme_path",
        "offload_param_nvme_path", "gradient_accumulation_steps",
        "gradient_clipping", "zero3_init_flag", "zero3_save_16bit_model",
        "deepspeed_moe_layer_cls_names"}) {
    refused(absl::StrCat("--", key), true, in_file("deepspeed_config", key));
  }
  for (const char* key :
       {"fsdp_version", "fsdp_offload_params", "fsdp_min_num_params",
        "fsdp_sharding_strategy", "fsdp_reshard_after_forward",
        "fsdp_auto_wrap_policy", "fsdp_transformer_layer_cls_to_wrap",
        "fsdp_backward_prefetch", "fsdp_state_dict_type",
        "fsdp_forward_prefetch", "fsdp_use_orig_params",
        "fsdp_cpu_ram_efficient_loading", "fsdp_sync_module_states",
        "fsdp_activation_checkpointing",
        "fsdp_activation_checkpointing_offload"}) {
    refused(absl::StrCat("--", key), true, in_file("fsdp_config", key));
  }
  const std::string megatron =
      absl::StrCat("Megatron-LM's parallelism settings: ", kNotPassedOn,
                   " (nor megatron_lm_config from the file)");
  for (const char* key : {"tp_degree",
                          "pp_degree",
                          "num_micro_batches",
                          "sequence_parallelism",
                          "recompute_activations",
                          "use_distributed_optimizer",
                          "gradient_clipping",
                          "attention_backend",
                          "attention_dropout",
                          "attention_softmax_in_fp32",
                          "calculate_per_token_loss",
                          "context_parallel_size",
                          "decoder_last_pipeline_num_layers",
                          "eod_mask_loss",
                          "expert_model_parallel_size",
                          "expert_tensor_parallel_size",
                          "hidden_dropout",
                          "no_load_optim",
                          "no_save_optim",
                          "optimizer_cpu_offload",
                          "overlap_cpu_optimizer_d2h_h2d",
                          "recompute_granularity",
                          "recompute_method",
                          "recompute_num_layers",
                          "use_custom_fsdp",
                          "use_precision_aware_optimizer",
                          "use_rotary_position_embeddings"}) {
    refused(absl::StrCat("--megatron_lm_", key), true, megatron);
  }
  const std::string fp8 = absl::StrCat("FP8 recipe settings: ", kNotPassedOn,
                                       " (nor fp8_config from the file)");
  for (const char* key :
       {"backend", "margin", "interval", "format", "amax_history_len",
        "amax_compute_algo", "override_linear_precision", "opt_level",
        "enable_fsdp_float8_all_gather", "pad_inner_dim"}) {
    refused(absl::StrCat("--fp8_", key), true, fp8);
  }
  refused("--fp8_use_autocast_during_eval", false, fp8);
  const std::string parallelism = absl::StrCat(
      "tensor, context and sequence parallelism settings: ", kNotPassedOn,
      " (nor parallelism_config from the file)");
  refused("--use_tp", false, parallelism);
  refused("--use_parallelism_config", false, parallelism);
  refused("--tp_size", true, parallelism);
  for (const char* key :
       {"dp_replicate_size", "dp_shard_size", "tp_size", "cp_size",
        "cp_backend", "cp_comm_strategy", "sp_size", "sp_backend",
        "sp_seq_length", "sp_seq_length_is_variable",
        "sp_attn_implementation"}) {
    refused(absl::StrCat("--parallelism_config_", key), true, parallelism);
  }
  return table;
}

}  // namespace

const std::vector<AccelerateLaunchFlag>& AccelerateLaunchFlags() {
  static const auto* table =
      new std::vector<AccelerateLaunchFlag>(BuildTable());
  return *table;
}

std::string RefusedFlagMessage(const AccelerateLaunchFlag& flag,
                               const std::string& spelled) {
  return absl::StrCat(
      spelled, " (a flag of `accelerate launch`) is refused: ", flag.reason);
}

}  // namespace trl

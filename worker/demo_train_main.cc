// trl-demo-train: data-parallel training of a small MLP on synthetic data,
// the whole system at work. Launched by trl-launch it joins the job's
// ranks (Gloo on CPU through the coordinator's store, NCCL on GPU from the
// coordinator's unique id), trains with TRL's batch flags, checkpoints on
// rank 0 and resumes from it after a restart. Run alone, it trains as a
// job of one.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/private_files.h"
#include "worker/collectives.h"
#include "worker/demo_trainer.h"
#include "worker/gloo_collectives.h"
#include "worker/heartbeat.h"
#include "worker/launch_env.h"
#ifdef TRL_HAVE_NCCL
#include "worker/nccl_collectives.h"
#endif

namespace {

using trl::worker::Collectives;
using trl::worker::LaunchEnv;

// CLI11's PositiveNumber names its range as 0 to 1.8e308 in full.
const CLI::Validator kAboveZero(
    [](std::string& text) -> std::string {
      double value = 0;
      try {
        value = std::stod(text);
      } catch (const std::exception&) {
        return "'" + text + "' is not a number";
      }
      return value > 0 ? "" : "must be above 0, not " + text;
    },
    "> 0");

int Fail(const std::string& message) {
  std::fprintf(stderr, "trl-demo-train: error: %s\n", message.c_str());
  return 1;
}

absl::StatusOr<std::unique_ptr<Collectives>> Connect(
    const std::string& backend, const LaunchEnv& env,
    std::chrono::milliseconds timeout) {
  std::string chosen = backend;
  if (chosen == "auto") {
    chosen = env.world_size == 1 ? "none" : "gloo";
#ifdef TRL_HAVE_NCCL
    if (!env.nccl_unique_id_hex.empty() && trl::worker::GpuCount() > 0) {
      chosen = "nccl";
    }
#endif
  }
  if (chosen == "none") {
    if (env.world_size != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--backend none needs a world of 1, not ", env.world_size));
    }
    return std::unique_ptr<Collectives>(
        new trl::worker::SingleProcessCollectives());
  }
  if (chosen == "gloo") return trl::worker::ConnectGloo(env, timeout);
#ifdef TRL_HAVE_NCCL
  if (chosen == "nccl") return trl::worker::ConnectNccl(env, timeout);
#endif
  return absl::InvalidArgumentError(
      absl::StrCat("--backend ", chosen, " is not available in this build"));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"trl-demo-train: data-parallel training of a small model"};
  trl::worker::TrainOptions options;
  std::string output_dir;
  std::string backend = "auto";
  double rendezvous_timeout_s = 120;
  int64_t logging_steps = 1;
  app.add_option("--per_device_train_batch_size",
                 options.per_device_train_batch_size,
                 "Samples per rank per micro-step")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--gradient_accumulation_steps",
                 options.gradient_accumulation_steps,
                 "Micro-steps per optimizer step")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max_steps", options.max_steps, "Optimizer steps")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--learning_rate", options.learning_rate, "SGD step size")
      ->check(kAboveZero);
  app.add_option("--seed", options.seed, "Seed of the weights and the data");
  app.add_option("--hidden_size", options.shape.hidden, "Hidden units")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option(
      "--output_dir", output_dir,
      "Where rank 0 keeps the checkpoint and the final weights "
      "(default: a directory per trl-launch job in this user's "
      "private directory, ~/.trl/run, else $XDG_RUNTIME_DIR/trl-launch)");
  app.add_option("--save_steps", options.save_steps,
                 "Steps between checkpoints")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--logging_steps", logging_steps, "Steps between loss lines")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--backend", backend, "auto, gloo, nccl or none")
      ->check(CLI::IsMember({"auto", "gloo", "nccl", "none"}));
  app.add_option("--rendezvous_timeout", rendezvous_timeout_s,
                 "Seconds to wait for every rank (and for each collective)")
      ->check(CLI::Range(0.001, 86400.0));
  CLI11_PARSE(app, argc, argv);

  // Alone (no launcher), this process is a job of one.
  trl::worker::EnvironmentMap environment = trl::worker::ProcessEnvironment();
  if (environment.count("RANK") == 0) {
    environment.insert({{"RANK", "0"},
                        {"LOCAL_RANK", "0"},
                        {"WORLD_SIZE", "1"},
                        {"LOCAL_WORLD_SIZE", "1"},
                        {"MASTER_ADDR", "127.0.0.1"},
                        {"MASTER_PORT", "1"}});
  }
  auto env = trl::worker::ParseLaunchEnv(environment);
  if (!env.ok()) return Fail(std::string(env.status().message()));

  if (output_dir.empty() && !env->job_id.empty()) {
    // This user's private directory, never a shared /tmp: another user
    // could plant links there, or read the weights.
    if (!trl::IsValidJobId(env->job_id)) {
      return Fail(
          absl::StrCat("TRL_JOB_ID '", env->job_id, "' is not a valid job id"));
    }
    auto dir = trl::PrivateDirectory();
    if (!dir.ok()) {
      return Fail(absl::StrCat("no place for the output (pass --output_dir): ",
                               dir.status().message()));
    }
    output_dir = absl::StrCat(*dir, "/demo-train/", env->job_id);
  }
  if (!output_dir.empty() && env->rank == 0) {
    std::error_code error;
    std::filesystem::create_directories(output_dir, error);
    if (error) {
      return Fail(absl::StrCat("cannot create --output_dir ", output_dir, ": ",
                               error.message()));
    }
    options.checkpoint_path = output_dir + "/checkpoint.bin";
  }

  const auto timeout = std::chrono::milliseconds(
      static_cast<int64_t>(rendezvous_timeout_s * 1000));
  auto collectives = Connect(backend, *env, timeout);
  if (!collectives.ok())
    return Fail(std::string(collectives.status().message()));

  const trl::worker::Heartbeat heartbeat(env->heartbeat_file);
  const bool chatty = env->rank == 0;
  if (chatty) {
    std::printf(
        "trl-demo-train: %d rank(s) over %s, generation %lld; effective batch "
        "size %lld = %d per device x %d ranks x %d accumulation steps; %zu "
        "parameters\n",
        env->world_size, (*collectives)->name().c_str(),
        static_cast<long long>(env->generation),
        static_cast<long long>(
            trl::worker::EffectiveBatchSize(options, env->world_size)),
        options.per_device_train_batch_size, env->world_size,
        options.gradient_accumulation_steps,
        trl::worker::ParameterCount(options.shape));
    std::fflush(stdout);
  }
  trl::worker::TrainHooks hooks;
  // As TRL logs it: the mean loss of the steps since the last line.
  double logged_loss = 0;
  int64_t logged_steps = 0;
  hooks.on_step = [&](int64_t step, double loss) {
    heartbeat.Beat();
    logged_loss += loss;
    ++logged_steps;
    if (chatty && (step % logging_steps == 0 || step == options.max_steps)) {
      std::printf("step %lld/%lld loss %.6f\n", static_cast<long long>(step),
                  static_cast<long long>(options.max_steps),
                  logged_loss / logged_steps);
      std::fflush(stdout);
    }
    if (step % logging_steps == 0) logged_loss = logged_steps = 0;
  };
  auto result = trl::worker::Train(options, **collectives, hooks);
  if (!result.ok()) return Fail(std::string(result.status().message()));

  if (chatty) {
    if (result->resumed_from > 0) {
      std::printf("resumed from the checkpoint at step %lld\n",
                  static_cast<long long>(result->resumed_from));
    }
    std::printf("final weights: %zu parameters, checksum %.6f\n",
                result->params.size(), trl::worker::Checksum(result->params));
    if (!output_dir.empty()) {
      const std::string path = output_dir + "/final_weights.txt";
      std::string text;
      char line[32];
      for (float value : result->params) {
        std::snprintf(line, sizeof(line), "%.9g\n", value);
        text += line;
      }
      if (absl::Status written = trl::WriteFileAtomically(path, text, 0600);
          !written.ok()) {
        return Fail(std::string(written.message()));
      }
      std::printf("weights in %s, checkpoint in %s/checkpoint.bin\n",
                  path.c_str(), output_dir.c_str());
    }
  }
  return 0;
}

#include "worker/launch_env.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace trl::worker {
namespace {

constexpr char kHint[] =
    " (is this process started by trl-launch, torchrun or accelerate launch?)";

std::optional<std::string> Lookup(const EnvironmentMap& env,
                                  const std::string& name) {
  auto found = env.find(name);
  if (found == env.end()) return std::nullopt;
  return found->second;
}

// The integer value of `name`, within [min, max]; `fallback` when unset (a
// required variable has none).
template <typename Int>
absl::Status ReadInt(const EnvironmentMap& env, const std::string& name,
                     std::optional<Int> fallback, Int min, Int max, Int* out) {
  auto text = Lookup(env, name);
  if (!text) {
    if (fallback) {
      *out = *fallback;
      return absl::OkStatus();
    }
    return absl::NotFoundError(absl::StrCat(name, " is not set", kHint));
  }
  Int value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "='", *text, "' is not an integer"));
  }
  if (value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, "=", value, " is out of range (", min, " to ", max, ")"));
  }
  *out = value;
  return absl::OkStatus();
}

std::string ReadString(const EnvironmentMap& env, const std::string& name) {
  return Lookup(env, name).value_or("");
}

bool IsHex(const std::string& text) {
  for (char c : text) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<LaunchEnv> ParseLaunchEnv(const EnvironmentMap& env) {
  LaunchEnv out;
  constexpr int kMaxRanks = 1 << 24;
  const std::optional<int> required;
  absl::Status status;
  auto read = [&](absl::Status next) {
    if (status.ok()) status = std::move(next);
  };
  read(ReadInt(env, "WORLD_SIZE", required, 1, kMaxRanks, &out.world_size));
  read(ReadInt(env, "RANK", required, 0, kMaxRanks - 1, &out.rank));
  read(ReadInt(env, "LOCAL_WORLD_SIZE", required, 1, kMaxRanks,
               &out.local_world_size));
  read(ReadInt(env, "LOCAL_RANK", required, 0, kMaxRanks - 1, &out.local_rank));
  read(ReadInt(env, "GROUP_RANK", std::optional<int>(0), 0, kMaxRanks - 1,
               &out.machine_rank));
  read(ReadInt(env, "GROUP_WORLD_SIZE", std::optional<int>(1), 1, kMaxRanks,
               &out.num_machines));
  read(ReadInt(env, "MASTER_PORT", required, 1, 65535, &out.master_port));
  int64_t restart_count = 0;
  read(ReadInt<int64_t>(env, "TORCHELASTIC_RESTART_COUNT",
                        std::optional<int64_t>(0), 0, INT64_MAX,
                        &restart_count));
  read(ReadInt<int64_t>(env, "TRL_GENERATION", restart_count, 0, INT64_MAX,
                        &out.generation));
  if (!status.ok()) return status;

  if (out.rank >= out.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RANK=", out.rank, " is not below WORLD_SIZE=", out.world_size));
  }
  if (out.local_rank >= out.local_world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("LOCAL_RANK=", out.local_rank,
                     " is not below LOCAL_WORLD_SIZE=", out.local_world_size));
  }
  if (out.local_world_size > out.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("LOCAL_WORLD_SIZE=", out.local_world_size,
                     " is above WORLD_SIZE=", out.world_size));
  }
  if (out.machine_rank >= out.num_machines) {
    return absl::InvalidArgumentError(
        absl::StrCat("GROUP_RANK=", out.machine_rank,
                     " is not below GROUP_WORLD_SIZE=", out.num_machines));
  }
  out.master_addr = ReadString(env, "MASTER_ADDR");
  if (out.master_addr.empty()) {
    return absl::NotFoundError(absl::StrCat("MASTER_ADDR is not set", kHint));
  }
  out.job_id = ReadString(env, "TRL_JOB_ID");
  out.coordinator_address = ReadString(env, "TRL_COORDINATOR_ADDR");
  out.store_token = ReadString(env, "TRL_STORE_TOKEN");
  out.heartbeat_file = ReadString(env, "TRL_HEARTBEAT_FILE");
  out.socket_ifname = ReadString(env, "GLOO_SOCKET_IFNAME");
  out.tls_ca_file = ReadString(env, "TRL_TLS_CA");
  out.tls_cert_file = ReadString(env, "TRL_TLS_CERT");
  out.tls_key_file = ReadString(env, "TRL_TLS_KEY");
  out.tls_server_name = ReadString(env, "TRL_TLS_SERVER_NAME");
  out.nccl_unique_id_hex = ReadString(env, "TRL_NCCL_UNIQUE_ID");
  // ncclUniqueId is 128 bytes.
  if (!out.nccl_unique_id_hex.empty() &&
      (out.nccl_unique_id_hex.size() != 256 ||
       !IsHex(out.nccl_unique_id_hex))) {
    return absl::InvalidArgumentError(
        absl::StrCat("TRL_NCCL_UNIQUE_ID must be 256 hex digits (128 bytes); "
                     "it has ",
                     out.nccl_unique_id_hex.size(), " characters"));
  }
  return out;
}

EnvironmentMap ProcessEnvironment() {
  EnvironmentMap env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const size_t equals = text.find('=');
    if (equals == std::string::npos) continue;
    env.emplace(text.substr(0, equals), text.substr(equals + 1));
  }
  return env;
}

absl::StatusOr<LaunchEnv> ReadLaunchEnv() {
  return ParseLaunchEnv(ProcessEnvironment());
}

}  // namespace trl::worker

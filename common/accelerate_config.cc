#include "common/accelerate_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace trl {
namespace {

// Keys of Accelerate's ClusterConfig that trl-launch reads or tolerates.
// Anything else is rejected, as `accelerate launch` does.
enum class KeyKind { kString, kInt, kBool, kSection, kList, kIgnoredMap };

const std::map<std::string, KeyKind>& KnownKeys() {
  static const auto* keys = new std::map<std::string, KeyKind>{
      {"compute_environment", KeyKind::kString},
      {"distributed_type", KeyKind::kString},
      {"mixed_precision", KeyKind::kString},
      {"use_cpu", KeyKind::kBool},
      {"debug", KeyKind::kBool},
      {"num_processes", KeyKind::kInt},
      {"num_machines", KeyKind::kInt},
      {"machine_rank", KeyKind::kInt},
      {"gpu_ids", KeyKind::kString},
      {"main_process_ip", KeyKind::kString},
      {"main_process_port", KeyKind::kInt},
      {"rdzv_backend", KeyKind::kString},
      {"same_network", KeyKind::kBool},
      {"main_training_function", KeyKind::kString},
      {"enable_cpu_affinity", KeyKind::kBool},
      {"downcast_bf16", KeyKind::kString},
      {"deepspeed_config", KeyKind::kSection},
      {"fsdp_config", KeyKind::kSection},
      {"dynamo_config", KeyKind::kSection},
      {"megatron_lm_config", KeyKind::kIgnoredMap},
      {"ipex_config", KeyKind::kIgnoredMap},
      {"mpirun_config", KeyKind::kIgnoredMap},
      {"fp8_config", KeyKind::kIgnoredMap},
      {"parallelism_config", KeyKind::kIgnoredMap},
      {"tpu_name", KeyKind::kString},
      {"tpu_zone", KeyKind::kString},
      {"tpu_use_cluster", KeyKind::kBool},
      {"tpu_use_sudo", KeyKind::kBool},
      {"tpu_vm", KeyKind::kList},
      {"tpu_env", KeyKind::kList},
      {"command_file", KeyKind::kString},
      {"commands", KeyKind::kList},
      {"dynamo_backend", KeyKind::kString},
      {"use_ipex", KeyKind::kBool},
      {"use_xpu", KeyKind::kBool},
  };
  return *keys;
}

std::string Where(const std::string& source, const YAML::Node& node) {
  return absl::StrCat(source, ":", node.Mark().line + 1);
}

std::string KindName(KeyKind kind) {
  switch (kind) {
    case KeyKind::kString:
      return "a string";
    case KeyKind::kInt:
      return "an integer";
    case KeyKind::kBool:
      return "true or false";
    case KeyKind::kSection:
    case KeyKind::kIgnoredMap:
      return "a mapping of keys to values";
    case KeyKind::kList:
      return "a list";
  }
  return "?";
}

absl::Status WrongType(const std::string& where, const std::string& key,
                       KeyKind kind, const YAML::Node& value) {
  std::string shown = value.IsScalar() ? absl::StrCat("'", value.Scalar(), "'")
                      : value.IsMap()  ? "a mapping"
                      : value.IsSequence() ? "a list"
                                           : "nothing";
  return absl::InvalidArgumentError(absl::StrCat(
      where, ": ", key, " must be ", KindName(kind), ", got ", shown));
}

absl::StatusOr<int> ParseInt(const std::string& where, const std::string& key,
                             const YAML::Node& value) {
  if (!value.IsScalar()) return WrongType(where, key, KeyKind::kInt, value);
  const std::string& text = value.Scalar();
  int parsed = 0;
  auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (error != std::errc() || end != text.data() + text.size()) {
    return WrongType(where, key, KeyKind::kInt, value);
  }
  return parsed;
}

absl::StatusOr<bool> ParseBool(const std::string& where, const std::string& key,
                               const YAML::Node& value) {
  if (!value.IsScalar()) return WrongType(where, key, KeyKind::kBool, value);
  const std::string lower = absl::AsciiStrToLower(value.Scalar());
  if (lower == "true" || lower == "yes" || lower == "on") return true;
  if (lower == "false" || lower == "no" || lower == "off") return false;
  return WrongType(where, key, KeyKind::kBool, value);
}

absl::StatusOr<ConfigSection> ParseSection(const std::string& source,
                                           const std::string& key,
                                           const YAML::Node& value) {
  ConfigSection section;
  if (value.IsNull()) return section;
  if (!value.IsMap()) {
    return WrongType(Where(source, value), key, KeyKind::kSection, value);
  }
  for (auto it = value.begin(); it != value.end(); ++it) {
    const std::string sub_key = it->first.Scalar();
    const YAML::Node sub_value = it->second;
    if (sub_value.IsNull()) {
      section.emplace_back(sub_key, "");
    } else if (sub_value.IsScalar()) {
      section.emplace_back(sub_key, sub_value.Scalar());
    } else if (sub_value.IsSequence()) {
      std::vector<std::string> items;
      for (const auto& item : sub_value) {
        if (!item.IsScalar()) {
          return absl::InvalidArgumentError(
              absl::StrCat(Where(source, item), ": ", key, ".", sub_key,
                           " must be a list of plain values"));
        }
        items.push_back(item.Scalar());
      }
      section.emplace_back(sub_key, absl::StrJoin(items, ","));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(source, sub_value), ": ", key, ".", sub_key,
                       " must be a plain value or a list, got a mapping"));
    }
  }
  return section;
}

std::string Quoted(const std::vector<std::string>& values) {
  return absl::StrCat("'", absl::StrJoin(values, "', '"), "'");
}

bool Contains(const std::vector<std::string>& values, const std::string& v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

// "1234" parses as an IPv4 address with inet_aton (0.0.4.210), and
// Accelerate's multi-node template ships exactly that placeholder, so a
// numeric-only name is refused instead of being taken for a host.
bool LooksLikeHostOrAddress(const std::string& text) {
  if (text.empty() || text.size() > 253) return false;
  if (text.find(':') != std::string::npos) {  // IPv6
    return std::all_of(text.begin(), text.end(), [](char c) {
      return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' ||
             c == '.';
    });
  }
  bool has_letter = false;
  for (char c : text) {
    if (std::isalpha(static_cast<unsigned char>(c))) has_letter = true;
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' &&
        c != '_') {
      return false;
    }
  }
  if (has_letter) return true;
  std::vector<std::string> parts = absl::StrSplit(text, '.');
  if (parts.size() != 4) return false;
  for (const auto& part : parts) {
    int octet = -1;
    auto [end, error] =
        std::from_chars(part.data(), part.data() + part.size(), octet);
    if (part.empty() || error != std::errc() ||
        end != part.data() + part.size() || octet < 0 || octet > 255) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool AccelerateConfig::UsesGpus() const {
  if (use_cpu) return false;
  return distributed_type == "MULTI_GPU" || distributed_type == "DEEPSPEED" ||
         distributed_type == "FSDP" || distributed_type == "MEGATRON_LM" ||
         distributed_type == "NO";
}

std::string AccelerateConfig::Lookup(const ConfigSection& section,
                                     const std::string& key,
                                     const std::string& fallback) {
  for (const auto& [k, v] : section) {
    if (k == key) return v;
  }
  return fallback;
}

std::map<std::string, std::string> AgreementFingerprint(
    const AccelerateConfig& c) {
  return {
      // The version of the messages between agent and coordinator: nodes
      // running different builds are refused by name instead of
      // misunderstanding each other. 2: workers started in one message,
      // heartbeats as datagrams.
      {"trl_launch_protocol", "2"},
      {"num_machines", std::to_string(c.num_machines)},
      {"num_processes", std::to_string(c.num_processes)},
      {"distributed_type", c.distributed_type},
      {"mixed_precision", c.mixed_precision},
      {"use_cpu", c.use_cpu ? "true" : "false"},
  };
}

const std::vector<std::string>& SupportedDistributedTypes() {
  static const auto* types = new std::vector<std::string>{
      "NO", "MULTI_CPU", "MULTI_GPU", "DEEPSPEED", "FSDP", "MEGATRON_LM"};
  return *types;
}

const std::vector<std::string>& MixedPrecisionValues() {
  static const auto* values =
      new std::vector<std::string>{"no", "fp16", "bf16", "fp8"};
  return *values;
}

absl::StatusOr<AccelerateConfig> ParseAccelerateConfig(
    const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ":", e.mark.line + 1, ": not valid YAML: ", e.msg));
  }
  AccelerateConfig config;
  config.source = source;
  if (root.IsNull()) return config;  // An empty file: all defaults.
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": an Accelerate config must be a mapping of keys to values"));
  }
  try {
    for (auto it = root.begin(); it != root.end(); ++it) {
      const std::string key = it->first.Scalar();
      const YAML::Node value = it->second;
      const std::string where = Where(source, it->first);
      auto known = KnownKeys().find(key);
      if (known == KnownKeys().end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": unknown key '", key,
            "' (not an Accelerate config key; check its spelling)"));
      }
      if (value.IsNull()) continue;  // `key: null` keeps the default.
      const KeyKind kind = known->second;
      if (kind == KeyKind::kString && !value.IsScalar()) {
        return WrongType(where, key, kind, value);
      }
      if (kind == KeyKind::kList && !value.IsSequence()) {
        return WrongType(where, key, kind, value);
      }
      if (kind == KeyKind::kIgnoredMap && !value.IsMap()) {
        return WrongType(where, key, kind, value);
      }
      if (key == "compute_environment") {
        config.compute_environment = value.Scalar();
      } else if (key == "distributed_type") {
        config.distributed_type = value.Scalar();
      } else if (key == "mixed_precision") {
        config.mixed_precision = absl::AsciiStrToLower(value.Scalar());
        config.mixed_precision_from_file = true;
      } else if (key == "gpu_ids") {
        config.gpu_ids = value.Scalar();
      } else if (key == "main_process_ip") {
        config.main_process_ip = value.Scalar();
      } else if (key == "rdzv_backend") {
        config.rdzv_backend = value.Scalar();
      } else if (key == "main_training_function") {
        config.main_training_function = value.Scalar();
      } else if (key == "downcast_bf16") {
        config.downcast_bf16 = value.Scalar();
      } else if (kind == KeyKind::kInt) {
        auto parsed = ParseInt(where, key, value);
        if (!parsed.ok()) return parsed.status();
        if (key == "num_processes") config.num_processes = *parsed;
        if (key == "num_machines") config.num_machines = *parsed;
        if (key == "machine_rank") config.machine_rank = *parsed;
        if (key == "main_process_port") config.main_process_port = *parsed;
      } else if (kind == KeyKind::kBool) {
        auto parsed = ParseBool(where, key, value);
        if (!parsed.ok()) return parsed.status();
        if (key == "use_cpu") config.use_cpu = *parsed;
        if (key == "debug") config.debug = *parsed;
        if (key == "same_network") config.same_network = *parsed;
        if (key == "enable_cpu_affinity") config.enable_cpu_affinity = *parsed;
      } else if (kind == KeyKind::kSection) {
        auto parsed = ParseSection(source, key, value);
        if (!parsed.ok()) return parsed.status();
        if (key == "deepspeed_config") config.deepspeed_config = *parsed;
        if (key == "fsdp_config") config.fsdp_config = *parsed;
        if (key == "dynamo_config") config.dynamo_config = *parsed;
      }
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", e.mark.line + 1, ": ", e.msg));
  }
  return config;
}

absl::StatusOr<AccelerateConfig> LoadAccelerateConfigFile(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(
        "config file '", path, "' cannot be read: ", std::strerror(errno)));
  }
  // A config is a page of YAML: anything past 1 MiB is a wrong file (or
  // /dev/zero), refused before it is read whole.
  constexpr size_t kMaxConfigBytes = 1 << 20;
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("config file '", path,
                     "' is larger than 1 MiB; an Accelerate config is a few "
                     "lines of YAML"));
  }
  return ParseAccelerateConfig(text, path);
}

absl::Status ValidateAccelerateConfig(const AccelerateConfig& c) {
  auto invalid = [&c](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(c.source, ": ", parts...));
  };
  if (c.compute_environment != "LOCAL_MACHINE") {
    return invalid("compute_environment '", c.compute_environment,
                   "' is not supported; trl-launch runs LOCAL_MACHINE jobs");
  }
  if (!Contains(SupportedDistributedTypes(), c.distributed_type)) {
    return invalid("distributed_type '", c.distributed_type,
                   "' is not one trl-launch launches; allowed: ",
                   Quoted(SupportedDistributedTypes()));
  }
  if (!Contains(MixedPrecisionValues(), c.mixed_precision)) {
    return invalid(
        "mixed_precision '", c.mixed_precision,
        "' is not allowed; allowed: ", Quoted(MixedPrecisionValues()));
  }
  if (c.num_machines < 1) {
    return invalid("num_machines ", c.num_machines, " must be at least 1");
  }
  // An elastic range's MAX is num_machines: what machine ranks and the
  // processes per machine are counted against.
  const std::string range =
      c.Elastic() ? absl::StrCat(" (the MAX of the elastic range ",
                                 c.MinMachines(), ":", c.num_machines, ")")
                  : "";
  if (c.min_machines < 0 || c.min_machines > c.num_machines) {
    return invalid("the elastic minimum ", c.min_machines,
                   " must be in 1..num_machines (", c.num_machines, ")");
  }
  if (c.machine_rank < 0 || c.machine_rank >= c.num_machines) {
    return invalid("machine_rank ", c.machine_rank,
                   " must be in 0..num_machines-1 (num_machines is ",
                   c.num_machines, range, ")");
  }
  if (c.num_processes < 1) {
    return invalid("num_processes ", c.num_processes,
                   " must be at least 1 (it is the total over all machines)");
  }
  if (c.num_processes % c.num_machines != 0) {
    return invalid("num_processes ", c.num_processes,
                   " is not divisible by num_machines ", c.num_machines, range,
                   " (num_processes is the total over all machines",
                   c.Elastic() ? ", counted at MAX machines" : "", ")");
  }
  // 0: a free port, as in Accelerate (trl-coord start picks one).
  if (c.main_process_port < 0 || c.main_process_port > 65535) {
    return invalid("main_process_port ", c.main_process_port,
                   " is outside 1..65535 (or 0: a free port)");
  }
  if (c.num_machines > 1 && c.main_process_ip.empty()) {
    return invalid("main_process_ip is required when num_machines is ",
                   c.num_machines);
  }
  if (!c.main_process_ip.empty() &&
      !LooksLikeHostOrAddress(c.main_process_ip)) {
    return invalid(
        "main_process_ip '", c.main_process_ip,
        "' is neither an IP address nor a host name (a placeholder?)");
  }
  if (c.gpu_ids != "all") {
    for (const auto& id : absl::StrSplit(c.gpu_ids, ',')) {
      const std::string trimmed(absl::StripAsciiWhitespace(id));
      if (trimmed.empty() ||
          !std::all_of(trimmed.begin(), trimmed.end(),
                       [](char ch) { return std::isdigit(ch); })) {
        return invalid("gpu_ids '", c.gpu_ids,
                       "' must be 'all' or a comma-separated list of GPU "
                       "indices such as '0,1'");
      }
    }
  }
  const std::string fsdp_ram_efficient =
      absl::AsciiStrToLower(AccelerateConfig::Lookup(
          c.fsdp_config, "fsdp_cpu_ram_efficient_loading", "true"));
  const std::string fsdp_sync = absl::AsciiStrToLower(AccelerateConfig::Lookup(
      c.fsdp_config, "fsdp_sync_module_states", "true"));
  if (c.distributed_type == "FSDP" && fsdp_ram_efficient == "true" &&
      fsdp_sync == "false") {
    return invalid(
        "fsdp_config.fsdp_cpu_ram_efficient_loading is true, which needs "
        "fsdp_config.fsdp_sync_module_states true (as in Accelerate)");
  }
  static const std::vector<std::string> kRdzvBackends = {"static", "c10d",
                                                         "etcd", "etcd-v2"};
  if (!Contains(kRdzvBackends, c.rdzv_backend)) {
    return invalid("rdzv_backend '", c.rdzv_backend,
                   "' is not allowed; allowed: ", Quoted(kRdzvBackends));
  }
  return absl::OkStatus();
}

}  // namespace trl

#include "common/local_machine.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <string>

extern char** environ;

namespace trl {

int CountLocalGpus() {
  int count = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("nvidia", 0) != 0 || name.size() == 6) continue;
    bool digits = true;
    for (size_t i = 6; i < name.size(); ++i) {
      digits = digits && std::isdigit(static_cast<unsigned char>(name[i]));
    }
    if (digits) ++count;
  }
  return count;
}

LocalMachine ReadLocalMachine() {
  LocalMachine machine;
  machine.gpu_count = CountLocalGpus();
  machine.environment = CurrentEnvironment();
  if (const char* hf_home = std::getenv("HF_HOME")) {
    machine.hf_home = hf_home;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME")) {
    machine.hf_home = std::string(xdg) + "/huggingface";
  } else if (const char* home = std::getenv("HOME")) {
    machine.hf_home = std::string(home) + "/.cache/huggingface";
  }
  return machine;
}

std::string MissingGpuWarning(const AccelerateConfig& config,
                              const LocalMachine& machine) {
  if (!config.UsesGpus() || machine.gpu_count > 0) return "";
  return "the config asks for GPUs (distributed_type " +
         config.distributed_type +
         ") but this machine has none; starting anyway (to run on CPUs, "
         "pass --cpu to every daemon, or set use_cpu: true in the config)";
}

Environment CurrentEnvironment() {
  Environment env;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string text = *entry;
    const size_t equals = text.find('=');
    if (equals == std::string::npos) continue;
    env[text.substr(0, equals)] = text.substr(equals + 1);
  }
  return env;
}

}  // namespace trl

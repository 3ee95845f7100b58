// trl-env-worker: a small bundled worker that shows what trl-launch gave it:
// its rank, the rendezvous data and (with --print_env) the launch variables.
// Tests also use it to exit with a chosen code on a chosen rank.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

extern char** environ;

namespace {

std::string Get(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "<unset>";
}

bool IsLaunchVariable(const std::string& name) {
  static const char* kPrefixes[] = {
      "RANK",          "LOCAL_",      "WORLD_",
      "GROUP_",        "ROLE_",       "MASTER_",
      "TORCHELASTIC_", "TORCH_NCCL",  "OMP_NUM_THREADS",
      "ACCELERATE_",   "FSDP_",       "TRL_",
      "CUDA_VISIBLE",  "NCCL_SOCKET", "GLOO_SOCKET",
      "PYTHONPATH"};
  for (const char* prefix : kPrefixes) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"trl-env-worker: shows its rank and launch environment"};
  double sleep_s = 0;
  int exit_code = 0;
  int exit_rank = -1;
  bool print_env = false;
  app.add_option("--sleep", sleep_s, "Seconds to sleep before exiting");
  app.add_option("--exit_code", exit_code, "Exit code to exit with");
  app.add_option("--exit_rank", exit_rank,
                 "Only this rank exits with --exit_code (default: all)");
  app.add_flag("--print_env", print_env, "Print the launch variables");
  CLI11_PARSE(app, argc, argv);

  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const int rank = std::atoi(Get("RANK").c_str());
  std::printf(
      "rank %s of %s (local rank %s of %s) on %s, pid %d: "
      "MASTER_ADDR=%s MASTER_PORT=%s generation %s\n",
      Get("RANK").c_str(), Get("WORLD_SIZE").c_str(), Get("LOCAL_RANK").c_str(),
      Get("LOCAL_WORLD_SIZE").c_str(), host, getpid(),
      Get("MASTER_ADDR").c_str(), Get("MASTER_PORT").c_str(),
      Get("TORCHELASTIC_RESTART_COUNT").c_str());
  if (print_env) {
    std::map<std::string, std::string> sorted;
    for (char** entry = environ; *entry; ++entry) {
      const std::string text = *entry;
      const size_t equals = text.find('=');
      if (equals == std::string::npos) continue;
      const std::string name = text.substr(0, equals);
      if (IsLaunchVariable(name)) sorted[name] = text.substr(equals + 1);
    }
    for (const auto& [name, value] : sorted) {
      // A credential, even a short-lived one, does not belong in a log.
      const std::string shown =
          name == "TRL_STORE_TOKEN"
              ? "<" + std::to_string(value.size()) + " characters, not shown>"
              : value;
      std::printf("ENV %s=%s\n", name.c_str(), shown.c_str());
    }
  }
  std::fflush(stdout);
  if (sleep_s > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
  }
  if (exit_rank < 0 || exit_rank == rank) return exit_code;
  return 0;
}

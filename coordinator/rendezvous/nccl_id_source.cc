#include "coordinator/rendezvous/nccl_id_source.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace trl {
namespace {

constexpr int kIdHexLength = 256;  // NCCL_UNIQUE_ID_BYTES (128) in hex
constexpr int kStartTimeoutMs = 10000;

}  // namespace

std::string FindNcclRootHelper() {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "";
  const auto helper = self.parent_path() / "trl-nccl-root";
  return std::filesystem::exists(helper) ? helper.string() : "";
}

NcclIdSource::NcclIdSource(std::string helper_path)
    : helper_path_(std::move(helper_path)) {}

NcclIdSource::~NcclIdSource() { Release(); }

void NcclIdSource::Release() {
  if (keepalive_fd_ >= 0) close(keepalive_fd_);  // EOF: the helper exits
  keepalive_fd_ = -1;
  if (pid_ > 0) {
    // Do not wait for a root that may be blocked in the middle of a
    // bootstrap with ranks that are gone.
    kill(pid_, SIGKILL);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

absl::StatusOr<std::string> NcclIdSource::Next(
    const std::string& interface_name) {
  Release();
  int to_helper[2], from_helper[2];
  if (pipe2(to_helper, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  if (pipe2(from_helper, O_CLOEXEC) != 0) {
    close(to_helper[0]);
    close(to_helper[1]);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::vector<std::string> env_strings;
  for (char** entry = environ; *entry; ++entry) env_strings.push_back(*entry);
  if (!interface_name.empty() && std::getenv("NCCL_SOCKET_IFNAME") == nullptr) {
    env_strings.push_back("NCCL_SOCKET_IFNAME=" + interface_name);
  }
  std::vector<char*> env;
  for (auto& entry : env_strings) env.push_back(entry.data());
  env.push_back(nullptr);
  std::string path = helper_path_;
  char* argv[] = {path.data(), nullptr};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_helper[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, from_helper[1], STDOUT_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
  const int rc =
      posix_spawn(&pid_, path.c_str(), &actions, &attributes, argv, env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(to_helper[0]);
  close(from_helper[1]);
  keepalive_fd_ = to_helper[1];
  if (rc != 0) {
    pid_ = -1;
    close(from_helper[0]);
    Release();
    return absl::UnavailableError(
        absl::StrCat("cannot run ", helper_path_, ": ", std::strerror(rc)));
  }

  std::string hex;
  char buffer[512];
  pollfd readable = {from_helper[0], POLLIN, 0};
  while (hex.find('\n') == std::string::npos &&
         poll(&readable, 1, kStartTimeoutMs) > 0) {
    const ssize_t n = read(from_helper[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    hex.append(buffer, n);
  }
  close(from_helper[0]);
  if (!hex.empty() && hex.back() == '\n') hex.pop_back();
  if (static_cast<int>(hex.size()) != kIdHexLength) {
    Release();
    return absl::UnavailableError(
        absl::StrCat(helper_path_, " gave no NCCL unique id"));
  }
  return hex;
}

}  // namespace trl

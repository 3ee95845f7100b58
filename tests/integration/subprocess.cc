#include "tests/integration/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "common/kernel_files.h"

extern char** environ;

namespace trl::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// In $TMPDIR (each ctest has its own: tests/hermetic.cmake), else /tmp.
std::string TempPath(const char* suffix) {
  static std::atomic<int> counter{0};
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string dir = tmpdir && *tmpdir ? tmpdir : "/tmp";
  return dir + "/trl-test-" + std::to_string(getpid()) + "-" +
         std::to_string(counter++) + suffix;
}

}  // namespace

Subprocess::Subprocess(std::vector<std::string> argv,
                       std::vector<std::string> extra_env)
    : stdout_path_(TempPath(".out")), stderr_path_(TempPath(".err")) {
  std::vector<char*> args;
  for (auto& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  // An extra variable replaces an inherited one of the same name (the first
  // of two would win).
  auto name_of = [](const std::string& entry) {
    return entry.substr(0, entry.find('='));
  };
  for (char** entry = environ; *entry; ++entry) {
    const std::string inherited = *entry;
    bool replaced = false;
    for (const auto& extra : extra_env) {
      replaced = replaced || name_of(extra) == name_of(inherited);
    }
    if (!replaced) env_strings.push_back(inherited);
  }
  for (auto& extra : extra_env) env_strings.push_back(extra);
  std::vector<char*> env;
  for (auto& entry : env_strings) env.push_back(entry.data());
  env.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO,
                                   stdout_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO,
                                   stderr_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), env.data()) !=
      0) {
    pid_ = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !exit_code_) {
    kill(pid_, SIGKILL);
    Wait(std::chrono::seconds(10));
  }
  unlink(stdout_path_.c_str());
  unlink(stderr_path_.c_str());
}

std::optional<int> Subprocess::Wait(std::chrono::milliseconds timeout) {
  if (exit_code_ || pid_ <= 0) return exit_code_;
  WaitUntil(
      [this] {
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
        exit_code_ =
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return true;
      },
      timeout);
  return exit_code_;
}

void Subprocess::Signal(int signal) const {
  if (pid_ > 0 && !exit_code_) kill(pid_, signal);
}

std::string Subprocess::Stdout() const { return ReadFile(stdout_path_); }
std::string Subprocess::Stderr() const { return ReadFile(stderr_path_); }

bool Subprocess::WaitForOutput(const std::string& text,
                               std::chrono::milliseconds timeout) const {
  return WaitUntil([&] { return Output().find(text) != std::string::npos; },
                   timeout);
}

bool WaitUntil(const std::function<bool()>& condition,
               std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int OpenFileCount(pid_t pid) {
  int count = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(
           "/proc/" + std::to_string(pid) + "/fd", error)) {
    (void)entry;
    ++count;
  }
  return count;
}

long ResidentKiB(pid_t pid) {
  // Not an ifstream: its read throws once the process is gone (ESRCH).
  std::istringstream status(
      ReadKernelFile("/proc/" + std::to_string(pid) + "/status"));
  std::string key;
  long value = 0;
  while (status >> key) {
    if (key == "VmRSS:") {
      status >> value;
      return value;
    }
  }
  return 0;
}

bool ProcessExists(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  // A zombie is gone for our purposes; read its state.
  const std::string text =
      ReadKernelFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ||
         text[paren + 2] != 'Z';
}

double CpuSecondsOf(pid_t pid) {
  const std::string text =
      ReadKernelFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  // Fields 3.. of proc(5): utime and stime are the 14th and 15th.
  long long utime = 0, stime = 0;
  for (int index = 3; index <= 15 && fields >> field; ++index) {
    if (index == 14) utime = std::stoll(field);
    if (index == 15) stime = std::stoll(field);
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

bool PortIsFree(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  // Connections in TIME_WAIT do not count: a listener (or any live socket
  // bound to the port) does.
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool free =
      bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return free;
}

namespace {

// Holds `port` for this process: an abstract Unix socket named after it,
// which no other process can bind while this one lives (and which goes
// with the process, however it ends). False if another test holds it.
bool ReservePort(int port) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  const std::string name = "trl-test-port-" + std::to_string(port);
  // sun_path[0] == '\0': the abstract namespace, nothing on disk.
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const socklen_t length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), length) != 0) {
    close(fd);
    return false;
  }
  return true;  // the descriptor stays open until the process exits
}

// Whether a socket of `type` can bind 127.0.0.1:port now.
bool CanBind(int type, int port) {
  int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok =
      bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

}  // namespace

// A port for one test's coordinator (TCP and UDP), that no other test
// process gets while this one runs. Picked from 16384..24574 (its status
// page takes the next port), below both the kernel's ephemeral range
// (32768 and up by default) and the 8,192 ports under it from which a
// coordinator picks each generation's MASTER_PORT
// (common/listen_port_range.h): a port from bind(0) is an ephemeral one,
// which any outgoing connection (an agent's, a worker's, another test's
// under ctest -j2) may take between the pick and the coordinator's bind,
// and which another process's bind(0) may return too; and a port in the
// MASTER_PORT span may be given to another test's workers meanwhile.
int FreePort() {
  constexpr int kFirst = 16384, kCount = 8191;
  const int start = static_cast<int>(
      (static_cast<unsigned>(getpid()) * 7919u +
       static_cast<unsigned>(
           std::chrono::steady_clock::now().time_since_epoch().count())) %
      kCount);
  for (int i = 0; i < kCount; ++i) {
    const int port = kFirst + (start + i) % kCount;
    if (ReservePort(port) && CanBind(SOCK_STREAM, port) &&
        CanBind(SOCK_DGRAM, port)) {
      return port;
    }
  }
  return -1;
}

}  // namespace trl::testing

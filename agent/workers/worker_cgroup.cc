#include "agent/workers/worker_cgroup.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/kernel_files.h"

namespace trl {
namespace {

// This process's cgroup v2 path ("0::/path" in /proc/self/cgroup).
std::string OwnCgroupPath() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "";
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

bool IsPopulated(const std::string& path) {
  // read(2), not an ifstream: a cgroup removed meanwhile fails the read
  // (ENODEV), and libstdc++ throws on that (kernel_files.h).
  std::istringstream events(ReadKernelFile(path + "/cgroup.events"));
  std::string key;
  int value = 0;
  while (events >> key >> value) {
    if (key == "populated") return value != 0;
  }
  // Without cgroup.events, look at the members.
  std::istringstream procs(ReadKernelFile(path + "/cgroup.procs"));
  std::string pid;
  return static_cast<bool>(procs >> pid);
}

}  // namespace

std::string Cgroup2MountPoint() {
  std::ifstream mounts("/proc/self/mounts");
  std::string line;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string device, mount_point, type;
    fields >> device >> mount_point >> type;
    if (type == "cgroup2") return mount_point;
  }
  return "";
}

// Where this process's worker cgroups go; "" without cgroup2.
std::string WorkerCgroupParent() {
  const std::string mount = Cgroup2MountPoint();
  const std::string own = OwnCgroupPath();
  if (mount.empty() || own.empty()) return "";
  return mount + (own == "/" ? "" : own);
}

namespace {

// Kills what is in the cgroup at `path`, waits (up to 2 s) until it is
// empty, and removes it; whether it is gone.
bool KillAndRemove(const std::string& path) {
  if (IsPopulated(path)) {
    WriteFile(path + "/cgroup.kill", "1");
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (IsPopulated(path) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return rmdir(path.c_str()) == 0;
}

// The owner's pid in a worker cgroup's name ("trl-agent-<pid>-..."), or 0.
pid_t OwnerOf(const std::string& name) {
  static const std::string kPrefix = "trl-agent-";
  if (name.rfind(kPrefix, 0) != 0) return 0;
  return std::atoi(name.c_str() + kPrefix.size());
}

}  // namespace

int RemoveStaleWorkerCgroups() {
  const std::string parent = WorkerCgroupParent();
  if (parent.empty()) return 0;
  int removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(parent, error)) {
    const pid_t owner = OwnerOf(entry.path().filename().string());
    if (owner <= 0 || kill(owner, 0) == 0 || errno != ESRCH) continue;
    // Its agent is gone (SIGKILL, a crash): whatever its workers left
    // there, daemons that left their session and cleared their environment
    // included, is killed now, then the cgroup goes.
    if (KillAndRemove(entry.path().string())) ++removed;
  }
  return removed;
}

WorkerCgroupsEnded EndWorkerCgroupsOf(pid_t owner) {
  WorkerCgroupsEnded ended;
  const std::string parent = WorkerCgroupParent();
  if (parent.empty() || owner <= 0) return ended;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(parent, error)) {
    if (OwnerOf(entry.path().filename().string()) != owner) continue;
    if (KillAndRemove(entry.path().string())) {
      ++ended.removed;
    } else {
      ended.all_empty = ended.all_empty && !IsPopulated(entry.path().string());
    }
  }
  if (error) ended.all_empty = false;
  return ended;
}

std::unique_ptr<WorkerCgroup> WorkerCgroup::Create(const std::string& name) {
  const std::string parent = WorkerCgroupParent();
  if (parent.empty()) return nullptr;
  const std::string path = parent + "/" + name;
  if (mkdir(path.c_str(), 0755) != 0) return nullptr;
  if (access((path + "/cgroup.procs").c_str(), W_OK) != 0) {
    rmdir(path.c_str());
    return nullptr;
  }
  return std::unique_ptr<WorkerCgroup>(new WorkerCgroup(path));
}

WorkerCgroup::WorkerCgroup(std::string path)
    : path_(std::move(path)), procs_path_(path_ + "/cgroup.procs") {}

WorkerCgroup::~WorkerCgroup() {
  KillAll();
  rmdir(path_.c_str());
}

bool WorkerCgroup::KillAll() {
  const bool kill_file = WriteFile(path_ + "/cgroup.kill", "1");
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (IsPopulated(path_)) {
    if (!kill_file) {
      // Kernels before 5.14 have no cgroup.kill: signal the members.
      std::istringstream procs(ReadKernelFile(procs_path_));
      pid_t pid;
      while (procs >> pid) kill(pid, SIGKILL);
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace trl

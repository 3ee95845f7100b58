#include "agent/cleanup/stale_workers.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/procfs/process_facts.h"

namespace trl {

namespace {

// The network namespace `pid` lives in ("net:[4026531840]"), or "" when it
// cannot be read.
std::string NetworkNamespaceOf(const std::string& pid) {
  std::error_code error;
  const auto link = std::filesystem::read_symlink(
      std::filesystem::path("/proc") / pid / "ns" / "net", error);
  return error ? std::string() : link.string();
}

}  // namespace

StaleProcesses KillStaleProcessesOf(const std::string& coordinator_address,
                                    int machine_rank) {
  const std::string address_entry =
      "TRL_LAUNCH_COORDINATOR=" + coordinator_address;
  // Every worker has it, a plain process too (GROUP_RANK is torchrun's).
  const std::string rank_entry =
      "TRL_MACHINE_RANK=" + std::to_string(machine_rank);
  const pid_t self = getpid();
  // Only what started before this sweep is an earlier agent's: workers
  // started since are those of whoever the coordinator gave the machine to
  // after it accepted us (a spare, at once; on test hosts that share a pid
  // namespace, or two agents of one host, they are visible here).
  timespec boot = {};
  clock_gettime(CLOCK_BOOTTIME, &boot);
  const unsigned long long ticks_per_second = sysconf(_SC_CLK_TCK);
  const unsigned long long sweep_began =
      static_cast<unsigned long long>(boot.tv_sec) * ticks_per_second +
      static_cast<unsigned long long>(boot.tv_nsec) * ticks_per_second /
          1000000000ULL;
  // Only what runs on this host: a process in another network namespace
  // is another host's as far as the job goes (its address is another), and
  // test hosts, network namespaces that share one pid namespace, see each
  // other's processes: a spare given this machine on another test host
  // could start its workers before this sweep began.
  const std::string own_network = NetworkNamespaceOf("self");
  StaleProcesses result;
  std::set<pid_t> killed;
  std::set<pid_t> groups;
  // Killing a worker may reparent its children: look again, a few times.
  for (int round = 0; round < 5; ++round) {
    std::vector<pid_t> found;
    std::set<pid_t> agents;
    for (pid_t pid : AllProcesses()) {
      if (pid == self || killed.count(pid)) continue;
      ProcessLinks info;
      if (!ReadProcessLinks(pid, &info) || info.parent == self) continue;
      if (info.start_time >= sweep_began) continue;
      if (NetworkNamespaceOf(std::to_string(pid)) != own_network) continue;
      if (!EnvironmentHasBoth(pid, address_entry, rank_entry)) continue;
      found.push_back(pid);
      if (info.group > 1 && kill(-info.group, SIGKILL) == 0) {
        groups.insert(info.group);
      }
      // The agent that started it, unless that is a coordinator (machine
      // 0's agent runs inside trl-coord) or we are its ancestor.
      if (info.parent > 1 && info.parent != self &&
          CommandNameOf(info.parent) == "trl-agent") {
        agents.insert(info.parent);
      }
    }
    for (pid_t agent : agents) {
      if (!killed.count(agent) && kill(agent, SIGKILL) == 0) {
        killed.insert(agent);
        ++result.agents;
      }
    }
    if (found.empty()) break;
    for (pid_t pid : found) {
      kill(pid, SIGKILL);
      killed.insert(pid);
      ++result.workers;
    }
  }
  // Gone for good before the caller starts workers (SIGKILL is not
  // instant: a process with a large GPU context takes a while). A zombie
  // is dead enough: it runs nothing, and its parent (killed too, or a
  // subreaper that may not reap soon) or init reaps it.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (pid_t group : groups) {
    while (GroupHasRunningMembers(group) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  for (pid_t pid : killed) {
    while (IsRunning(pid) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return result;
}

}  // namespace trl

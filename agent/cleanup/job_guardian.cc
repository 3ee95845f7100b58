#include "agent/cleanup/job_guardian.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/cleanup/exit_ledger.h"
#include "agent/cleanup/fence_page.h"
#include "agent/procfs/process_facts.h"
#include "agent/workers/worker_cgroup.h"
#include "common/daemon_process.h"
#include "common/host_identity.h"

namespace trl {
namespace {

std::atomic<pid_t> guardian_pid{0};
std::atomic<FencePage*> fence_page{nullptr};

constexpr std::chrono::milliseconds kExitsEvery{100};
// How long a dead agent's killed workers may take to end before the
// guardian gives up speaking for the agent (a process in the kernel's
// uninterruptible sleep, a GPU being torn down).
constexpr std::chrono::milliseconds kEndsAwaited{3000};

// Where the workers' exits are kept (exit_ledger.h), found before the fork.
struct LedgerPlace {
  std::string root;
  std::string host_id;
};

using Noted = std::map<pid_t, unsigned long long>;  // pid -> start time

// Whether the process `links` describe still runs: a zombie leader with
// threads left has not ended (its other threads may run, and hold its
// memory, files and devices, until they end too).
bool Runs(const ProcessLinks& links) {
  return links.state != 'X' && (links.state != 'Z' || links.threads > 1);
}

// Every process below `root`, by parent links (without /proc/PID/task/*/
// children, which not every kernel has: one pass over /proc).
Noted DescendantsOf(pid_t root, pid_t self) {
  std::multimap<pid_t, std::pair<pid_t, unsigned long long>> children;
  for (pid_t pid : AllProcesses()) {
    ProcessLinks links;
    if (ReadProcessLinks(pid, &links) && Runs(links)) {
      children.emplace(links.parent, std::make_pair(pid, links.start_time));
    }
  }
  Noted found;
  std::vector<pid_t> frontier = {root};
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    auto [first, last] = children.equal_range(parent);
    for (auto it = first; it != last; ++it) {
      const auto [pid, start_time] = it->second;
      if (pid == self || found.count(pid)) continue;
      found[pid] = start_time;
      frontier.push_back(pid);
    }
  }
  return found;
}

// Whether `pid` is still the process noted with `start_time`.
bool StillTheSame(pid_t pid, unsigned long long start_time) {
  ProcessLinks links;
  return ReadProcessLinks(pid, &links) && links.start_time == start_time &&
         Runs(links);
}

// Freezes the noted processes that are still alive, adds what they forked
// since they were noted (frozen too, until nothing new appears), then
// kills them all. Returns how many were killed; `killed`, if given, gets
// them.
int KillNoted(Noted noted, pid_t daemon, pid_t self, Noted* killed_ones) {
  Noted targets;
  for (const auto& [pid, start_time] : noted) {
    if (pid > 1 && pid != daemon && pid != self &&
        StillTheSame(pid, start_time)) {
      targets[pid] = start_time;
    }
  }
  std::set<pid_t> stopped;
  for (int round = 0; round < 10 && !targets.empty(); ++round) {
    for (const auto& [pid, start_time] : targets) {
      if (!stopped.count(pid) && StillTheSame(pid, start_time)) {
        kill(pid, SIGSTOP);
        stopped.insert(pid);
      }
    }
    bool grew = false;
    for (pid_t pid : AllProcesses()) {
      ProcessLinks links;
      if (targets.count(pid) || pid == self || pid == daemon ||
          !ReadProcessLinks(pid, &links) || !Runs(links)) {
        continue;
      }
      if (targets.count(links.parent)) {
        targets[pid] = links.start_time;
        grew = true;
      }
    }
    if (!grew) break;
  }
  int killed = 0;
  for (const auto& [pid, start_time] : targets) {
    if (StillTheSame(pid, start_time) && kill(pid, SIGKILL) == 0) ++killed;
  }
  if (killed_ones != nullptr) *killed_ones = std::move(targets);
  return killed;
}

// Whether every one of `processes` has ended (a zombie has: its memory,
// files and devices are given back), waiting up to `patience`.
bool AllEnded(const Noted& processes, std::chrono::milliseconds patience) {
  const auto give_up = std::chrono::steady_clock::now() + patience;
  while (true) {
    bool all = true;
    for (const auto& [pid, start_time] : processes) {
      if (StillTheSame(pid, start_time)) {
        all = false;
        break;
      }
    }
    if (all) return true;
    if (std::chrono::steady_clock::now() >= give_up) return false;
    usleep(5000);
  }
}

// Sends the dead agent's last word (fence_page.h) to its coordinator, which
// may then give the agent's ranks to another machine without waiting out
// its lease: only when the guardian noted the agent's processes after its
// last worker start and has seen every one of them end.
void SayTheAgentIsGone(pid_t daemon, const FencePage& fence,
                       bool noted_every_worker, const Noted& killed) {
  const std::optional<FencePage::LastWord> word = fence.ReadLastWord();
  if (!word) return;  // it never had a session with a coordinator
  if (!noted_every_worker || !AllEnded(killed, kEndsAwaited)) {
    std::fprintf(stderr,
                 "trl-guardian: process %d is gone, but not every worker it "
                 "started is known to have ended: its coordinator waits out "
                 "its lease\n",
                 static_cast<int>(daemon));
    return;
  }
  const int out = socket(word->to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (out < 0) return;
  // Three times: a datagram may be lost; the coordinator takes the first.
  for (int copy = 0; copy < 3; ++copy) {
    if (copy > 0) usleep(20000);
    sendto(out, word->datagram.data(), word->datagram.size(), MSG_DONTWAIT,
           reinterpret_cast<const sockaddr*>(&word->to), word->to_length);
  }
  close(out);
  std::fprintf(stderr,
               "trl-guardian: process %d is gone and every worker it started "
               "has ended; told its coordinator\n",
               static_cast<int>(daemon));
}

// Sets `timer` to go off at the fence's deadline (CLOCK_BOOTTIME), or
// disarms it.
void SetFenceTimer(int timer, std::optional<int64_t> deadline_ns) {
  itimerspec when{};
  if (deadline_ns) {
    when.it_value.tv_sec = static_cast<time_t>(*deadline_ns / 1000000000);
    when.it_value.tv_nsec = static_cast<long>(*deadline_ns % 1000000000);
  }
  timerfd_settime(timer, TFD_TIMER_ABSTIME, &when, nullptr);
}

[[noreturn]] void GuardianMain(pid_t daemon, int death_fd,
                               std::chrono::milliseconds interval,
                               const FencePage* fence,
                               const LedgerPlace& ledger) {
  prctl(PR_SET_NAME, "trl-guardian");
  // Its own process group: a signal to the daemon's group (a terminal's
  // ^C) is the daemon's to handle, and the guardian must outlive it.
  setpgid(0, 0);
  // Holds no pipe or socket of the daemon's (a reader waiting for the
  // daemon's output to end, a port): stdin and stdout go to /dev/null,
  // stderr stays for its one line.
  const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
  }
  if (dup2(death_fd, 3) == 3) death_fd = 3;
  if (close_range(4, ~0U, 0) != 0) {
    for (int fd = 4; fd < 4096; ++fd) close(fd);
  }
  ForgetTokenFromEnvironment();
  // The fence's alarm, on the boot clock: it goes off at the deadline even
  // when the machine was suspended or this process stopped meanwhile.
  const int timer = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC);
  const pid_t self = getpid();
  Noted noted;
  // The workers' ends the daemon has not reaped (it is frozen) are kept
  // before a SIGKILL of the daemon takes them (exit_ledger.h): looked for
  // more often than the whole tree is noted, since a frozen agent may be
  // killed soon after they end.
  LedgerWatch ends(ledger.root, ledger.host_id);
  const auto exits_every = std::min(interval, kExitsEvery);
  auto next_scan = std::chrono::steady_clock::now();
  std::optional<int64_t> timer_set;  // the deadline the timer is set to
  int64_t fenced = 0;                // the last deadline acted on
  // The agent's worker starts as they were when `noted` was taken.
  std::optional<FencePage::Starts> noted_starts;
  while (true) {
    std::optional<int64_t> deadline =
        fence ? fence->DeadlineNs() : std::nullopt;
    if (deadline && *deadline == fenced) deadline.reset();
    if (timer >= 0 && deadline != timer_set) {
      SetFenceTimer(timer, deadline);
      timer_set = deadline;
    }
    pollfd watch[2] = {{death_fd, POLLIN, 0}, {timer, POLLIN, 0}};
    const int ready =
        poll(watch, timer >= 0 ? 2 : 1, static_cast<int>(exits_every.count()));
    // Nothing is ever written: readable means the daemon's end closed.
    if ((ready > 0 && watch[0].revents != 0) || (ready < 0 && errno != EINTR)) {
      break;
    }
    if (getppid() != daemon) break;  // reparented: the daemon is gone
    if (ready > 0 && watch[1].revents != 0) {
      uint64_t expirations = 0;
      ssize_t ignored = read(timer, &expirations, sizeof(expirations));
      (void)ignored;
      timer_set.reset();
    }
    // The agent may have moved the deadline on while the timer ran: only
    // the one read now counts.
    const std::optional<int64_t> now_due =
        fence ? fence->DeadlineNs() : std::nullopt;
    if (now_due && *now_due != fenced && FencePage::BootNowNs() >= *now_due) {
      fenced = *now_due;
      const int killed =
          KillNoted(DescendantsOf(daemon, self), daemon, self, nullptr);
      if (killed > 0) {
        std::fprintf(stderr,
                     "trl-guardian: process %d kept its workers past its "
                     "lease (frozen, or cut off from its coordinator); "
                     "killed %d of its process(es)\n",
                     static_cast<int>(daemon), killed);
      }
      continue;
    }
    ends.KeepEndsOfZombiesOf(daemon);
    // The whole tree every interval, and at once after the agent started
    // workers (they are noted within this period).
    const std::optional<FencePage::Starts> starts =
        fence ? std::optional(fence->WorkerStarts()) : std::nullopt;
    if (std::chrono::steady_clock::now() >= next_scan ||
        starts != noted_starts) {
      noted = DescendantsOf(daemon, self);
      noted_starts = starts;
      next_scan = std::chrono::steady_clock::now() + interval;
    }
  }
  // Its own worker cgroups first: it may not be reaped yet, so the sweep
  // of stale ones would take it for alive.
  const WorkerCgroupsEnded own = EndWorkerCgroupsOf(daemon);
  const int cgroups = own.removed + RemoveStaleWorkerCgroups();
  Noted killed_ones;
  const int killed = KillNoted(std::move(noted), daemon, self, &killed_ones);
  if (killed > 0 || cgroups > 0) {
    std::fprintf(stderr,
                 "trl-guardian: process %d is gone; ended %d process(es) it "
                 "left and %d worker cgroup(s)\n",
                 static_cast<int>(daemon), killed, cgroups);
  }
  if (fence) {
    // Every worker was noted if no start was under way at the last note
    // and none began since.
    const FencePage::Starts now = fence->WorkerStarts();
    SayTheAgentIsGone(
        daemon, *fence,
        now.Settled() && noted_starts && *noted_starts == now && own.all_empty,
        killed_ones);
  }
  _exit(0);
}

}  // namespace

bool StartJobGuardian(std::chrono::milliseconds interval) {
  int death_pipe[2];
  if (pipe2(death_pipe, O_CLOEXEC) != 0) return false;
  FencePage* fence = FencePage::Create();
  const LedgerPlace ledger{DefaultLedgerRoot(), LocalHostId()};
  const pid_t daemon = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(death_pipe[0]);
    close(death_pipe[1]);
    return false;
  }
  if (pid == 0) {
    close(death_pipe[1]);
    GuardianMain(daemon, death_pipe[0], interval, fence, ledger);
  }
  // The write end stays open for as long as this process lives (and only
  // here: close-on-exec keeps it from the workers).
  close(death_pipe[0]);
  guardian_pid = pid;
  fence_page = fence;
  // A daemon that exits (not one killed or crashed) leaves no last word:
  // it said goodbye itself, and its guardian ends at once.
  if (fence != nullptr) {
    std::atexit([] {
      if (FencePage* page = fence_page.load()) page->ForgetLastWord();
    });
  }
  return true;
}

pid_t JobGuardianPid() { return guardian_pid.load(); }

bool JobGuardianAlive() {
  const pid_t pid = guardian_pid.load();
  if (pid <= 0) return false;
  siginfo_t info = {};
  // Without reaping it: an exited guardian is a zombie of this process.
  if (waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return false;
  }
  return info.si_pid != pid;
}

FencePage* GuardianFencePage() { return fence_page.load(); }

}  // namespace trl

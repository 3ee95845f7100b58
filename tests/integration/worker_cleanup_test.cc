// What a worker leaves behind is cleaned up both ways the agent has: a
// cgroup v2 per worker group, and the subreaper fallback.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/cleanup/orphans.h"
#include "agent/procfs/process_facts.h"
#include "agent/workers/worker_cgroup.h"
#include "agent/workers/worker_process.h"
#include "tests/integration/subprocess.h"

namespace trl {
namespace {

using std::chrono::seconds;

// Starts a worker that leaves a daemon (own session, ignores SIGTERM,
// started through `prefix`, e.g. "env -i") and exits; returns the
// daemon's pid.
pid_t RunWorkerThatLeavesADaemon(const std::string& cgroup_procs,
                                 const std::string& pid_file,
                                 const std::string& prefix = "") {
  WorkerSpec spec;
  spec.executable = "/bin/sh";
  spec.argv = {"/bin/sh", "-c",
               prefix + " setsid" + " sh -c 'trap \"\" TERM; echo $$ > " +
                   pid_file +
                   "; exec sleep 60' </dev/null >/dev/null 2>&1 & wait_for=50; "
                   "while [ ! -s " +
                   pid_file +
                   " ] && [ $wait_for -gt 0 ]; do sleep 0.02; "
                   "wait_for=$((wait_for-1)); done"};
  spec.environment = {{"PATH", "/usr/bin:/bin"},
                      {"TRL_JOB_ID", "cleanup-test"},
                      {"TRL_GENERATION", "7"}};
  spec.cgroup_procs_path = cgroup_procs;
  auto worker = WorkerProcess::Spawn(spec);
  EXPECT_TRUE(worker.ok()) << worker.status();
  if (!worker.ok()) return -1;
  (*worker)->Wait();
  std::ifstream in(pid_file);
  pid_t daemon = -1;
  in >> daemon;
  return daemon;
}

TEST(WorkerCleanupTest, CgroupKillEndsADaemonThatLeftItsSession) {
  auto cgroup = WorkerCgroup::Create("trl-test-" + std::to_string(getpid()));
  if (!cgroup) {
    GTEST_SKIP() << "no writable cgroup2 hierarchy here (mount: '"
                 << Cgroup2MountPoint() << "')";
  }
  const std::string pid_file =
      ::testing::TempDir() + "/trl-daemon-cg-" + std::to_string(getpid());
  const pid_t daemon =
      RunWorkerThatLeavesADaemon(cgroup->procs_path(), pid_file);
  ASSERT_GT(daemon, 0);
  ASSERT_TRUE(testing::ProcessExists(daemon));
  EXPECT_TRUE(cgroup->KillAll());
  EXPECT_TRUE(testing::WaitUntil(
      [daemon] { return !testing::ProcessExists(daemon); }, seconds(5)));
  const std::string path = cgroup->path();
  cgroup.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
  unlink(pid_file.c_str());
}

TEST(WorkerCleanupTest, SubreaperKillsWhatWorkersLeft) {
  // A daemon of generation 7 that left its session, reparented to us: at
  // the end of any generation, nothing of a worker's may run on.
  BecomeChildSubreaper();
  const std::string pid_file =
      ::testing::TempDir() + "/trl-daemon-sr-" + std::to_string(getpid());
  const pid_t daemon = RunWorkerThatLeavesADaemon("", pid_file);
  ASSERT_GT(daemon, 0);
  ASSERT_TRUE(testing::ProcessExists(daemon));
  EXPECT_EQ(KillOrphansOfGeneration("cleanup-test", 8), 1);
  EXPECT_FALSE(testing::ProcessExists(daemon));
  unlink(pid_file.c_str());
}

TEST(WorkerCleanupTest, SubreaperKillsADaemonThatClearedItsEnvironment) {
  // Left its session and cleared its environment: nothing says which
  // generation it was, but no child of ours outside our process group is
  // ours to keep. A child in our own group (an NCCL helper) is.
  BecomeChildSubreaper();
  const pid_t own = fork();
  ASSERT_GE(own, 0);
  if (own == 0) {
    execl("/bin/sleep", "sleep", "30", nullptr);
    _exit(127);
  }
  const std::string pid_file =
      ::testing::TempDir() + "/trl-daemon-env-" + std::to_string(getpid());
  const pid_t daemon = RunWorkerThatLeavesADaemon("", pid_file, "env -i");
  ASSERT_GT(daemon, 0);
  ASSERT_TRUE(testing::ProcessExists(daemon));
  EXPECT_EQ(KillOrphansOfGeneration("cleanup-test", 7), 1);
  EXPECT_FALSE(testing::ProcessExists(daemon));
  EXPECT_TRUE(testing::ProcessExists(own)) << "our own child was killed";
  kill(own, SIGKILL);
  waitpid(own, nullptr, 0);
  unlink(pid_file.c_str());
}

TEST(ProcessFactsTest, ANewlineInTheCommandNameHidesNothing) {
  // PR_SET_NAME takes any bytes: a name with a newline once cut
  // /proc/PID/stat short, and the process hid from every sweep.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    prctl(PR_SET_NAME, "x\ny) 1 2");
    pause();
    _exit(0);
  }
  ASSERT_TRUE(testing::WaitUntil(
      [child] { return CommandNameOf(child).rfind("x", 0) == 0; }, seconds(5)));
  ProcessLinks links;
  EXPECT_TRUE(ReadProcessLinks(child, &links));
  EXPECT_EQ(links.parent, getpid());
  EXPECT_GT(links.start_time, 0u);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

}  // namespace
}  // namespace trl

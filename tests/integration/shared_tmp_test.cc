// Another local user (nobody) plants directories, links and a state file at
// every path in the shared $TMPDIR that the daemons and the demo used to
// take; a victim then runs a real demo job. Nothing of the victim's lands
// in the attacker's directories, no file is written through a link, and
// the victim's files are its own, mode 0600.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kAttacker = 65534;

// Every path under `dir`, with its owner.
std::set<std::string> Listing(const std::string& dir) {
  std::set<std::string> paths;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(
           dir, fs::directory_options::skip_permission_denied, error);
       it != fs::recursive_directory_iterator(); it.increment(error)) {
    struct stat info;
    lstat(it->path().c_str(), &info);
    paths.insert(it->path().string() + " uid " + std::to_string(info.st_uid));
  }
  return paths;
}

TEST_F(LauncherTest, PlantedPathsInASharedTmpdirAreNeverUsed) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to act as two users";
  // Under /tmp itself, not the test's own (private) TMPDIR: the other
  // user must be able to reach it.
  char root_template[] = "/tmp/trl-shared-XXXXXX";
  ASSERT_NE(mkdtemp(root_template), nullptr);
  const std::string root = root_template;
  const std::string shared = root + "/tmp";   // like /tmp: 1777
  const std::string victim = root + "/home";  // the victim's HOME
  const std::string loot = root + "/loot";    // the attacker's own
  fs::create_directories(shared);
  fs::create_directories(victim);
  fs::create_directories(loot);
  chmod(shared.c_str(), 01777);
  chmod(victim.c_str(), 0700);
  chmod(root.c_str(), 0755);
  chown(loot.c_str(), kAttacker, kAttacker);
  chmod(loot.c_str(), 0777);
  const std::string precious = victim + "/precious";
  std::ofstream(precious) << "precious\n";

  // The attacker's plants, made as the attacker.
  const std::string plant =
      "set -e; cd " + shared +
      "; mkdir -m 777 trl-launch trl-demo-train; "
      "ln -s " +
      precious + " trl-launch/coord-127.0.0.1-" + std::to_string(port_) +
      ".state; " + "for i in $(seq 1 50); do ln -s " + precious +
      " trl-launch/coord-127.0.0.1-" + std::to_string(port_) +
      ".state.tmp.$i; done; "
      "ln -s " +
      loot +
      " trl-demo-train/trl-victimjob; "
      "mkdir -m 777 trl-launch-m0-" +
      std::to_string(getpid()) +
      // The exit ledger's place ($TMPDIR/trl-launch-<uid>/exits), the
      // victim's uid (root here), made first and linked to the loot.
      "; mkdir -m 777 trl-launch-0; ln -s " + loot + " trl-launch-0/exits";
  Subprocess attacker({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                       "--clear-groups", "--", "/bin/sh", "-c", plant});
  ASSERT_EQ(attacker.Wait(seconds(10)), 0) << attacker.Output();
  const auto planted = Listing(shared);
  const auto loot_before = Listing(loot);

  std::vector<std::string> argv = {"/usr/bin/env",
                                   "-u",
                                   "XDG_RUNTIME_DIR",
                                   "HOME=" + victim,
                                   "TMPDIR=" + shared,
                                   "HF_HOME=" + victim,
                                   "TRL_JOB_ID=trl-victimjob",
                                   TRL_COORD_BIN,
                                   "start"};
  for (auto& flag : ClusterFlags(1, 2)) argv.push_back(flag);
  for (auto arg : {TRL_DEMO_TRAIN_BIN, "--max_steps", "20"}) {
    argv.push_back(arg);
  }
  Subprocess victim_job(argv);
  ASSERT_EQ(victim_job.Wait(seconds(60)), 0) << victim_job.Output();

  // Nothing landed in the attacker's places, nothing went through a link.
  EXPECT_EQ(Listing(loot), loot_before);
  std::ifstream in(precious);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "precious");
  for (const auto& entry : Listing(shared)) {
    if (planted.count(entry)) continue;
    // The agent's scratch directory (mkdtemp, the victim's, 0700) is
    // removed at its end; anything else new is a leak.
    ADD_FAILURE() << "the victim left " << entry << " in the shared TMPDIR";
  }
  // The victim's own output: in its private directory, readable by it alone.
  const std::string weights =
      victim + "/.trl/run/demo-train/trl-victimjob/final_weights.txt";
  struct stat info;
  ASSERT_EQ(stat(weights.c_str(), &info), 0) << victim_job.Output();
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(info.st_uid, 0u);
  fs::remove_all(root);
}

}  // namespace
}  // namespace trl::testing

// What the real daemons do when the world around them misbehaves: a
// console that closes, a second stop signal while they wait for workers
// that ignore the first, a coordinator that never comes back.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <string>

#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

// The SIGPIPE bit of the "SigIgn:" mask a worker printed, or -1.
int SigpipeIgnoredIn(const std::string& output) {
  static const std::regex pattern("SigIgn:\\s*([0-9a-f]+)");
  std::smatch match;
  if (!std::regex_search(output, match, pattern)) return -1;
  const unsigned long long mask = std::stoull(match[1], nullptr, 16);
  return (mask >> (SIGPIPE - 1)) & 1;
}

TEST_F(LauncherTest, AConsoleThatClosesDoesNotKillTheCoordinator) {
  // `trl-coord start ... | head -n 2`: after head exits, every write to the
  // console fails. The job must go on and report its own result.
  const std::string worker =
      "for i in $(seq 300); do echo line $i; done; "
      "grep SigIgn /proc/self/status >&2; sleep 0.3; "
      "for i in $(seq 300); do echo more $i; done";
  std::vector<std::string> argv = {
      "/bin/bash",
      "-c",
      "\"$@\" | head -n 2 >/dev/null; exit ${PIPESTATUS[0]}",
      "pipeline",
      TRL_COORD_BIN,
      "start"};
  for (auto& flag : ClusterFlags(1, 1)) argv.push_back(flag);
  for (auto arg : {"/bin/sh", "-c", worker.c_str()}) argv.push_back(arg);
  Subprocess coord(argv);
  ASSERT_EQ(coord.Wait(seconds(30)), 0) << coord.Output();
  EXPECT_NE(coord.Stderr().find("succeeded"), std::string::npos)
      << coord.Stderr();
  // Workers get SIGPIPE's default action back (a worker piping into head
  // must end as it would outside the launcher).
  EXPECT_EQ(SigpipeIgnoredIn(coord.Stderr()), 0) << coord.Stderr();
}

}  // namespace
}  // namespace trl::testing

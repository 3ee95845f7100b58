#include "common/worker_command.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

namespace trl {
namespace {

using Argv = std::vector<std::string>;

TEST(WorkerCommandTest, PythonScriptRunsUnbuffered) {
  auto argv =
      BuildWorkerArgv({"train.py", "--lr", "1e-4"}, false, false, "python3");
  ASSERT_TRUE(argv.ok());
  EXPECT_EQ(*argv, (Argv{"python3", "-u", "train.py", "--lr", "1e-4"}));
}

TEST(WorkerCommandTest, ModuleRunsWithDashM) {
  auto argv = BuildWorkerArgv({"trl.scripts.sft", "--x"}, true, false, "py");
  ASSERT_TRUE(argv.ok());
  EXPECT_EQ(*argv, (Argv{"py", "-u", "-m", "trl.scripts.sft", "--x"}));
}

TEST(WorkerCommandTest, NoPythonRunsTheCommandItself) {
  auto argv = BuildWorkerArgv({"train.py", "a"}, false, true, "python3");
  ASSERT_TRUE(argv.ok());
  EXPECT_EQ(*argv, (Argv{"train.py", "a"}));
  argv = BuildWorkerArgv({"/bin/true"}, false, false, "python3");
  ASSERT_TRUE(argv.ok());
  EXPECT_EQ(*argv, (Argv{"/bin/true"}));
}

TEST(WorkerCommandTest, RefusesBadCombinations) {
  EXPECT_FALSE(BuildWorkerArgv({}, false, false, "python3").ok());
  auto both = BuildWorkerArgv({"x.py"}, true, true, "python3");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("--module and --no_python"),
            std::string::npos);
}

TEST(WorkerCommandTest, ResolvesOnPath) {
  auto found = ResolveExecutable("true", "/nonexistent:/bin:/usr/bin");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->back(), 'e');
  EXPECT_NE(found->find("/true"), std::string::npos);
  auto missing = ResolveExecutable("no-such-program-xyz", "/bin:/usr/bin");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no-such-program-xyz"),
            std::string::npos);
  const std::string plain = testing::TempDir() + "/not-executable";
  std::ofstream(plain) << "data";
  chmod(plain.c_str(), 0644);
  EXPECT_FALSE(ResolveExecutable(plain, "").ok());
}

}  // namespace
}  // namespace trl

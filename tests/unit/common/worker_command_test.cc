#include "common/worker_command.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
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

TEST(WorkerCommandTest, AnArgumentThatIsNotUtf8IsRefusedNamingIt) {
  const auto argv =
      BuildWorkerArgv({"train.py", "--name", "caf\xE9"}, false, false, "py");
  ASSERT_FALSE(argv.ok());
  EXPECT_NE(argv.status().message().find("argument 3 of the command"),
            absl::string_view::npos)
      << argv.status().message();
  EXPECT_TRUE(
      BuildWorkerArgv({"train.py", "caf\xC3\xA9"}, false, false, "py").ok());
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

TEST(WorkerCommandTest, AnAgentsOwnPythonReplacesOnlyTheInterpreter) {
  const Argv argv = {"python3", "-u", "train.py", "--lr", "1"};
  EXPECT_EQ(WithOwnPython(argv, true, "/venv/bin/python"),
            (Argv{"/venv/bin/python", "-u", "train.py", "--lr", "1"}));
  EXPECT_EQ(WithOwnPython(argv, true, ""), argv);  // none given
  const Argv tool = {"torchrun", "train.py"};
  EXPECT_EQ(WithOwnPython(tool, false, "/venv/bin/python"), tool);
}

TEST(WorkerCommandTest, TheCheckNamesAMissingScriptAndWhereItLooked) {
  char dir_template[] = "/tmp/trl-check-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  std::ofstream(dir + "/train.py") << "print(1)\n";
  const std::string path = "/usr/bin:/bin";
  EXPECT_TRUE(
      CheckCommandRunsHere({"sh", "-u", "train.py"}, true, path, dir).ok());
  EXPECT_TRUE(CheckCommandRunsHere({"sh", "-u", dir + "/train.py"}, true, path,
                                   "/nonexistent")
                  .ok());
  const auto missing =
      CheckCommandRunsHere({"sh", "-u", "eval.py"}, true, path, dir);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(),
            "the script eval.py is not a file in the agent's working "
            "directory " +
                dir);
  // A directory is not a script.
  EXPECT_FALSE(CheckCommandRunsHere({"sh", "-u", "."}, true, path, dir).ok());
  // A module is the interpreter's to find.
  EXPECT_TRUE(
      CheckCommandRunsHere({"sh", "-u", "-m", "trl"}, true, path, dir).ok());
  // The interpreter must resolve as the workers' would.
  const auto no_python = CheckCommandRunsHere(
      {"no-such-python", "-u", "train.py"}, true, path, dir);
  EXPECT_NE(no_python.message().find("'no-such-python' was not found on PATH"),
            std::string::npos)
      << no_python.message();
  // Not Python: only the program is checked.
  EXPECT_TRUE(
      CheckCommandRunsHere({"sh", "-c", "true"}, false, path, dir).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trl

// Every flag of `accelerate launch` (tests/data/accelerate_launch_flags.txt,
// extracted from Accelerate's parser) is in common/accelerate_flags.cc and in
// the README's table, and is either honoured (trl-launch's parser knows it)
// or refused naming it; none can become the command.
#include "common/accelerate_flags.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/launch_options.h"

namespace trl {
namespace {

std::string Read(const std::string& relative) {
  std::ifstream in(std::string(TRL_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> AccelerateFlags() {
  std::vector<std::string> flags;
  std::istringstream lines(Read("tests/data/accelerate_launch_flags.txt"));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    flags.push_back(line);
  }
  return flags;
}

// README table rows: "| `--flag` ... | honoured|refused ... |", flag -> row.
std::map<std::string, std::string> ReadmeRows() {
  std::map<std::string, std::string> rows;
  std::istringstream lines(Read("README.md"));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("| `-", 0) != 0) continue;
    const size_t cell_end = line.find(" |", 1);
    const std::string cell = line.substr(0, cell_end);
    size_t at = 0;
    while ((at = cell.find('`', at)) != std::string::npos) {
      const size_t end = cell.find('`', at + 1);
      rows[cell.substr(at + 1, end - at - 1)] = line;
      at = end + 1;
    }
  }
  return rows;
}

const AccelerateLaunchFlag* Find(const std::string& spelled) {
  for (const auto& flag : AccelerateLaunchFlags()) {
    if (flag.name == spelled || flag.short_name == spelled) return &flag;
  }
  return nullptr;
}

TEST(AccelerateFlagsTest, TheListIsAccelerates) {
  const auto flags = AccelerateFlags();
  EXPECT_GE(flags.size(), 120u);
  for (const char* flag : {"--multi_gpu", "--num_cpu_threads_per_process",
                           "--same_network", "-q", "--dynamo_backend"}) {
    EXPECT_NE(std::find(flags.begin(), flags.end(), flag), flags.end()) << flag;
  }
}

TEST(AccelerateFlagsTest, EveryFlagIsInTheTableAndTheReadme) {
  const auto rows = ReadmeRows();
  for (const std::string& spelled : AccelerateFlags()) {
    const AccelerateLaunchFlag* flag = Find(spelled);
    ASSERT_NE(flag, nullptr)
        << spelled << " is not in common/accelerate_flags.cc";
    auto row = rows.find(spelled);
    ASSERT_NE(row, rows.end())
        << spelled << " is missing from the README's table of Accelerate's "
        << "flags";
    const bool says_refused =
        row->second.find("| refused") != std::string::npos;
    const bool says_honoured =
        row->second.find("| honoured") != std::string::npos;
    EXPECT_TRUE(says_refused != says_honoured) << row->second;
    EXPECT_EQ(says_refused, !flag->honoured) << row->second;
  }
}

TEST(AccelerateFlagsTest, HonouredFlagsAreKnownAndRefusedOnesNameThemselves) {
  CLI::App app;
  LaunchOptions options;
  AddLaunchFlags(app, options);
  for (const std::string& spelled : AccelerateFlags()) {
    const AccelerateLaunchFlag* flag = Find(spelled);
    ASSERT_NE(flag, nullptr) << spelled;
    CLI::Option* option = app.get_option_no_throw(spelled);
    ASSERT_NE(option, nullptr) << spelled << " is unknown to trl-launch";
    if (spelled.size() > 2 && spelled.find('_') != std::string::npos) {
      std::string kebab = spelled;
      std::replace(kebab.begin() + 2, kebab.end(), '_', '-');
      EXPECT_NE(app.get_option_no_throw(kebab), nullptr) << kebab;
    }
    if (flag->honoured) continue;
    // Given, it is refused before anything starts, by name.
    CLI::App refusing;
    LaunchOptions refused_options;
    AddLaunchFlags(refusing, refused_options);
    std::vector<std::string> args = {"train.py"};
    if (flag->takes_value) args.push_back("1");
    args.push_back(spelled);
    refusing.prefix_command();
    refusing.parse(args);
    EXPECT_EQ(refusing.remaining(), std::vector<std::string>{"train.py"})
        << spelled;
    auto config = ResolveLaunchConfig(refused_options, LocalMachine{});
    ASSERT_FALSE(config.ok()) << spelled;
    EXPECT_NE(config.status().message().find(flag->name), std::string::npos)
        << config.status();
  }
}

}  // namespace
}  // namespace trl

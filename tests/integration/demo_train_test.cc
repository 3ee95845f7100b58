// trl-demo-train through the real launcher on loopback: two CPU workers
// join through Gloo and the coordinator's store and train the same model
// as one process with the same effective batch; a worker killed mid-way
// restarts the job, which resumes from the checkpoint and ends with the
// weights of an uninterrupted run.
#include <signal.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

namespace fs = std::filesystem;

std::vector<float> ReadWeights(const fs::path& dir) {
  std::ifstream in(dir / "final_weights.txt");
  std::vector<float> weights;
  float value;
  while (in >> value) weights.push_back(value);
  return weights;
}

float MaxDifference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  return worst;
}

// The step of rank 0's checkpoint (0 when there is none yet).
int64_t CheckpointStep(const fs::path& dir) {
  std::ifstream in(dir / "checkpoint.bin", std::ios::binary);
  char header[16] = {};
  if (!in.read(header, sizeof(header))) return 0;
  int64_t step = 0;
  std::memcpy(&step, header + 8, sizeof(step));
  return step;
}

// Loss values of the "step N/M loss L" lines, in order.
std::vector<double> Losses(const std::string& output) {
  static const std::regex pattern("step [0-9]+/[0-9]+ loss ([0-9.]+)");
  std::vector<double> losses;
  for (std::sregex_iterator it(output.begin(), output.end(), pattern), end;
       it != end; ++it) {
    losses.push_back(std::stod((*it)[1]));
  }
  return losses;
}

// The pid of the worker of `job` with `rank` in `generation`, from /proc.
std::optional<pid_t> FindWorker(const std::string& job, int rank,
                                int generation) {
  const std::vector<std::string> wanted = {
      "TRL_JOB_ID=" + job, "RANK=" + std::to_string(rank),
      "TRL_GENERATION=" + std::to_string(generation)};
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "environ", std::ios::binary);
    std::string environ((std::istreambuf_iterator<char>(in)),
                        std::istreambuf_iterator<char>());
    std::set<std::string> vars;
    size_t start = 0;
    for (size_t end; (end = environ.find('\0', start)) != std::string::npos;
         start = end + 1) {
      vars.insert(environ.substr(start, end - start));
    }
    bool match = true;
    for (const auto& var : wanted) match = match && vars.count(var) > 0;
    if (match) return std::stoi(name);
  }
  return std::nullopt;
}

class DemoTrainTest : public LauncherTest {
 protected:
  void SetUp() override {
    LauncherTest::SetUp();
    dir_ = fs::temp_directory_path() /
           ("trl-demo-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    LauncherTest::TearDown();
    fs::remove_all(dir_);
  }

  static std::vector<std::string> Trainer(std::vector<std::string> args) {
    std::vector<std::string> command = {TRL_DEMO_TRAIN_BIN};
    command.insert(command.end(), args.begin(), args.end());
    return command;
  }

  fs::path dir_;
};

TEST_F(DemoTrainTest, TwoCpuWorkersTrainLikeOneProcessWithTheSameBatch) {
  const fs::path launched = dir_ / "launched", alone = dir_ / "alone";
  auto coord = StartCoordinator(
      1, 2,
      Trainer({"--per_device_train_batch_size", "4", "--max_steps", "40",
               "--logging_steps", "10", "--output_dir", launched}));
  ASSERT_EQ(coord->Wait(seconds(60)), 0) << coord->Output();
  const std::string output = coord->Output();
  EXPECT_NE(output.find("2 rank(s) over Gloo (TCP)"), std::string::npos)
      << output;
  EXPECT_NE(output.find("effective batch size 8 = 4 per device x 2 processes"),
            std::string::npos)
      << output;
  const auto losses = Losses(output);
  ASSERT_EQ(losses.size(), 4u) << output;
  EXPECT_LT(losses.back(), 0.5 * losses.front()) << output;

  Subprocess reference(Trainer({"--per_device_train_batch_size", "8",
                                "--max_steps", "40", "--output_dir", alone}));
  ASSERT_EQ(reference.Wait(seconds(60)), 0) << reference.Output();
  EXPECT_NE(reference.Output().find("1 rank(s) over single process"),
            std::string::npos);
  const auto a = ReadWeights(launched), b = ReadWeights(alone);
  ASSERT_EQ(a.size(), 8705u);
  EXPECT_LE(MaxDifference(a, b), 5e-8f);
}

TEST_F(DemoTrainTest, KilledWorkerResumesFromTheCheckpointToTheSameWeights) {
  const fs::path uninterrupted = dir_ / "uninterrupted",
                 interrupted = dir_ / "interrupted";
  auto args = [](const fs::path& out) {
    return std::vector<std::string>{"--per_device_train_batch_size",
                                    "4",
                                    "--max_steps",
                                    "1500",
                                    "--save_steps",
                                    "50",
                                    "--logging_steps",
                                    "500",
                                    "--output_dir",
                                    out};
  };
  {
    auto coord = StartCoordinator(1, 2, Trainer(args(uninterrupted)));
    ASSERT_EQ(coord->Wait(seconds(90)), 0) << coord->Output();
  }
  const std::string job = "trl-demo-kill-" + std::to_string(getpid());
  Subprocess coord(
      [&] {
        std::vector<std::string> argv = {TRL_COORD_BIN, "start"};
        for (auto& flag : ClusterFlags(1, 2)) argv.push_back(flag);
        argv.insert(argv.end(), {"--max_restarts", "1"});
        for (auto& arg : Trainer(args(interrupted))) argv.push_back(arg);
        return argv;
      }(),
      {"TRL_JOB_ID=" + job});
  ASSERT_TRUE(WaitUntil([&] { return CheckpointStep(interrupted) >= 100; },
                        seconds(60)))
      << coord.Output();
  auto victim = FindWorker(job, 1, 0);
  ASSERT_TRUE(victim.has_value()) << "no rank 1 of generation 0 found";
  worker_pids_.insert(*victim);
  const int64_t killed_at = CheckpointStep(interrupted);
  ASSERT_LT(killed_at, 1500) << "the run ended before the kill";
  ASSERT_EQ(kill(*victim, SIGKILL), 0);

  ASSERT_EQ(coord.Wait(seconds(90)), 0) << coord.Output();
  const std::string output = coord.Output();
  std::smatch resumed;
  ASSERT_TRUE(std::regex_search(
      output, resumed,
      std::regex("resumed from the checkpoint at step ([0-9]+)")))
      << output;
  EXPECT_GE(std::stoll(resumed[1]), killed_at);
  EXPECT_EQ(std::stoll(resumed[1]) % 50, 0);
  EXPECT_NE(output.find("generation 1"), std::string::npos) << output;
  // Same configuration, same order of additions: the same bits.
  const auto a = ReadWeights(uninterrupted), b = ReadWeights(interrupted);
  ASSERT_EQ(a.size(), 8705u);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace trl::testing

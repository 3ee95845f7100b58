// What a stranger with no token, or a worker (user code), can take from the
// real coordinator: nothing secret from `ps`, a bounded log from a flood of
// refused calls, no memory from a compressed "bomb", and nothing from the
// daemons' /proc files.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "proto/trl_launch.grpc.pb.h"
#include "tests/integration/job_status_probe.h"
#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

// VmRSS of `pid` in KiB, or -1.
long RssKib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

int CountOf(const std::string& text, const std::string& what) {
  int count = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

std::unique_ptr<pb::Store::Stub> StoreStub(int port) {
  return pb::Store::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
}

TEST_F(LauncherTest, PsHidesSecretsInTheCommand) {
  auto coord =
      StartCoordinator(1, 1,
                       {"/bin/sh", "-c", "sleep 30", "sh", "--hub_token",
                        "hf_VERYSECRET", "--api_key=sk-ALSOSECRET"},
                       {"--no_python"});
  ASSERT_TRUE(coord->WaitForOutput("generation 0", seconds(20)))
      << coord->Output();
  std::optional<pb::JobStatus> status;
  ASSERT_TRUE(WaitUntil(
      [&] { return (status = PsJson(port_)) && status->command_size() > 0; },
      seconds(20)));
  std::string shown;
  for (const auto& arg : status->command()) shown += arg + " ";
  EXPECT_EQ(shown.find("VERYSECRET"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("ALSOSECRET"), std::string::npos) << shown;
  EXPECT_NE(shown.find("--hub_token <redacted>"), std::string::npos) << shown;
  coord->Signal(SIGTERM);
  EXPECT_EQ(coord->Wait(seconds(40)), 128 + SIGTERM);
  EXPECT_EQ(coord->Output().find("VERYSECRET"), std::string::npos);
}

TEST_F(LauncherTest, AFloodOfRefusedCallsCostsAFewLogLines) {
  auto coord =
      StartCoordinator(1, 1, {"/bin/sh", "-c", "sleep 30"}, {"--no_python"});
  ASSERT_TRUE(coord->WaitForOutput("generation 0", seconds(20)));
  auto stub = pb::Coordinator::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                          grpc::InsecureChannelCredentials()));
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer not-the-token");
    context.set_deadline(std::chrono::system_clock::now() + seconds(5));
    pb::JobStatusRequest request;
    pb::JobStatus reply;
    const grpc::Status status = stub->GetJobStatus(&context, request, &reply);
    if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) ++refused;
    // An unauthenticated caller learns nothing of the job.
    EXPECT_TRUE(reply.job_id().empty());
  }
  EXPECT_EQ(refused, 2000);
  coord->Signal(SIGTERM);
  coord->Wait(seconds(40));
  EXPECT_LE(CountOf(coord->Stderr(), "refused"), 5) << coord->Stderr();
  EXPECT_GE(CountOf(coord->Stderr(), "refused"), 1);
}

TEST_F(LauncherTest, ACompressedBombIsRefusedWithoutInflatingIt) {
  auto coord =
      StartCoordinator(1, 1, {"/bin/sh", "-c", "sleep 30"}, {"--no_python"});
  ASSERT_TRUE(coord->WaitForOutput("generation 0", seconds(20)));
  const long before = RssKib(coord->pid());
  auto stub = StoreStub(port_);
  pb::StoreSetRequest request;
  request.set_key("k");
  request.set_value(std::string(64 << 20, '\0'));  // about 64 KB as gzip
  for (int i = 0; i < 4; ++i) {
    grpc::ClientContext context;
    context.set_compression_algorithm(GRPC_COMPRESS_GZIP);
    context.set_deadline(std::chrono::system_clock::now() + seconds(20));
    pb::StoreSetReply reply;
    EXPECT_FALSE(stub->Set(&context, request, &reply).ok());
  }
  const long after = RssKib(coord->pid());
  EXPECT_LT(after - before, 32 * 1024)
      << "RSS grew from " << before << " to " << after << " KiB";
  coord->Signal(SIGTERM);
  coord->Wait(seconds(40));
}

TEST_F(LauncherTest, AWorkerCannotReadItsDaemonsEnvironmentOrMemory) {
  // The daemons and their workers as one unprivileged user (root reads
  // every process's files whatever we do).
  if (getuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0) {
    GTEST_SKIP() << "needs root and setpriv to run the job as another user";
  }
  const std::string home =
      ::testing::TempDir() + "/trl-nobody-" + std::to_string(getpid());
  std::filesystem::create_directories(home);
  chown(home.c_str(), 65534, 65534);
  const std::string probe =
      "if cat /proc/$PPID/environ >/dev/null 2>&1; then echo ENVIRON-READ; "
      "else echo ENVIRON-DENIED; fi; "
      "if (exec 3</proc/$PPID/mem) 2>/dev/null; then echo MEM-OPENED; "
      "else echo MEM-DENIED; fi";
  std::vector<std::string> argv = {"/usr/bin/setpriv",
                                   "--reuid=65534",
                                   "--regid=65534",
                                   "--clear-groups",
                                   "--",
                                   "/usr/bin/env",
                                   "HOME=" + home,
                                   "TMPDIR=" + home,
                                   "HF_HOME=" + home,
                                   "TRL_AUTH_TOKEN=tok-0123456789abcdef-SECRET",
                                   TRL_COORD_BIN,
                                   "start"};
  for (auto& flag : ClusterFlags(1, 1)) argv.push_back(flag);
  for (auto arg : {"--no_python", "/bin/sh", "-c", probe.c_str()}) {
    argv.push_back(arg);
  }
  Subprocess coord(argv);
  ASSERT_EQ(coord.Wait(seconds(30)), 0) << coord.Output();
  EXPECT_NE(coord.Stdout().find("ENVIRON-DENIED"), std::string::npos)
      << coord.Stdout();
  EXPECT_NE(coord.Stdout().find("MEM-DENIED"), std::string::npos)
      << coord.Stdout();
  EXPECT_EQ(coord.Output().find("SECRET"), std::string::npos);
  std::filesystem::remove_all(home);
}

}  // namespace
}  // namespace trl::testing

// TLS and mutual TLS on the coordinator's port, with certificates made by
// openssl for the test: a job runs with the right certificates; an agent
// without a client certificate, with one from another CA, or in plaintext
// never registers.
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "proto/trl_launch.grpc.pb.h"
#include "proto/trl_launch.pb.h"
#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

class TlsTest : public LauncherTest {
 protected:
  static void SetUpTestSuite() {
    dir_ = ::testing::TempDir() + "/trl-tls-" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    ready_ = access("/usr/bin/openssl", X_OK) == 0 && MakeCa("ca1") &&
             MakeCa("ca2") && MakeLeaf("server", "ca1", true) &&
             MakeLeaf("agent", "ca1", false) &&
             MakeLeaf("intruder", "ca2", false) && MakeSelfSigned("self");
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  void SetUp() override {
    if (!ready_) GTEST_SKIP() << "openssl could not make test certificates";
    LauncherTest::SetUp();
    // The demo job of each test trains from step 0: not from the checkpoint
    // an earlier test of this process left in the suite's directory.
    std::filesystem::remove(File("checkpoint.bin"));
    std::filesystem::remove(File("final_weights.txt"));
  }

  static bool Run(std::vector<std::string> argv) {
    Subprocess openssl(argv);
    return openssl.Wait(seconds(30)) == 0;
  }
  static std::string File(const std::string& name) { return dir_ + "/" + name; }
  static bool MakeCa(const std::string& name) {
    return Run({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                File(name + ".key"), "-out", File(name + ".pem"), "-days", "2",
                "-subj", "/CN=trl-test-" + name});
  }
  static bool MakeLeaf(const std::string& name, const std::string& ca,
                       bool server) {
    std::ofstream(File(name + ".ext"))
        << (server ? "subjectAltName=IP:127.0.0.1\n"
                   : "basicConstraints=CA:FALSE\n");
    return Run({"/usr/bin/openssl", "req", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                File(name + ".key"), "-out", File(name + ".csr"), "-subj",
                "/CN=" + name}) &&
           Run({"/usr/bin/openssl", "x509", "-req", "-in", File(name + ".csr"),
                "-CA", File(ca + ".pem"), "-CAkey", File(ca + ".key"),
                "-CAcreateserial", "-out", File(name + ".pem"), "-days", "2",
                "-extfile", File(name + ".ext")});
  }
  // A server certificate that is its own root (what `openssl req -x509`
  // makes for one-way TLS), for 127.0.0.1.
  static bool MakeSelfSigned(const std::string& name) {
    return Run({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                File(name + ".key"), "-out", File(name + ".pem"), "-days", "2",
                "-subj", "/CN=" + name, "-addext",
                "subjectAltName=IP:127.0.0.1"});
  }
  static std::vector<std::string> Tls(const std::string& leaf,
                                      const std::string& ca) {
    std::vector<std::string> flags = {"--tls_ca", File(ca + ".pem")};
    if (!leaf.empty()) {
      flags.insert(flags.end(), {"--tls_cert", File(leaf + ".pem"), "--tls_key",
                                 File(leaf + ".key")});
    }
    return flags;
  }

  std::optional<trl::launch::v1::JobStatus> Ps() {
    std::vector<std::string> argv = {TRL_COORD_BIN, "ps", "--address",
                                     "127.0.0.1:" + std::to_string(port_),
                                     "--json"};
    for (auto& flag : Tls("agent", "ca1")) argv.push_back(flag);
    Subprocess ps(argv);
    if (ps.Wait(seconds(10)) != 0) return std::nullopt;
    trl::launch::v1::JobStatus status;
    if (!google::protobuf::util::JsonStringToMessage(ps.Stdout(), &status)
             .ok()) {
      return std::nullopt;
    }
    return status;
  }

  static inline std::string dir_;
  static inline bool ready_ = false;
};

TEST_F(TlsTest, MutualTlsJobRuns) {
  auto agent = StartAgent(2, 2, 1, Tls("agent", "ca1"));
  auto coord =
      StartCoordinator(2, 2, Worker({"--sleep", "1"}), Tls("server", "ca1"));
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto status = Ps();
        return status && status->state() == "running";
      },
      seconds(20)))
      << coord->Output() << agent->Output();
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
  RememberWorkerPids(coord->Stdout() + agent->Stdout());
}

// Workers reach the coordinator's store with their agent's TLS files: the
// trainer's Gloo rendezvous works under mutual TLS.
TEST_F(TlsTest, WorkersUseTheStoreOverMutualTls) {
  auto agent = StartAgent(2, 2, 1, Tls("agent", "ca1"));
  auto coord = StartCoordinator(
      2, 2, {TRL_DEMO_TRAIN_BIN, "--max_steps", "5", "--output_dir", dir_},
      Tls("server", "ca1"));
  ASSERT_EQ(coord->Wait(seconds(60)), 0) << coord->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
  EXPECT_NE(coord->Output().find("2 rank(s) over Gloo (TCP)"),
            std::string::npos)
      << coord->Output();
  EXPECT_NE(coord->Output().find("step 5/5 loss"), std::string::npos);
}

// One-way TLS: the coordinator has a certificate and asks for none; the
// other machines' agents verify it with --tls_ca. Machine 0's agent and its
// workers (in the coordinator's process, with no --tls_ca) trust the
// coordinator's own certificate.
TEST_F(TlsTest, OneWayTlsJobRuns) {
  auto agent = StartAgent(2, 2, 1, {"--tls_ca", File("self.pem")});
  auto coord = StartCoordinator(
      2, 2, {TRL_DEMO_TRAIN_BIN, "--max_steps", "3", "--output_dir", dir_},
      {"--tls_cert", File("self.pem"), "--tls_key", File("self.key")});
  ASSERT_EQ(coord->Wait(seconds(60)), 0) << coord->Output() << agent->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
  EXPECT_NE(coord->Output().find("step 3/3 loss"), std::string::npos)
      << coord->Output();
}

// With certificates of your own, TLS does not prove the caller (one-way:
// anyone may connect): a call without the token is refused on its headers,
// before its body is read, on the coordinator's calls and the store's.
TEST_F(TlsTest, CallsWithoutTheTokenAreRefusedOnTheirHeaders) {
  auto coord = StartCoordinator(1, 1, {"/bin/sleep", "30"},
                                {"--tls_cert", File("self.pem"), "--tls_key",
                                 File("self.key"), "--no_python"});
  ASSERT_TRUE(coord->WaitForOutput("machine 0 registered", seconds(10)))
      << coord->Output();
  std::ifstream pem(File("self.pem"));
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs.assign(std::istreambuf_iterator<char>(pem),
                            std::istreambuf_iterator<char>());
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                     grpc::SslCredentials(tls));
  for (const std::string& bearer : {std::string(""), std::string("Bearer x")}) {
    grpc::ClientContext status_call;
    if (!bearer.empty()) status_call.AddMetadata("authorization", bearer);
    trl::launch::v1::JobStatus status;
    const grpc::Status refused =
        trl::launch::v1::Coordinator::NewStub(channel)->GetJobStatus(
            &status_call, trl::launch::v1::JobStatusRequest(), &status);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_NE(refused.error_message().find("before its body"),
              std::string::npos)
        << refused.error_message();
    EXPECT_TRUE(status.job_id().empty()) << "learned the job id";

    grpc::ClientContext store_call;
    if (!bearer.empty()) store_call.AddMetadata("authorization", bearer);
    trl::launch::v1::StoreSetRequest set;
    set.set_key("k");
    set.set_value(std::string(1 << 20, 'x'));
    trl::launch::v1::StoreSetReply reply;
    const grpc::Status store_refused =
        trl::launch::v1::Store::NewStub(channel)->Set(&store_call, set, &reply);
    EXPECT_EQ(store_refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_NE(store_refused.error_message().find("before its body"),
              std::string::npos)
        << store_refused.error_message();
  }
  coord->Signal(SIGTERM);
  EXPECT_EQ(coord->Wait(seconds(30)), 143) << coord->Output();
}

TEST_F(TlsTest, AgentsWithoutAGoodCertificateNeverRegister) {
  auto coord = StartCoordinator(2, 2, Worker(), Tls("server", "ca1"));
  ASSERT_TRUE(coord->WaitForOutput("waiting for 2 machine(s)", seconds(10)))
      << coord->Output();
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"no client certificate", Tls("", "ca1")},
      {"a certificate from another CA", Tls("intruder", "ca1")},
      {"plaintext", {}},
  };
  for (const auto& [name, flags] : cases) {
    std::vector<std::string> extra = flags;
    extra.insert(extra.end(), {"--rdzv_timeout", "2"});
    auto agent = StartAgent(2, 2, 1, extra);
    EXPECT_EQ(agent->Wait(seconds(20)), 1) << name << "\n" << agent->Output();
    EXPECT_NE(agent->Stderr().find("did not answer"), std::string::npos)
        << name << "\n"
        << agent->Stderr();
  }
  // Only machine 0's own agent (with the server's certificate) is there.
  auto status = Ps();
  ASSERT_TRUE(status.has_value());
  ASSERT_EQ(status->nodes_size(), 1);
  EXPECT_EQ(status->nodes(0).machine_rank(), 0);
  coord->Signal(SIGTERM);
  EXPECT_EQ(coord->Wait(seconds(20)), 128 + SIGTERM) << coord->Output();
}

}  // namespace
}  // namespace trl::testing

// What an agent writes into the job's record is held to a few KiB, however
// much it sends: a registered agent (a token holder, or one of another
// build) could otherwise put gRPC's 4 MiB message limit into the failure
// history, the log, `ps` and every status page fetch.
#include <gtest/gtest.h>

#include "coordinator/owner/agent_input.h"
#include "coordinator/owner/core.h"
#include "tests/lib/coordinator_harness.h"
#include "tests/lib/fake_agent_link.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;

constexpr size_t kHuge = 3 << 20;  // under gRPC's 4 MiB message limit
constexpr size_t kBound = 4096;    // what a failure's reason may take

class AgentTextBoundsTest : public ::testing::Test {
 protected:
  AgentTextBoundsTest() : options_(TwoMachineCpuJob()) {
    core_ = CoordinatorOnClock(options_, [this] { return now_; });
  }
  const pb::FailureRecord& OnlyFailure() {
    status_ = core_->Status();
    EXPECT_EQ(status_.failures_size(), 1);
    return status_.failures(0);
  }
  CoordinatorOptions options_;
  std::chrono::steady_clock::time_point now_{std::chrono::seconds(100)};
  std::unique_ptr<CoordinatorCore> core_;
  pb::JobStatus status_;
  FakeAgentLink a_, b_;
};

TEST_F(AgentTextBoundsTest, AHugeCommandCheckProblemIsCut) {
  pb::AgentMessage registration = Registration(options_, 0, 3000);
  registration.mutable_registration()->set_checks_command(true);
  core_->OnMessage(&a_, registration);
  pb::AgentMessage check;
  check.mutable_command_check()->set_problem(std::string(kHuge, 'x'));
  core_->OnMessage(&a_, check);
  const pb::FailureRecord& failure = OnlyFailure();
  EXPECT_LT(failure.reason().size(), kBound);
  EXPECT_NE(failure.reason().find("cannot run the command: xxx"),
            std::string::npos);
  EXPECT_NE(failure.reason().find("[cut]"), std::string::npos);
  EXPECT_LT(status_.ByteSizeLong(), 2 * kBound);
}

TEST_F(AgentTextBoundsTest, AHugeWorkerExitReasonIsCut) {
  core_->OnMessage(&a_, Registration(options_, 0, 3000));
  core_->OnMessage(&b_, Registration(options_, 1, 3000));
  ASSERT_EQ(core_->Status().state(), "running");
  pb::AgentMessage message;
  auto* exited = message.mutable_worker_exited();
  exited->set_generation(0);
  exited->set_local_rank(0);
  exited->set_exit_code(3);
  exited->set_reason(std::string(kHuge, 'r'));
  exited->set_start_error(std::string(kHuge, 's'));
  core_->OnMessage(&a_, message);
  const pb::FailureRecord& failure = OnlyFailure();
  EXPECT_LT(failure.reason().size(), kBound);
  EXPECT_LT(status_.ByteSizeLong(), 4 * kBound);
}

TEST_F(AgentTextBoundsTest, TextIsCutBetweenCharactersSoTheStatusParses) {
  core_->OnMessage(&a_, Registration(options_, 0, 3000));
  core_->OnMessage(&b_, Registration(options_, 1, 3000));
  pb::AgentMessage message;
  auto* exited = message.mutable_worker_exited();
  exited->set_generation(0);
  exited->set_local_rank(0);
  exited->set_exit_code(3);
  std::string accents;
  for (int i = 0; i < 5000; ++i) accents += "\xc3\xa9";  // "é", 2 bytes
  exited->set_reason("x" + accents);  // every cut at an even byte splits one
  exited->add_last_lines("x" + accents);
  core_->OnMessage(&a_, message);
  pb::JobStatus parsed;
  EXPECT_TRUE(parsed.ParseFromString(core_->Status().SerializeAsString()));
  ASSERT_EQ(parsed.failures_size(), 1);
  EXPECT_NE(parsed.failures(0).reason().find("[cut]"), std::string::npos);
}

TEST_F(AgentTextBoundsTest, AHugeHostnameIsCut) {
  pb::AgentMessage registration = Registration(options_, 0, 3000);
  registration.mutable_registration()->set_hostname(std::string(kHuge, 'h'));
  registration.mutable_registration()->set_advertise_addr(
      std::string(kHuge, 'a'));
  core_->OnMessage(&a_, registration);
  const pb::JobStatus status = core_->Status();
  ASSERT_EQ(status.nodes_size(), 1);
  EXPECT_LT(status.ByteSizeLong(), 2 * kBound);
}

// A health problem or where a rank stood is logged and shown on terminals:
// no C0, C1 (UTF-8 "\xC2\x9B" is CSI on some terminals) or bidi control
// survives, while other characters, accents included, do.
TEST(OneLineTest, ControlCharactersOfEveryKindBecomeSpaces) {
  EXPECT_EQ(OneLine("a\nb\x1b[2Jc\x7f"), "a b [2Jc ");
  EXPECT_EQ(OneLine("a\xC2\x9B"
                    "2Jb\xC2\x80\xC2\x9F"),
            "a 2Jb  ");
  EXPECT_EQ(OneLine("\xE2\x80\xAE"
                    "cba\xE2\x81\xA6"
                    "d\xE2\x81\xA9"),
            " cba d ");
  EXPECT_EQ(OneLine("\xE2\x80\x8E\xE2\x80\x8F\xE2\x80\xAA\xD8\x9C"), "    ");
}

TEST(OneLineTest, AnAgentsNamesAndReasonsReachNoTerminalRaw) {
  // A worker names its own source file (py-spy says it in the hang
  // reason), and an agent its host: both reach `ps`, `diagnose` and the
  // daemons' console.
  pb::AgentRegistration registration;
  registration.set_hostname(
      "node\x1b]52;c;ZXZpbA==\x07"
      "02");
  registration.set_interface_name(
      "eth\xE2\x80\xAE"
      "0");
  registration.set_local_world_size(1);
  const AgentInfo info = AgentInfoFromRegistration(registration, "run");
  EXPECT_EQ(info.hostname, "node ]52;c;ZXZpbA== 02");
  EXPECT_EQ(info.interface_name, "eth 0");
  pb::WorkerExited exited;
  exited.set_reason(
      "hung; in f (\x1b[2J\xC2\x9B"
      "6n.py:1)");
  exited.set_start_error("no\nsuch file");
  const WorkerExit exit = FromProto(exited);
  EXPECT_EQ(exit.reason, "hung; in f ( [2J 6n.py:1)");
  EXPECT_EQ(exit.start_error, "no such file");
}

// A new agent reports what an earlier agent of its machine kept on disk
// (agent/cleanup/exit_ledger.h): an earlier job on the same coordinator
// address, or an earlier run of a job whose id TRL_JOB_ID fixed, numbers
// its generations the same, so only this run's report counts.
TEST(RegistrationReportTest, OnlyThisRunsExitsAreTaken) {
  pb::AgentRegistration registration;
  registration.set_local_world_size(2);
  for (int local : {0, 1}) {
    pb::WorkerExited* exited = registration.add_last_generation_exits();
    exited->set_generation(3);
    exited->set_local_rank(local);
  }
  registration.set_report_run_id("run-a");
  const AgentInfo same = AgentInfoFromRegistration(registration, "run-a");
  EXPECT_EQ(same.report_generation, 3);
  EXPECT_EQ(same.reported_exits.size(), 2u);
  const AgentInfo other = AgentInfoFromRegistration(registration, "run-b");
  EXPECT_EQ(other.report_generation, -1);
  EXPECT_TRUE(other.reported_exits.empty());
  registration.clear_report_run_id();
  EXPECT_TRUE(
      AgentInfoFromRegistration(registration, "run-a").reported_exits.empty());
  EXPECT_TRUE(
      AgentInfoFromRegistration(registration, "").reported_exits.empty());
}

TEST(OneLineTest, OtherCharactersStay) {
  // Characters whose UTF-8 is next to a control's: U+00E9, U+00A0,
  // U+2010, U+2070, U+061B, U+202F.
  const std::string text =
      "caf\xC3\xA9 \xC2\xA0x \xE2\x80\x90 \xE2\x81\xB0 \xD8\x9B "
      "\xE2\x80\xAF";
  EXPECT_EQ(OneLine(text), text);
}

// A rank's newest line, as a hostile worker could send it through its
// agent: bounded, one line, no terminal control, valid UTF-8 (the whole
// status must still parse).
TEST(ProgressLineTest, AWorkersLineIsBoundedSafeAndUtf8) {
  const std::string line =
      ProgressLine("\x1b]52;c;ZXZpbA==\x07loss \xff\xfe 0.5\x1b[6n\n" +
                   std::string(4000, 'x'));
  EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
  EXPECT_EQ(line.find('\x07'), std::string::npos);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_LE(line.size(), kProgressLineBytes + 16);  // and "... [cut]"
  pb::RankStatus status;
  status.set_last_line(line);
  std::string wire;
  ASSERT_TRUE(status.SerializeToString(&wire));
  pb::RankStatus back;
  EXPECT_TRUE(back.ParseFromString(wire)) << "not UTF-8";
}

}  // namespace
}  // namespace trl

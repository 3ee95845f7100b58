// The messages the core sends agents (owner/agent_messages.h).
#include "coordinator/owner/agent_messages.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

TEST(AgentMessagesTest, AStopOrderCarriesASignalOnlyWhenGivenOne) {
  const auto fenced = StopOrder(3, "this machine was declared lost");
  EXPECT_EQ(fenced.stop().generation(), 3);
  EXPECT_EQ(fenced.stop().reason(), "this machine was declared lost");
  EXPECT_EQ(fenced.stop().signal(), 0);
  const auto stop = StopOrder(4, "preempted", StopSignal{10, true});
  EXPECT_EQ(stop.stop().signal(), 10);
  EXPECT_TRUE(stop.stop().workers_have_signal());
}

TEST(AgentMessagesTest, ARegistrationReplySaysWhatTheAgentIs) {
  CoordinatorOptions options;
  options.job_id = "job";
  options.worker_argv = {"python3", "train.py"};
  options.worker_argv_runs_python = true;
  const auto machine = AcceptedRegistration(options, 2).registration_reply();
  EXPECT_TRUE(machine.accepted());
  EXPECT_EQ(machine.job_id(), "job");
  EXPECT_FALSE(machine.spare());
  EXPECT_EQ(machine.machine_rank(), 2);
  ASSERT_EQ(machine.argv_size(), 2);
  EXPECT_EQ(machine.argv(1), "train.py");
  EXPECT_TRUE(machine.argv_runs_python());
  const auto spare = AcceptedRegistration(options, -3).registration_reply();
  EXPECT_TRUE(spare.spare());
  EXPECT_EQ(spare.machine_rank(), -1);
  const auto refused =
      RefusedRegistration("job", absl::AlreadyExistsError("taken"))
          .registration_reply();
  EXPECT_FALSE(refused.accepted());
  EXPECT_EQ(refused.reason(), "taken");
}

TEST(AgentMessagesTest, ARoleChangeNamesTheMachineOrNoneForASpare) {
  const auto promoted = RoleChange(Handover{-2, 1, "a spare takes 1"});
  EXPECT_FALSE(promoted.role_change().spare());
  EXPECT_EQ(promoted.role_change().machine_rank(), 1);
  const auto demoted = RoleChange(Handover{1, -4, "cordoned"});
  EXPECT_TRUE(demoted.role_change().spare());
  EXPECT_EQ(demoted.role_change().machine_rank(), -1);
  EXPECT_EQ(demoted.role_change().reason(), "cordoned");
}

}  // namespace
}  // namespace trl

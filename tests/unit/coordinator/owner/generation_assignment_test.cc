// GenerationAssignment on its own: every machine's message carries the
// job, the generation, the command, the stop grace and the rendezvous in
// the job's environment, with its own ranks; the store's namespace of the
// generation is opened once; GROUP_RANK only in an elastic job.
#include "coordinator/owner/generation_assignment.h"

#include <gtest/gtest.h>

#include "tests/lib/coordinator_harness.h"

namespace trl {
namespace {

using std::chrono::seconds;

GenerationStart TwoMachinesOfOneRank() {
  GenerationStart start;
  start.generation = 5;
  start.world_size = 2;
  start.num_machines = 2;
  start.master_addr = "10.0.0.1";
  start.nodes = {NodeAssignment{0, 0, 1, 0}, NodeAssignment{2, 1, 1, 1}};
  return start;
}

TEST(GenerationAssignmentTest, EachMachineGetsTheJobAndItsOwnRanks) {
  CoordinatorOptions options = TwoMachineCpuJob();
  options.policy.stop_grace = seconds(7);
  int stores_opened = 0;
  options.open_store_generation = [&](const std::string& job_id,
                                      int64_t generation) {
    ++stores_opened;
    return job_id + "-" + std::to_string(generation);
  };
  GenerationAssignment assignment(options, TwoMachinesOfOneRank(),
                                  RendezvousData{29500, "ab12"}, false);
  EXPECT_EQ(stores_opened, 1);
  const auto& first =
      assignment.For(TwoMachinesOfOneRank().nodes[0]).assignment();
  EXPECT_EQ(first.job_id(), "job");
  EXPECT_EQ(first.generation(), 5);
  EXPECT_EQ(first.stop_grace_s(), 7.0);
  ASSERT_EQ(first.argv_size(), 1);
  EXPECT_EQ(first.argv(0), "/bin/true");
  EXPECT_EQ(first.machine_rank(), 0);
  EXPECT_EQ(first.rank_offset(), 0);
  const auto& env = first.job_environment();
  EXPECT_EQ(env.at("MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(env.at("MASTER_PORT"), "29500");
  EXPECT_EQ(env.at("TRL_NCCL_UNIQUE_ID"), "ab12");
  EXPECT_EQ(env.at("TRL_STORE_TOKEN"), "job-5");
  EXPECT_EQ(env.count("GROUP_RANK"), 0u);
  const auto& second =
      assignment.For(TwoMachinesOfOneRank().nodes[1]).assignment();
  EXPECT_EQ(second.machine_rank(), 2);
  EXPECT_EQ(second.rank_offset(), 1);
  EXPECT_EQ(second.local_world_size(), 1);
  EXPECT_EQ(stores_opened, 1);
}

TEST(GenerationAssignmentTest, AnElasticJobTellsEachMachineItsPlace) {
  GenerationAssignment assignment(TwoMachineCpuJob(), TwoMachinesOfOneRank(),
                                  RendezvousData{29500, ""}, true);
  EXPECT_EQ(assignment.For(TwoMachinesOfOneRank().nodes[1])
                .assignment()
                .job_environment()
                .at("GROUP_RANK"),
            "1");
  EXPECT_EQ(assignment.For(TwoMachinesOfOneRank().nodes[0])
                .assignment()
                .job_environment()
                .at("GROUP_RANK"),
            "0");
}

}  // namespace
}  // namespace trl

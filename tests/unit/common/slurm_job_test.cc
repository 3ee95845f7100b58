#include "common/slurm_job.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

using Hosts = std::vector<std::string>;

TEST(SlurmHostList, ExpandsLikeScontrolShowHostnames) {
  EXPECT_EQ(*ExpandSlurmHostList("node01"), Hosts{"node01"});
  EXPECT_EQ(*ExpandSlurmHostList("node[01-03]"),
            (Hosts{"node01", "node02", "node03"}));
  EXPECT_EQ(*ExpandSlurmHostList("node[1-2,7],gpu5"),
            (Hosts{"node1", "node2", "node7", "gpu5"}));
  EXPECT_EQ(*ExpandSlurmHostList("n[098-101]"),
            (Hosts{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(*ExpandSlurmHostList("rack[1-2]-n[1-2]"),
            (Hosts{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}));
  EXPECT_EQ(*ExpandSlurmHostList("a[1],b-x,c[3-4].ib"),
            (Hosts{"a1", "b-x", "c3.ib", "c4.ib"}));
}

TEST(SlurmHostList, MalformedListsNameTheProblem) {
  for (const std::string bad : {"", "node[01-03", "node01-03]", "node[3-1]",
                                "node[a-b]", "n[1-]", "a,,b", "node[]"}) {
    auto hosts = ExpandSlurmHostList(bad);
    EXPECT_FALSE(hosts.ok()) << "'" << bad << "'";
  }
  EXPECT_NE(ExpandSlurmHostList("node[3-1]")
                .status()
                .message()
                .find("bad range '3-1'"),
            std::string::npos);
}

std::map<std::string, std::string> TwoNodes() {
  return {{"SLURM_JOB_ID", "4242"},
          {"SLURM_NODEID", "1"},
          {"SLURM_JOB_NUM_NODES", "2"},
          {"SLURM_JOB_NODELIST", "node[01-02]"},
          {"SLURM_PROCID", "1"}};
}

TEST(SlurmJob, ReadsRankMachinesAndTheFirstHost) {
  auto job = ReadSlurmJob(TwoNodes());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->machine_rank, 1);
  EXPECT_EQ(job->num_machines, 2);
  EXPECT_EQ(job->main_process_ip, "node01");
  EXPECT_EQ(job->gpus_per_node, 0);
}

TEST(SlurmJob, OneNode) {
  auto job = ReadSlurmJob({{"SLURM_NODEID", "0"},
                           {"SLURM_JOB_NUM_NODES", "1"},
                           {"SLURM_JOB_NODELIST", "gpu-a7"}});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->main_process_ip, "gpu-a7");
  EXPECT_EQ(job->num_machines, 1);
}

TEST(SlurmJob, GpusPerNodeFromWhicheverVariableSlurmSet) {
  auto env = TwoNodes();
  env["SLURM_JOB_GPUS"] = "0,1,2";
  EXPECT_EQ(ReadSlurmJob(env)->gpus_per_node, 3);
  env["SLURM_GPUS_PER_NODE"] = "a100:8";
  EXPECT_EQ(ReadSlurmJob(env)->gpus_per_node, 8);
  env["SLURM_GPUS_ON_NODE"] = "4";  // what slurmd says of this node wins
  EXPECT_EQ(ReadSlurmJob(env)->gpus_per_node, 4);
}

TEST(SlurmJob, MissingOrBadVariablesAreNamed) {
  struct Case {
    std::string variable;
    std::string value;  // "" removes it
    std::string expected;
  };
  for (const Case& c : std::vector<Case>{
           {"SLURM_NODEID", "", "SLURM_NODEID is not set"},
           {"SLURM_JOB_NUM_NODES", "", "SLURM_JOB_NUM_NODES is not set"},
           {"SLURM_JOB_NODELIST", "", "SLURM_JOB_NODELIST is not set"},
           {"SLURM_NODEID", "x", "SLURM_NODEID='x' is not an integer"},
           {"SLURM_NODEID", "2", "SLURM_NODEID=2 is not below"},
           {"SLURM_JOB_NUM_NODES", "3", "names 2 hosts but"},
           {"SLURM_JOB_NODELIST", "node[01-", "SLURM_JOB_NODELIST: unbalanced"},
       }) {
    auto env = TwoNodes();
    if (c.value.empty()) {
      env.erase(c.variable);
    } else {
      env[c.variable] = c.value;
    }
    auto job = ReadSlurmJob(env);
    ASSERT_FALSE(job.ok()) << c.variable;
    EXPECT_NE(job.status().message().find(c.expected), std::string::npos)
        << job.status();
  }
  // SLURM_NNODES stands in for SLURM_JOB_NUM_NODES.
  auto env = TwoNodes();
  env.erase("SLURM_JOB_NUM_NODES");
  env["SLURM_NNODES"] = "2";
  EXPECT_TRUE(ReadSlurmJob(env).ok());
}

TEST(SlurmJob, SlurmWinsOverTheConfigAndSaysSo) {
  AccelerateConfig config;
  config.num_machines = 1;
  config.machine_rank = 0;
  config.num_processes = 2;  // 2 per node
  config.main_process_ip = "10.0.0.9";
  config.use_cpu = true;
  std::vector<std::string> notes;
  ApplySlurmJob(*ReadSlurmJob(TwoNodes()), &config, &notes);
  EXPECT_EQ(config.machine_rank, 1);
  EXPECT_EQ(config.num_machines, 2);
  EXPECT_EQ(config.main_process_ip, "node01");
  EXPECT_EQ(config.num_processes, 4);  // still 2 per node
  ASSERT_EQ(notes.size(), 4u);
  EXPECT_NE(notes[2].find("main_process_ip to node01"), std::string::npos)
      << notes[2];
  EXPECT_NE(notes[2].find("it was 10.0.0.9"), std::string::npos);
}

TEST(SlurmJob, GpuJobsRunOneProcessPerGpuSlurmGave) {
  AccelerateConfig config;
  config.num_machines = 2;
  config.num_processes = 2;
  auto env = TwoNodes();
  env["SLURM_GPUS_ON_NODE"] = "8";
  std::vector<std::string> notes;
  ApplySlurmJob(*ReadSlurmJob(env), &config, &notes);
  EXPECT_EQ(config.num_processes, 16);
}

}  // namespace
}  // namespace trl

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "coordinator/record/state_file.h"

namespace trl {
namespace {

std::string TempPath(const std::string& name) {
  return testing::TempDir() + "/trl-state-" + std::to_string(getpid()) + "/" +
         name;
}

JobRecord Record(const std::string& job_id, int64_t generation,
                 int restarts_used, const std::string& identity) {
  JobRecord record;
  record.job_id = job_id;
  record.generation = generation;
  record.restarts_used = restarts_used;
  record.identity = identity;
  return record;
}

TEST(JobStateFileTest, RoundTripsAndLeavesNoTempFile) {
  const std::string path = TempPath("a.state");
  ASSERT_TRUE(SaveJobRecord(path, Record("job-1", 4, 2, "abc")).ok());
  ASSERT_TRUE(SaveJobRecord(path, Record("job-1", 5, 3, "abc")).ok());
  auto loaded = LoadJobRecord(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->job_id, "job-1");
  EXPECT_EQ((*loaded)->generation, 5);
  EXPECT_EQ((*loaded)->restarts_used, 3);
  EXPECT_EQ((*loaded)->identity, "abc");
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::filesystem::path(path).parent_path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1);
  RemoveJobRecord(path);
  loaded = LoadJobRecord(path);
  ASSERT_TRUE(loaded.ok());
  EXPECT_FALSE(loaded->has_value());
}

TEST(JobStateFileTest, KeepsTheRunIdAndReadsAnOlderFileWithout) {
  // A resumed coordinator keeps the run id its agents' exit reports name;
  // a file written before run ids has none (the resumed run gets a new
  // one), and a run id that is no id is refused.
  const std::string path = TempPath("run.state");
  JobRecord record = Record("job-1", 2, 0, "abc");
  record.run_id = "0123456789abcdef";
  ASSERT_TRUE(SaveJobRecord(path, record).ok());
  auto loaded = LoadJobRecord(path);
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ((*loaded)->run_id, "0123456789abcdef");
  record.run_id.clear();
  ASSERT_TRUE(SaveJobRecord(path, record).ok());
  loaded = LoadJobRecord(path);
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ((*loaded)->run_id, "");
  {
    std::ofstream older(path, std::ios::trunc);
    older << "job_id job-1\nrun_id ../x\ngeneration 2\nrestarts_used 0\n";
  }
  EXPECT_FALSE(LoadJobRecord(path).ok());
  {
    std::ofstream older(path, std::ios::trunc);
    older << "job_id job-1\ngeneration 2\nrestarts_used 0\nidentity abc\n";
  }
  loaded = LoadJobRecord(path);
  ASSERT_TRUE(loaded.ok() && loaded->has_value()) << loaded.status();
  EXPECT_EQ((*loaded)->run_id, "");
  RemoveJobRecord(path);
}

TEST(JobStateFileTest, KeepsWhereEachMachineRan) {
  const std::string path = TempPath("hosts.state");
  JobRecord record = Record("job-1", 2, 0, "abc");
  record.hosts[0] = HostIdentity{"node01", "b0a3/pidns:4:4026531836"};
  record.hosts[1] = HostIdentity{"node02", ""};
  ASSERT_TRUE(SaveJobRecord(path, record).ok());
  auto loaded = LoadJobRecord(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  const auto& hosts = (*loaded)->hosts;
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts.at(0).hostname, "node01");
  EXPECT_EQ(hosts.at(0).host_id, "b0a3/pidns:4:4026531836");
  EXPECT_EQ(hosts.at(1).hostname, "node02");
  EXPECT_EQ(hosts.at(1).host_id, "");
  RemoveJobRecord(path);
}

TEST(JobStateFileTest, KeepsHowLongEachMachinesWorkersMayRunOn) {
  // A restarted coordinator waits for the old agent's own lease and fence
  // (I1); a file of an older coordinator, without them, still loads.
  const std::string path = TempPath("run-on.state");
  JobRecord record = Record("job-1", 2, 0, "abc");
  record.hosts[0] = HostIdentity{"node01", "b0a3/pidns:4:4026531836"};
  record.hosts[1] = HostIdentity{"node02", "c1d4/pidns:4:4026531836"};
  record.run_on[1] = std::chrono::milliseconds(12700);
  ASSERT_TRUE(SaveJobRecord(path, record).ok());
  auto loaded = LoadJobRecord(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->hosts.size(), 2u);
  ASSERT_EQ((*loaded)->run_on.size(), 1u);
  EXPECT_EQ((*loaded)->run_on.at(1), std::chrono::milliseconds(12700));

  std::ofstream(path, std::ios::app) << "machine 2 node03 - -5\n";
  EXPECT_FALSE(LoadJobRecord(path).ok()) << "a negative run-on";
  RemoveJobRecord(path);
}

TEST(JobStateFileTest, KeepsCordonedHosts) {
  // A restarted coordinator keeps what an operator has not cleared.
  const std::string path = TempPath("cordons.state");
  JobRecord record = Record("job-1", 2, 0, "abc");
  record.cordoned["node03"] = Cordon{3,
                                     "3 failures within 600 s, the last:\t"
                                     "rank 5 exited\nwith code 1"};
  ASSERT_TRUE(SaveJobRecord(path, record).ok());
  auto loaded = LoadJobRecord(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  const auto& cordoned = (*loaded)->cordoned;
  ASSERT_EQ(cordoned.size(), 1u);
  EXPECT_EQ(cordoned.at("node03").failures, 3);
  EXPECT_EQ(cordoned.at("node03").reason,
            "3 failures within 600 s, the last: rank 5 exited with code 1");
  RemoveJobRecord(path);
}

TEST(JobStateFileTest, GarbageIsAnError) {
  const std::string path = TempPath("garbage.state");
  std::filesystem::create_directories(
      std::filesystem::path(path).parent_path());
  std::ofstream(path) << "hello\nworld\n";
  auto loaded = LoadJobRecord(path);
  EXPECT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("not a trl-coord job state file"),
            std::string::npos);
  RemoveJobRecord(path);
}

TEST(JobStateFileTest, DefaultPathNamesTheAddress) {
  auto path = DefaultJobStatePath("10.0.0.1", 9999);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_NE(path->find("coord-10.0.0.1-9999"), std::string::npos);
  EXPECT_EQ(path->rfind("/tmp/trl-launch/", 0), std::string::npos) << *path;
}

}  // namespace
}  // namespace trl

// The views of a JobStatusRequest, built by the coordinator from a real
// state machine (CopyJobStatus + FinishJobStatus, as Coordinator::Status
// does) and cut by a client from a whole status (ApplyStatusRequest): a
// summary, pages, filters, and the whole status for an empty request.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "coordinator/status/job_status.h"
#include "coordinator/status/table.h"
#include "coordinator/status/view.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;
using google::protobuf::util::MessageDifferencer;
using std::chrono::seconds;

// 20 machines x 8 ranks, running; then machine 13's agent is gone.
class StatusViewTest : public ::testing::Test {
 protected:
  StatusViewTest() : job_(Settings(), now_) {
    for (int m = 0; m < 20; ++m) {
      AgentInfo agent;
      agent.machine_rank = m;
      agent.hostname = "Host" + std::to_string(m);
      agent.advertise_addr = "10.0.0." + std::to_string(m);
      agent.local_world_size = 8;
      EXPECT_TRUE(job_.Register(agent, now_).ok());
    }
    const GenerationStart start = job_.StartGeneration(now_);
    for (int m = 0; m < 20; ++m) {
      for (int local = 0; local < 8; ++local) {
        job_.WorkerStarted(m, start.generation, local, 1000 + m * 8 + local,
                           now_);
      }
    }
    now_ += seconds(1);
    job_.AgentDisconnected(13, now_);
  }

  static JobSettings Settings() {
    JobSettings settings;
    settings.job_id = "big";
    settings.num_machines = 20;
    settings.local_world_size = 8;
    settings.command = {"train.py"};
    return settings;
  }

  pb::JobStatus Ask(const pb::JobStatusRequest& request) {
    return FinishJobStatus(CopyJobStatus(
        job_, now_, request, [](int) -> const char* { return "udp"; }));
  }

  TimePoint now_ = TimePoint() + seconds(100);
  JobStateMachine job_;
};

TEST_F(StatusViewTest, ASummaryHasTheCountsAndTheLostMachineNotEveryRow) {
  const pb::JobStatus status = Ask(SummaryRequest());
  EXPECT_EQ(status.job_id(), "big");
  EXPECT_EQ(status.nodes_size(), 0);
  EXPECT_EQ(status.ranks_size(), 0);  // not 160
  EXPECT_EQ(status.failures_size(), 0);
  ASSERT_TRUE(status.has_summary());
  const pb::JobSummary& summary = status.summary();
  EXPECT_EQ(summary.machines(), 20);
  EXPECT_EQ(summary.ranks(), 160);
  int machines = 0, lost_machines = 0, ranks = 0, lost_ranks = 0;
  for (const auto& count : summary.machine_states()) {
    machines += count.count();
    if (count.state() == "lost") lost_machines = count.count();
  }
  for (const auto& count : summary.rank_states()) {
    ranks += count.count();
    if (count.state() == "lost") lost_ranks = count.count();
  }
  EXPECT_EQ(machines, 20);
  EXPECT_EQ(lost_machines, 1) << summary.DebugString();
  EXPECT_EQ(ranks, 160);
  EXPECT_EQ(lost_ranks, 8) << summary.DebugString();
  ASSERT_EQ(summary.attention_nodes_size(), 1) << summary.DebugString();
  EXPECT_EQ(summary.attention_nodes(0).machine_rank(), 13);
  EXPECT_EQ(summary.attention_nodes(0).hostname(), "Host13");
  EXPECT_EQ(summary.more_attention_nodes(), 0);
  // The ranks to see: machine 13's (and any its loss stopped), at most 20.
  EXPECT_LE(summary.attention_ranks_size(), kAttentionShown);
  EXPECT_EQ(
      summary.attention_ranks_size() + summary.more_attention_ranks(),
      160 - [&] {
        for (const auto& c : summary.rank_states()) {
          if (c.state() == "running" || c.state() == "pending") {
            return c.count();
          }
        }
        return 0;
      }());
  EXPECT_EQ(summary.failures(), static_cast<int>(job_.failures().size()));
  EXPECT_EQ(summary.recent_failures_size(), summary.failures());
}

TEST_F(StatusViewTest, AnEmptyRequestGetsTheWholeStatus) {
  const pb::JobStatus whole = Ask(pb::JobStatusRequest());
  ASSERT_EQ(whole.nodes_size(), 20);
  EXPECT_EQ(whole.ranks_size(), 160);
  EXPECT_FALSE(whole.has_summary());
  EXPECT_EQ(whole.nodes(0).heartbeat_via(), "udp");
  pb::JobStatus expected = DescribeJob(job_, now_);
  for (auto& node : *expected.mutable_nodes()) node.set_heartbeat_via("udp");
  EXPECT_TRUE(MessageDifferencer::Equals(whole, expected));
}

TEST_F(StatusViewTest, APageIsTheRightSliceOfTheRanksAndMachines) {
  pb::JobStatusRequest request;
  request.mutable_ranks()->set_offset(50);
  request.mutable_ranks()->set_limit(7);
  request.mutable_nodes()->set_offset(18);
  request.mutable_nodes()->set_limit(5);
  const pb::JobStatus page = Ask(request);
  EXPECT_FALSE(page.has_summary());
  ASSERT_EQ(page.ranks_size(), 7);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(page.ranks(i).rank(), 50 + i);
  EXPECT_EQ(page.ranks(0).pid(), 1050);
  EXPECT_EQ(page.ranks_matching(), 160);
  ASSERT_EQ(page.nodes_size(), 2);  // 18 and 19: the end of the list
  EXPECT_EQ(page.nodes(0).machine_rank(), 18);
  EXPECT_EQ(page.nodes(1).machine_rank(), 19);
  EXPECT_EQ(page.nodes_matching(), 20);
  // Past the end: nothing, and the count.
  request.mutable_ranks()->set_offset(160);
  EXPECT_EQ(Ask(request).ranks_size(), 0);
  EXPECT_EQ(Ask(request).ranks_matching(), 160);
  // A limit over the bound is the bound.
  request.mutable_ranks()->set_offset(0);
  request.mutable_ranks()->set_limit(1 << 30);
  EXPECT_EQ(Ask(request).ranks_size(), 160);
}

TEST_F(StatusViewTest, AFilterKeepsTheMatchingRowsCaseInsensitively) {
  pb::JobStatusRequest request;
  request.mutable_ranks()->set_filter("Machine 13 ");
  request.mutable_ranks()->set_limit(50);
  request.mutable_nodes()->set_filter("host1");
  request.mutable_nodes()->set_offset(1);
  request.mutable_nodes()->set_limit(3);
  const pb::JobStatus page = Ask(request);
  EXPECT_EQ(page.ranks_matching(), 8);
  ASSERT_EQ(page.ranks_size(), 8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(page.ranks(i).rank(), 13 * 8 + i);
    EXPECT_EQ(page.ranks(i).state(), "lost");
  }
  // host1, host10..host19: 11; from the second, 3 of them.
  EXPECT_EQ(page.nodes_matching(), 11);
  ASSERT_EQ(page.nodes_size(), 3);
  EXPECT_EQ(page.nodes(0).machine_rank(), 10);
  EXPECT_EQ(page.nodes(2).machine_rank(), 12);
  EXPECT_EQ(page.nodes(0).heartbeat_via(), "udp");
  request.mutable_nodes()->set_filter("lost");
  request.mutable_nodes()->set_offset(0);
  const pb::JobStatus lost = Ask(request);
  ASSERT_EQ(lost.nodes_size(), 1);
  EXPECT_EQ(lost.nodes(0).machine_rank(), 13);
}

// A client given the whole status (a coordinator older than the views)
// cuts the same views from it as the coordinator builds.
TEST_F(StatusViewTest, TheClientsViewOfAWholeStatusIsTheCoordinators) {
  const pb::JobStatus whole = Ask(pb::JobStatusRequest());
  pb::JobStatusRequest request = SummaryRequest();
  request.mutable_ranks()->set_filter("lost");
  request.mutable_ranks()->set_offset(2);
  request.mutable_ranks()->set_limit(3);
  request.mutable_nodes()->set_limit(4);
  const pb::JobStatus server = Ask(request);
  const pb::JobStatus client = ApplyStatusRequest(whole, request);
  EXPECT_TRUE(MessageDifferencer::Equals(server, client))
      << server.DebugString() << "\n---\n"
      << client.DebugString();
  // And ps prints the same summary from either.
  EXPECT_EQ(FormatJobTable(Ask(SummaryRequest())), FormatJobTable(whole));
}

}  // namespace
}  // namespace trl

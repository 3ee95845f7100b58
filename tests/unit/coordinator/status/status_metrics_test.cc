#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "coordinator/status/job_status.h"
#include "coordinator/status/metrics.h"
#include "coordinator/status/view.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;
using std::chrono::milliseconds;

pb::JobStatus ThreeMachinesOneLost() {
  pb::JobStatus s;
  s.set_job_id("job-1");
  s.set_state("running");
  s.set_generation(2);
  s.set_world_size(4);
  s.set_restarts_used(2);
  s.set_max_restarts(3);
  s.set_refused_calls(7);
  s.set_connections_cut(1234567);
  const char* node_states[] = {"running", "running", "lost"};
  for (int m = 0; m < 3; ++m) {
    auto* node = s.add_nodes();
    node->set_machine_rank(m);
    node->set_state(node_states[m]);
    node->set_last_heartbeat_age_s(m == 2 ? 4.5 : 0.25);
    node->set_last_output_age_s(m == 0 ? 12.5 : -1);
  }
  const char* rank_states[] = {"running", "running", "running", "failed"};
  for (int r = 0; r < 4; ++r) {
    auto* rank = s.add_ranks();
    rank->set_rank(r);
    rank->set_state(rank_states[r]);
  }
  return s;
}

bool HasLine(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l == line) return true;
  }
  return false;
}

TEST(StatusMetricsTest, MetricsCountTheJobAsItsStatusShowsIt) {
  const std::string text = FormatMetrics(ThreeMachinesOneLost());
  EXPECT_TRUE(HasLine(text, "trl_launch_generation 2")) << text;
  EXPECT_TRUE(HasLine(text, "trl_launch_restarts_total 2"));
  EXPECT_TRUE(HasLine(text, "trl_launch_restarts_allowed 3"));
  EXPECT_TRUE(HasLine(text, "trl_launch_agents{state=\"running\"} 2"));
  EXPECT_TRUE(HasLine(text, "trl_launch_agents{state=\"lost\"} 1"));
  EXPECT_TRUE(HasLine(text, "trl_launch_ranks{state=\"running\"} 3"));
  EXPECT_TRUE(HasLine(text, "trl_launch_ranks{state=\"failed\"} 1"));
  // Zero, not missing: a series must not vanish when its last rank leaves.
  EXPECT_TRUE(HasLine(text, "trl_launch_ranks{state=\"pending\"} 0"));
  EXPECT_TRUE(HasLine(
      text, "trl_launch_agent_heartbeat_age_seconds{machine=\"2\"} 4.5"));
  EXPECT_TRUE(HasLine(
      text, "trl_launch_machine_output_age_seconds{machine=\"0\"} 12.5"));
  EXPECT_TRUE(
      HasLine(text, "trl_launch_machine_output_age_seconds{machine=\"1\"} -1"));
  EXPECT_TRUE(HasLine(text, "trl_launch_refused_calls_total 7"));
  // Counters as integers, never 1.23457e+06.
  EXPECT_TRUE(HasLine(text, "trl_launch_connections_cut_total 1234567"));
}

// /metrics asks for MetricsRequest (the summary and every machine, no
// rank rows): it must render exactly what the whole status renders.
TEST(StatusMetricsTest, TheMetricsViewRendersAsTheWholeStatusDoes) {
  pb::JobStatus whole = ThreeMachinesOneLost();
  for (int i = 0; i < 25; ++i) whole.add_failures()->set_rank(i % 4);
  const pb::JobStatus view = ApplyStatusRequest(whole, MetricsRequest());
  EXPECT_EQ(view.ranks_size(), 0);
  EXPECT_EQ(view.nodes_size(), 3);
  EXPECT_EQ(FormatMetrics(view), FormatMetrics(whole));
  EXPECT_TRUE(HasLine(FormatMetrics(view), "trl_launch_failures_total 25"));

  // And from the coordinator's own state machine (job_status.cc).
  const TimePoint now = TimePoint() + std::chrono::seconds(100);
  JobSettings settings;
  settings.job_id = "job-2";
  settings.num_machines = 3;
  settings.local_world_size = 2;
  settings.command = {"train.py"};
  JobStateMachine job(settings, now);
  for (int m = 0; m < 3; ++m) {
    AgentInfo agent;
    agent.machine_rank = m;
    agent.hostname = "node" + std::to_string(m);
    agent.local_world_size = 2;
    ASSERT_TRUE(job.Register(agent, now).ok());
  }
  const GenerationStart start = job.StartGeneration(now);
  for (int m = 0; m < 3; ++m) {
    job.WorkerStarted(m, start.generation, 0, 100 + m, now);
  }
  job.AgentDisconnected(1, now + milliseconds(500));
  const TimePoint later = now + milliseconds(900);
  const pb::JobStatus from_machine = FinishJobStatus(
      CopyJobStatus(job, later, MetricsRequest(), HeartbeatVia()));
  EXPECT_EQ(from_machine.ranks_size(), 0);
  EXPECT_EQ(FormatMetrics(from_machine),
            FormatMetrics(DescribeJob(job, later)));
}

TEST(StatusMetricsTest, EveryMetricHasHelpAndTypeBeforeItsSamples) {
  const std::string text = FormatMetrics(ThreeMachinesOneLost());
  std::set<std::string> typed, helped;
  std::istringstream in(text);
  int samples = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# HELP ", 0) == 0) {
      helped.insert(line.substr(7, line.find(' ', 7) - 7));
    } else if (line.rfind("# TYPE ", 0) == 0) {
      typed.insert(line.substr(7, line.find(' ', 7) - 7));
    } else {
      std::string name = line.substr(0, line.find_first_of("{ "));
      ASSERT_EQ(name.rfind("trl_launch_", 0), 0u) << line;
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string s = suffix;
        if (name.size() > s.size() &&
            name.compare(name.size() - s.size(), s.size(), s) == 0 &&
            typed.count(name.substr(0, name.size() - s.size())) > 0) {
          name = name.substr(0, name.size() - s.size());
        }
      }
      EXPECT_EQ(typed.count(name), 1u) << "no TYPE before " << line;
      EXPECT_EQ(helped.count(name), 1u) << "no HELP before " << line;
      ++samples;
    }
  }
  EXPECT_GT(samples, 20);
}

TEST(StatusMetricsTest, CordonedHostsNameTheirCause) {
  pb::JobStatus s = ThreeMachinesOneLost();
  auto* sick = s.add_cordoned();
  sick->set_hostname("node02");
  sick->set_reason("health check failed: disk full");
  sick->set_health("disk full");
  auto* flapping = s.add_cordoned();
  flapping->set_hostname("node\"03");
  flapping->set_failures(3);
  flapping->set_reason("3 failures within 600 s");
  const std::string text = FormatMetrics(s);
  EXPECT_NE(
      text.find(
          "trl_launch_cordoned_host{host=\"node02\",cause=\"health\"} 1\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("trl_launch_cordoned_host{host=\"node\\\"03\",cause="
                      "\"failures\"} 1\n"),
            std::string::npos)
      << text;
}

TEST(StatusMetricsTest, LabelValuesAreEscaped) {
  pb::JobStatus s;
  s.set_job_id("a\"b\\c\nd");
  EXPECT_TRUE(HasLine(FormatMetrics(s),
                      "trl_launch_job_info{job_id=\"a\\\"b\\\\c\\nd\","
                      "state=\"\"} 1"));
}

TEST(StatusMetricsTest,
     NumbersThatAreNotFiniteAreWrittenAsTheFormatSpellsThem) {
  pb::JobStatus s;
  auto* node = s.add_nodes();
  node->set_machine_rank(0);
  node->set_last_heartbeat_age_s(std::numeric_limits<double>::infinity());
  EXPECT_TRUE(HasLine(FormatMetrics(s),
                      "trl_launch_agent_heartbeat_age_seconds{machine=\"0\"} "
                      "+Inf"));
  node->set_last_heartbeat_age_s(std::nan(""));
  EXPECT_TRUE(
      HasLine(FormatMetrics(s),
              "trl_launch_agent_heartbeat_age_seconds{machine=\"0\"} NaN"));
}

// From the state machine's own records, on a fake clock: the first
// registration at 1 s, ranks handed out at 1.25 s, a rank fails at 10 s,
// the generation ends at 10.5 s, the next is handed out at 11 s and runs
// whole at 11.5 s.
TEST(StatusMetricsTest, RendezvousAndRestartDurationsComeFromTheTimeline) {
  const TimePoint t0;
  auto at = [&t0](int ms) { return t0 + milliseconds(ms); };
  JobSettings settings;
  settings.num_machines = 1;
  settings.restart.max_restarts = 1;
  JobStateMachine job(settings, t0);
  AgentInfo agent;
  agent.machine_rank = 0;
  agent.local_world_size = 2;
  ASSERT_TRUE(job.Register(agent, at(1000)).ok());
  auto start = job.StartGeneration(at(1250));
  job.WorkerStarted(0, start.generation, 0, 10, at(1500));
  job.WorkerStarted(0, start.generation, 1, 11, at(1500));
  WorkerExit crash;
  crash.exit_code = 3;
  job.WorkerExited(0, start.generation, 0, crash, at(10000));
  WorkerExit stopped;
  stopped.signal = 15;
  job.WorkerExited(0, start.generation, 1, stopped, at(10500));
  ASSERT_EQ(job.phase(), JobPhase::kRestarting);
  start = job.StartGeneration(at(11000));
  job.WorkerStarted(0, start.generation, 0, 12, at(11500));
  job.WorkerStarted(0, start.generation, 1, 13, at(11500));

  const pb::JobStatus status = DescribeJob(job, at(12000));
  ASSERT_EQ(status.generations_size(), 2);
  EXPECT_DOUBLE_EQ(status.first_registration_at_s(), 1.0);
  EXPECT_DOUBLE_EQ(status.generations(0).stopping_at_s(), 10.0);
  EXPECT_DOUBLE_EQ(status.generations(0).ended_at_s(), 10.5);
  EXPECT_DOUBLE_EQ(status.generations(1).running_at_s(), 11.5);
  EXPECT_DOUBLE_EQ(status.generations(1).ended_at_s(), -1);

  const std::string text = FormatMetrics(status);
  // Rendezvous: 0.25 s (first) and 0.5 s (after the restart's end).
  EXPECT_TRUE(HasLine(text, "trl_launch_rendezvous_seconds_count 2")) << text;
  EXPECT_TRUE(HasLine(text, "trl_launch_rendezvous_seconds_sum 0.75"));
  EXPECT_TRUE(
      HasLine(text, "trl_launch_rendezvous_seconds_bucket{le=\"0.25\"} 1"));
  // Restart: from the failure at 10 s to all running at 11.5 s.
  EXPECT_TRUE(HasLine(text, "trl_launch_restart_seconds_count 1"));
  EXPECT_TRUE(HasLine(text, "trl_launch_restart_seconds_sum 1.5"));
  EXPECT_TRUE(HasLine(text, "trl_launch_restart_seconds_bucket{le=\"1\"} 0"));
  EXPECT_TRUE(HasLine(text, "trl_launch_restart_seconds_bucket{le=\"2.5\"} 1"));
  EXPECT_TRUE(
      HasLine(text, "trl_launch_restart_seconds_bucket{le=\"+Inf\"} 1"));
}

}  // namespace
}  // namespace trl

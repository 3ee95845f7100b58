// The agent simulator against the real coordinator: its agents register,
// get their assignments, heartbeat (and are acknowledged), and `ps` counts
// them and their ranks as running; its failure scenarios restart the job
// and get a silent agent noticed.
#include <google/protobuf/util/json_util.h>

#include "proto/trl_launch.pb.h"
#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

class AgentSimTest : public LauncherTest {
 protected:
  std::vector<std::string> Flags(int machines) const {
    std::vector<std::string> flags = ClusterFlags(machines, machines * 8);
    flags.push_back("--insecure");
    return flags;
  }
  std::unique_ptr<Subprocess> Coordinator(int machines,
                                          std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {TRL_COORD_BIN, "start", "--no_local_agent",
                                     "--max_restarts", "2"};
    for (auto& flag : Flags(machines)) argv.push_back(flag);
    for (auto& flag : extra) argv.push_back(flag);
    argv.push_back("/bin/true");  // never runs: the agents are simulated
    return std::make_unique<Subprocess>(argv);
  }
  std::unique_ptr<Subprocess> Simulator(int machines, pid_t coordinator,
                                        std::vector<std::string> extra) {
    std::vector<std::string> argv = {TRL_AGENT_SIM_BIN, "--coordinator_pid",
                                     std::to_string(coordinator)};
    for (auto& flag : Flags(machines)) argv.push_back(flag);
    for (auto& flag : extra) argv.push_back(flag);
    return std::make_unique<Subprocess>(argv);
  }
  static double Field(const std::string& json, const std::string& name) {
    std::smatch match;
    const std::regex pattern("\"" + name + "\": ([0-9.]+)");
    if (!std::regex_search(json, match, pattern)) return -1;
    return std::stod(match[1]);
  }
};

TEST_F(AgentSimTest, SimulatedAgentsRegisterHeartbeatAndShowInPs) {
  auto coord = Coordinator(8);
  ASSERT_TRUE(coord->WaitForOutput("waiting for 8 machine(s)", seconds(10)))
      << coord->Output();
  auto sim =
      Simulator(8, coord->pid(), {"--no_failures", "--heartbeat_phase", "3"});
  // While the simulator heartbeats: ps sees 8 machines, 64 running ranks.
  const bool seen = WaitUntil(
      [&] {
        Subprocess ps({TRL_COORD_BIN, "ps", "--json", "--insecure", "--address",
                       "127.0.0.1:" + std::to_string(port_)});
        if (ps.Wait(seconds(10)) != 0) return false;
        trl::launch::v1::JobStatus status;
        if (!google::protobuf::util::JsonStringToMessage(ps.Stdout(), &status)
                 .ok()) {
          return false;
        }
        int running = 0;
        for (const auto& rank : status.ranks()) {
          running += rank.state() == "running";
        }
        return status.state() == "running" && status.nodes_size() == 8 &&
               status.world_size() == 64 && running == 64;
      },
      seconds(20));
  EXPECT_TRUE(seen) << coord->Output();
  ASSERT_EQ(sim->Wait(seconds(30)), 0) << sim->Output();
  const std::string report = sim->Stdout();
  EXPECT_GT(Field(report, "rendezvous_s"), 0) << report;
  // 8 agents x about 3 heartbeats, each acknowledged.
  EXPECT_GE(Field(report, "heartbeat_acks"), 16) << report;
  EXPECT_GT(Field(report, "coordinator_rss_mib"), 1) << report;
  coord->Signal(SIGTERM);
  coord->Wait(seconds(20));
}

TEST_F(AgentSimTest, FailuresRestartTheJobAndASilentAgentIsNoticed) {
  // Heartbeats every 0.2 s, 15 misses: a silent agent is lost after 3 s.
  // (Agents and coordinator must agree on both.)
  const std::vector<std::string> heartbeats = {"--heartbeat_interval", "0.2",
                                               "--heartbeat_misses", "15"};
  auto coord = Coordinator(4, heartbeats);
  ASSERT_TRUE(coord->WaitForOutput("waiting for 4 machine(s)", seconds(10)));
  std::vector<std::string> sim_flags = {"--heartbeat_phase", "1"};
  sim_flags.insert(sim_flags.end(), heartbeats.begin(), heartbeats.end());
  auto sim = Simulator(4, coord->pid(), sim_flags);
  ASSERT_EQ(sim->Wait(seconds(60)), 0) << sim->Output() << coord->Output();
  const std::string report = sim->Stdout();
  EXPECT_GT(Field(report, "restart_s"), 0) << report;
  // 0.2 s x 15.
  const double noticed = Field(report, "dead_agent_noticed_s");
  EXPECT_GT(noticed, 2.0) << report;
  EXPECT_LT(noticed, 6.0) << report;
  EXPECT_NE(coord->Output().find("generation 1"), std::string::npos);
  EXPECT_NE(coord->Output().find("sent no heartbeat"), std::string::npos)
      << coord->Output();
  coord->Signal(SIGTERM);
  coord->Wait(seconds(20));
}

}  // namespace
}  // namespace trl::testing

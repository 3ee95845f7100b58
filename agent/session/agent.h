// trl-agent's logic: connect to the coordinator (waiting until it is up),
// register this machine and run a session (agent_session.h) that supervises
// the workers; when the connection is lost, stop the workers and rejoin,
// until the job ends.
#ifndef TRL_AGENT_SESSION_AGENT_H_
#define TRL_AGENT_SESSION_AGENT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/console/console.h"
#include "agent/health/node_health.h"
#include "agent/session/shared_agent_core.h"
#include "agent/workers/worker_user.h"
#include "common/accelerate_config.h"
#include "common/derived_identity.h"
#include "common/launch_options.h"
#include "common/stop_signals.h"
#include "common/worker_environment.h"

namespace grpc {
class Channel;
class ChannelCredentials;
}  // namespace grpc

namespace trl {

class AgentSession;

struct AgentOptions {
  // This machine's config; its machine_rank is the agent's, unless it is
  // a spare.
  AccelerateConfig config;
  // A hot spare (--spare): it registers without a machine rank.
  bool spare = false;
  std::string coordinator_host;
  int coordinator_port = 0;
  std::string advertise_addr;  // empty: the route's local address
  std::string log_dir;         // empty: no per-rank log files
  std::chrono::milliseconds heartbeat_interval{1000};
  // Launcher settings the coordinator checks (LauncherFingerprint).
  std::map<std::string, std::string> launcher_fingerprint;
  // Without a word from the coordinator for this long, workers are stopped
  // (no worker runs unsupervised) and the agent reconnects.
  std::chrono::milliseconds lease{4000};
  // Heartbeats as UDP datagrams when the coordinator offers them.
  bool udp_heartbeats = true;
  // A worker that does not touch TRL_HEARTBEAT_FILE for this long is hung
  // and killed; zero disables the check.
  std::chrono::milliseconds worker_heartbeat_timeout{0};
  // Hangs seen without the script: no output from the machine's ranks, a
  // worker's processes idle, for this long (zero: off).
  std::chrono::milliseconds hang_output_timeout{0};
  std::chrono::milliseconds hang_cpu_timeout{0};
  // Node health: what is checked, and how often (0: only at start).
  HealthCheckOptions health;
  std::chrono::milliseconds health_check_interval{0};
  std::chrono::milliseconds connect_timeout{900000};
  // While the coordinator does not answer, what stands in the way is said
  // again this often (0: only when it changes).
  std::chrono::milliseconds waiting_report_interval{15000};
  // Once registered: how long a lost coordinator is waited for.
  std::chrono::milliseconds reconnect_timeout{120000};
  int local_gpu_count = 0;
  // The environment workers inherit (the agent's own).
  Environment inherited_environment;
  std::string working_directory;
  // This machine's interpreter for .py commands ("" : the coordinator's).
  std::string own_python;
  // The user workers run as (--worker_user); nullopt: the agent's own.
  std::optional<WorkerUser> worker_user;
  // The interface that carries the advertised address; Run fills it in.
  std::string interface_name;
  // Sent with every RPC over TLS with the given certificates; empty with
  // --insecure and with `identity`.
  std::string auth_token;
  // The identity derived from the token (the default): mutual TLS, the
  // token itself never sent.
  std::optional<DerivedIdentity> identity;
  // Where the token came from (its file's path, or TRL_AUTH_TOKEN), for
  // the messages that tell a person which file to fix.
  std::string token_origin;
  // Plaintext when none of the files is set.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
};

// The options of this machine's agent, from the resolved config and the
// launcher flags. `coordinator_host` is main_process_ip, resolved.
AgentOptions AgentOptionsFromFlags(const AccelerateConfig& config,
                                   const LaunchOptions& flags,
                                   const LocalMachine& machine,
                                   const std::string& coordinator_host);

class Agent {
 public:
  Agent(AgentOptions options, Console* console);
  ~Agent();

  // Runs until the job ends; returns the exit code for this process: the
  // job's result, 2 when the coordinator refused this agent, 1 when the
  // coordinator could not be reached within the connect timeout, 128+N
  // after signal N.
  // Workers are forked from the calling thread, which must outlive them.
  int Run();

  // Thread-safe, for the signal thread: forward `signal` to the workers
  // (unless they have it), tell the coordinator, and stop.
  void RequestStop(const StopSignal& signal);

 private:
  // Waits until the coordinator's port answers, then connects `channel`
  // afresh with `credentials`; false on timeout or a stop.
  // `refused` is set when the port answers but the handshake keeps
  // failing (another token); null: a failing handshake is waited out (a
  // coordinator that has already proved itself).
  bool WaitForCoordinator(
      std::shared_ptr<grpc::Channel>& channel,
      const std::shared_ptr<grpc::ChannelCredentials>& credentials,
      std::chrono::milliseconds timeout, bool* refused);
  int StopExitCode();  // 128+signal once a stop was requested, else 0
  // Before the first registration: the exits an earlier agent of this
  // machine on this host kept on disk (it was frozen as its workers ended,
  // then killed), for the registration to carry
  // (agent/cleanup/exit_ledger.h).
  void CarryWhatAnEarlierAgentKept(const std::string& ledger_root,
                                   const std::string& target,
                                   const std::string& host_id);

  const AgentOptions options_;
  Console* const console_;
  // The agent's decisions, across its sessions.
  SharedAgentCore core_;
  std::mutex mutex_;
  AgentSession* session_ = nullptr;  // set while a session runs
};

}  // namespace trl

#endif  // TRL_AGENT_SESSION_AGENT_H_

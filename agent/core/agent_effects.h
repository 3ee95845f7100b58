// What the agent's core (agent_core.h) decided, for its edge to carry out
// in this order: sweep, open the datagram path, check the command, start or
// signal the workers, send the messages, end the session.
#ifndef TRL_AGENT_CORE_AGENT_EFFECTS_H_
#define TRL_AGENT_CORE_AGENT_EFFECTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/stop_signals.h"
#include "proto/trl_launch.pb.h"

namespace trl {

// How a session (one connection to the coordinator) ended.
struct SessionEnd {
  enum Kind { kJobFinished, kRefused, kLost } kind = kLost;
  int exit_code = 1;  // the job's, for kJobFinished
};

struct AgentEffects {
  // End whatever an earlier agent of this machine left on this host
  // (killed, frozen), before anything else is read.
  bool sweep_stale = false;
  // The machine the agent stands for, for sweep_stale and open_datagrams
  // (-1: a spare).
  int machine_rank = -1;
  // The agent stands for another machine now, or is a spare (a line for
  // the log).
  std::optional<std::string> role_changed;
  // Send heartbeats as datagrams to this port, with this session and key.
  struct Datagrams {
    int port = 0;
    uint64_t session = 0;
    std::string key;
  };
  std::optional<Datagrams> open_datagrams;
  // Send no more datagrams (a role change: their session named the old
  // machine), and leave no last word naming it; open_datagrams after, if
  // set.
  bool close_datagrams = false;
  // Tell the coordinator whether the job's command runs here.
  bool check_command = false;
  // End the current workers and whatever they left behind.
  bool end_workers = false;
  // Then start this generation's.
  std::optional<trl::launch::v1::Assignment> start_workers;
  // A generation not started, and why (a line for the log).
  std::optional<std::string> not_started;
  // Signal the current workers.
  std::optional<StopSignal> signal_workers;
  // ... within the fence: no longer than its deadline (the machine was
  // declared lost; its ranks go elsewhere then).
  bool fence_grace = false;
  // ... after keeping where each worker stands (a stop for a failure).
  bool capture_stacks = false;
  // Keep where each worker of this generation stands, send no signal, and
  // say so when done (StacksCaptured): the first half of a failure's stop.
  std::optional<int64_t> capture_only;
  // Messages for the stream, in order.
  std::vector<trl::launch::v1::AgentMessage> send;
  // Cancel the stream: a blocked read or write returns, the session ends.
  bool cancel_stream = false;
  // The session is over (the edge stops its workers and closes).
  std::optional<SessionEnd> end;
};

}  // namespace trl

#endif  // TRL_AGENT_CORE_AGENT_EFFECTS_H_

// What an agent says, made into the state machine's inputs, each field
// bounded: what goes into the log, the failure history, `ps` and the status
// page is held to what our agents send (a hostname, a reason, 20 last
// lines), not to gRPC's 4 MiB message limit, and cut on a character's
// boundary (a proto3 string that is not UTF-8 does not parse, and `ps`
// would fail on the whole status).
#ifndef TRL_COORDINATOR_OWNER_AGENT_INPUT_H_
#define TRL_COORDINATOR_OWNER_AGENT_INPUT_H_

#include <cstddef>
#include <string>

#include "coordinator/job/state_machine.h"
#include "proto/trl_launch.pb.h"

namespace trl {

inline constexpr size_t kNameBytes = 256;  // a hostname, an address, an id
inline constexpr size_t kReasonBytes =
    1024;  // why a worker ended or cannot start
inline constexpr size_t kLineBytes =
    2048;  // one of a failing rank's last lines
inline constexpr int kLines = 20;
inline constexpr size_t kProgressLineBytes = 256;  // a rank's newest line

// `text`, at most `bytes` of it and "... [cut]".
std::string Bounded(const std::string& text, size_t bytes);
// An agent's words for logs, ps and the page (its health, where a rank
// stood): bounded, on one line, no control characters (no terminal
// escapes, C0 or C1) and no bidi controls (no line shown reordered): each
// is a space.
std::string OneLine(const std::string& text);

// A rank's newest output line: as OneLine, at most kProgressLineBytes.
std::string ProgressLine(const std::string& text);

WorkerExit FromProto(const trl::launch::v1::WorkerExited& exited);

// The registration as the state machine takes it: the report of one
// generation's exits of run `run_id` of the job (of local ranks it has),
// the lease, the fingerprint.
AgentInfo AgentInfoFromRegistration(
    const trl::launch::v1::AgentRegistration& request,
    const std::string& run_id);

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_AGENT_INPUT_H_

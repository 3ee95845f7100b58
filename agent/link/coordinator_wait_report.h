// What stands between an agent and its coordinator while it waits, said in
// words a person can act on: when it is first seen, whenever it changes,
// and again every interval, so that an agent never waits in silence. Pure:
// the caller probes and logs.
#ifndef TRL_AGENT_LINK_COORDINATOR_WAIT_REPORT_H_
#define TRL_AGENT_LINK_COORDINATOR_WAIT_REPORT_H_

#include <chrono>
#include <string>

namespace trl {

enum class CoordinatorWaitProblem {
  kRefused,           // the host answers; nothing listens on the port
  kUnreachable,       // no route to the host
  kNoAnswer,          // no answer in time: host down, or packets dropped
  kHandshakeStalled,  // the port answers, the TLS handshake does not end
  kHandshakeFails,    // the port answers, the TLS handshake fails
};

struct CoordinatorWaitObservation {
  CoordinatorWaitProblem problem = CoordinatorWaitProblem::kNoAnswer;
  int error = 0;  // errno of a failed connect, 0 when none
};

// The problem and what to check, e.g. "connection refused: nothing listens
// on port 47020 at 10.0.0.1; is `trl-coord start` running there ...".
std::string DescribeCoordinatorWaitProblem(
    const CoordinatorWaitObservation& observation, const std::string& host,
    int port, const std::string& token_origin);

class CoordinatorWaitReport {
 public:
  using Clock = std::chrono::steady_clock;
  // `interval` 0: said when first seen and when it changes, never repeated.
  // `token_origin` names where this agent's token came from (a file's path
  // or TRL_AUTH_TOKEN), "" without the token's identity.
  CoordinatorWaitReport(std::string host, int port,
                        std::chrono::milliseconds interval,
                        std::chrono::milliseconds timeout,
                        std::string token_origin, Clock::time_point started);

  // The line to log now, or "" for nothing. Nothing in the first second (a
  // coordinator started beside the agent is not a problem to report). A
  // new problem is said once it has held for kSettle (a link that flaps
  // between two answers says each interval, not each flap); the errno alone
  // is not a new problem.
  std::string Observe(const CoordinatorWaitObservation& observation,
                      Clock::time_point now);

  static constexpr std::chrono::seconds kQuietStart{1};
  static constexpr std::chrono::seconds kSettle{1};

 private:
  std::string host_;
  int port_;
  std::chrono::milliseconds interval_;
  std::chrono::milliseconds timeout_;
  std::string token_origin_;
  Clock::time_point started_;
  bool said_ = false;
  CoordinatorWaitProblem last_said_ = CoordinatorWaitProblem::kNoAnswer;
  Clock::time_point last_said_at_;
  // The problem seen now, and since when without a break.
  bool seen_ = false;
  CoordinatorWaitProblem seen_problem_ = CoordinatorWaitProblem::kNoAnswer;
  Clock::time_point seen_since_;
};

}  // namespace trl

#endif  // TRL_AGENT_LINK_COORDINATOR_WAIT_REPORT_H_

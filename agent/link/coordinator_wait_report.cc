#include "agent/link/coordinator_wait_report.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/network.h"

namespace trl {

namespace {

std::string Seconds(std::chrono::milliseconds duration) {
  return absl::StrCat((duration.count() + 500) / 1000, " s");
}

}  // namespace

std::string DescribeCoordinatorWaitProblem(
    const CoordinatorWaitObservation& observation, const std::string& host,
    int port, const std::string& token_origin) {
  const std::string target = JoinHostPort(host, port);
  switch (observation.problem) {
    case CoordinatorWaitProblem::kRefused:
      return absl::StrCat(
          "connection refused: nothing listens on port ", port, " at ", host,
          " (or a firewall on the way rejects it). Is `trl-coord start` "
          "running on that machine, with main_process_port ",
          port, " (the config's, or --main_process_port)?");
    case CoordinatorWaitProblem::kUnreachable:
      return absl::StrCat(
          "no route to ", host, " (",
          std::strerror(observation.error != 0 ? observation.error
                                               : EHOSTUNREACH),
          "). Check that main_process_ip is the coordinator machine's "
          "address as this machine reaches it (`ip route get ",
          host, "`)");
    case CoordinatorWaitProblem::kNoAnswer:
      return absl::StrCat(
          "no answer from ", target,
          observation.error != 0
              ? absl::StrCat(" (", std::strerror(observation.error), ")")
              : std::string(),
          ": the machine is down, or a firewall drops port ", port,
          " on the way. Check main_process_ip, and try `nc -vz ", host, " ",
          port, "` from here");
    case CoordinatorWaitProblem::kHandshakeStalled:
      return absl::StrCat(
          "port ", port,
          " answers but the connection does not come up (its handshake does "
          "not finish): the coordinator may be frozen, paused or overloaded");
    case CoordinatorWaitProblem::kHandshakeFails:
      return token_origin.empty()
                 ? absl::StrCat(
                       "port ", port,
                       " answers but the TLS handshake fails: its "
                       "certificate is not signed by --tls_ca, its name is "
                       "not the address dialled, or it wants a client "
                       "certificate")
                 : absl::StrCat(
                       "port ", port,
                       " answers but the TLS handshake fails: the "
                       "coordinator holds another token than this agent's (",
                       token_origin,
                       "), or it is not a trl-coord. Every machine needs "
                       "the coordinator machine's token file (its "
                       "~/.trl/token)");
  }
  return "";
}

CoordinatorWaitReport::CoordinatorWaitReport(std::string host, int port,
                                             std::chrono::milliseconds interval,
                                             std::chrono::milliseconds timeout,
                                             std::string token_origin,
                                             Clock::time_point started)
    : host_(std::move(host)),
      port_(port),
      interval_(interval),
      timeout_(timeout),
      token_origin_(std::move(token_origin)),
      started_(started) {}

std::string CoordinatorWaitReport::Observe(
    const CoordinatorWaitObservation& observation, Clock::time_point now) {
  if (!seen_ || observation.problem != seen_problem_) {
    seen_ = true;
    seen_problem_ = observation.problem;
    seen_since_ = now;
  }
  const auto waited = now - started_;
  if (waited < kQuietStart) return "";
  // The first line is said at the end of the quiet start whatever it is;
  // a change of problem once it has held.
  const bool changed = said_ && observation.problem != last_said_ &&
                       now - seen_since_ >= kSettle;
  const bool due =
      said_ && interval_.count() > 0 && now - last_said_at_ >= interval_;
  if (said_ && !changed && !due) return "";
  said_ = true;
  last_said_ = observation.problem;
  last_said_at_ = now;
  const auto waited_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(waited);
  const auto left = timeout_ - waited_ms;
  return absl::StrCat(
      "waiting for the coordinator at ", JoinHostPort(host_, port_), " for ",
      Seconds(waited_ms), " (the wait ends in ",
      Seconds(left.count() > 0 ? left : std::chrono::milliseconds(0)), "): ",
      DescribeCoordinatorWaitProblem(observation, host_, port_, token_origin_));
}

}  // namespace trl

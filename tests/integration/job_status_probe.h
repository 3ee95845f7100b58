// `trl-coord ps --json` from a test: the job's status as the user's tool
// sees it.
#ifndef TRL_TESTS_INTEGRATION_JOB_STATUS_PROBE_H_
#define TRL_TESTS_INTEGRATION_JOB_STATUS_PROBE_H_

#include <google/protobuf/util/json_util.h>

#include <optional>
#include <string>

#include "proto/trl_launch.pb.h"
#include "tests/integration/subprocess.h"

namespace trl::testing {

namespace pb = trl::launch::v1;
using std::chrono::seconds;

// The status `ps --json` prints, or nullopt if it failed.
inline std::optional<pb::JobStatus> PsJson(int port) {
  Subprocess ps({TRL_COORD_BIN, "ps", "--address",
                 "127.0.0.1:" + std::to_string(port), "--json"});
  if (ps.Wait(seconds(10)) != 0) return std::nullopt;
  pb::JobStatus status;
  if (!google::protobuf::util::JsonStringToMessage(ps.Stdout(), &status).ok()) {
    return std::nullopt;
  }
  return status;
}

// Waits until ps shows every rank of the job running, and returns that view.
inline pb::JobStatus WaitUntilRunning(int port, int world_size) {
  pb::JobStatus seen;
  WaitUntil(
      [&] {
        auto status = PsJson(port);
        if (!status || status->state() != "running" ||
            status->ranks_size() != world_size) {
          return false;
        }
        for (const auto& rank : status->ranks()) {
          if (rank.state() != "running") return false;
        }
        seen = *status;
        return true;
      },
      seconds(30));
  return seen;
}

}  // namespace trl::testing

#endif  // TRL_TESTS_INTEGRATION_JOB_STATUS_PROBE_H_

// /api/status's query string as a JobStatusRequest:
//   (none)                   the whole status, as `trl-coord ps --json`
//   view=summary             the summary (status/view.h)
//   view=full                the whole status (no other parameter)
//   offset=N&limit=M&q=TEXT  a page of the ranks: rows N..N+M-1 of those
//                            whose text contains TEXT (limit 1..1000,
//                            default 50)
//   machine_offset, machine_limit, machine_q: the same for the machines
// They combine (view=summary&limit=50 is the summary and 50 ranks). A
// parameter that is unknown, repeated, not percent-encoded properly or out
// of range is an error naming it.
#ifndef TRL_COORDINATOR_STATUS_QUERY_H_
#define TRL_COORDINATOR_STATUS_QUERY_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "proto/trl_launch.pb.h"

namespace trl {

inline constexpr int kDefaultPageLimit = 50;
inline constexpr size_t kMaxFilterLength = 256;

absl::StatusOr<trl::launch::v1::JobStatusRequest> ParseStatusQuery(
    std::string_view query);

}  // namespace trl

#endif  // TRL_COORDINATOR_STATUS_QUERY_H_

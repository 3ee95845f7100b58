// What the status server answers: GET / (the page), /api/status (the JSON
// of `trl-coord ps --json`, or of a summary or a page of it: the query
// string of status/query.h; a bad one gets 400), /api/events (the job's
// history, as `trl-coord events --json`) and /metrics (Prometheus). Only
// requests that name this machine's loopback in their Host header are served: a
// web page elsewhere that rebinds its own name to 127.0.0.1 (DNS rebinding)
// would otherwise read the job's status through the user's browser.
#ifndef TRL_COORDINATOR_STATUS_ROUTES_H_
#define TRL_COORDINATOR_STATUS_ROUTES_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/status/http_server.h"
#include "proto/trl_launch.pb.h"

namespace trl {

// Where the answers come from: the coordinator itself (coord_main.cc), or
// a coordinator reached over gRPC (`trl-coord ui`, ui_client.h). A source
// that fails (a coordinator that cannot be reached) makes the request's
// answer 503 (UNAVAILABLE, DEADLINE_EXCEEDED) or 502 (any other error),
// with the error's text.
struct StatusSources {
  template <typename T>
  using Source = std::function<absl::StatusOr<T>()>;
  // A snapshot of the whole job, from which the views (/api/status, the
  // page, /metrics) are cut when `status` is unset.
  Source<trl::launch::v1::JobStatus> snapshot;
  // A fresh random value for each page's Content-Security-Policy nonce.
  std::function<std::string()> nonce;
  // The job's history (Coordinator::Events), for /api/events.
  Source<trl::launch::v1::JobEvents> events;
  // What a request asks of the job (Coordinator::Status(request)), for
  // /api/status and the page; without it, the views are cut from
  // snapshot().
  std::function<absl::StatusOr<trl::launch::v1::JobStatus>(
      const trl::launch::v1::JobStatusRequest&)>
      status;
};

HttpResponse HandleStatusRequest(const HttpRequest& request,
                                 const StatusSources& sources);

// Whether a Host header names a loopback address or localhost (with or
// without a port).
bool IsLoopbackHost(const std::string& host);

// Whether `address` (a --status_address) is a numeric loopback address:
// 127.0.0.0/8 or ::1.
bool IsLoopbackIp(const std::string& address);

}  // namespace trl

#endif  // TRL_COORDINATOR_STATUS_ROUTES_H_

// The job's status as Prometheus metrics (text exposition format 0.0.4),
// rendered from the same JobStatus that `trl-coord ps --json` prints, so
// that a scrape and a `ps` at the same moment agree. Names start with
// trl_launch_ and carry their unit (_seconds, _total).
//
// From the whole status, or from MetricsRequest's (status/view.h): with a
// summary, ranks by state and the failures are its counts, and no rank
// rows are needed; the machines' rows give the heartbeat ages.
#ifndef TRL_COORDINATOR_STATUS_METRICS_H_
#define TRL_COORDINATOR_STATUS_METRICS_H_

#include <string>

#include "proto/trl_launch.pb.h"

namespace trl {

// The Content-Type of what FormatMetrics returns.
inline constexpr char kMetricsContentType[] =
    "text/plain; version=0.0.4; charset=utf-8";

std::string FormatMetrics(const trl::launch::v1::JobStatus& status);

// A label value as the format wants it: backslash, double quote and line
// feed escaped.
std::string EscapeLabelValue(const std::string& value);

}  // namespace trl

#endif  // TRL_COORDINATOR_STATUS_METRICS_H_

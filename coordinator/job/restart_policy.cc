#include "coordinator/job/restart_policy.h"

#include <algorithm>

namespace trl {

std::chrono::milliseconds RestartPolicy::BackoffBefore(int restart) const {
  if (restart < 2) return std::chrono::milliseconds(0);
  auto backoff = initial_backoff;
  for (int i = 2; i < restart && backoff < max_backoff; ++i) backoff *= 2;
  return std::min(backoff, max_backoff);
}

}  // namespace trl

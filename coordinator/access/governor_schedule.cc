#include "coordinator/access/governor_schedule.h"

namespace trl {

bool GovernorSchedule::Due(Clock::time_point now,
                           std::optional<uint64_t> passive_opens) const {
  return !looked_ || !passive_opens.has_value() ||
         passive_opens != passive_opens_ || over_a_cap_ ||
         now - last_look_ >= idle_interval_;
}

void GovernorSchedule::Looked(Clock::time_point now,
                              std::optional<uint64_t> passive_opens,
                              bool over_a_cap) {
  looked_ = true;
  last_look_ = now;
  passive_opens_ = passive_opens;
  over_a_cap_ = over_a_cap;
}

}  // namespace trl

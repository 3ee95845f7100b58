// Every flag of `accelerate launch` and what trl-launch does with it: either
// it is honoured (registered by AddLaunchFlags with Accelerate's meaning) or
// it is refused, with exit code 2 before anything starts, naming the flag and
// saying why. No flag of Accelerate's ever becomes the training command.
#ifndef TRL_COMMON_ACCELERATE_FLAGS_H_
#define TRL_COMMON_ACCELERATE_FLAGS_H_

#include <string>
#include <vector>

namespace trl {

struct AccelerateLaunchFlag {
  std::string name;        // "--zero_stage"; also taken as "--zero-stage"
  std::string short_name;  // "-q", or empty
  bool takes_value = false;
  bool honoured = false;
  // For a refused flag: why, and what to do instead.
  std::string reason;
};

// The table (tests/data/accelerate_launch_flags.txt lists Accelerate's own
// flags; a unit test checks that this table and the README cover each).
const std::vector<AccelerateLaunchFlag>& AccelerateLaunchFlags();

// The message for a refused flag as the user spelled it.
std::string RefusedFlagMessage(const AccelerateLaunchFlag& flag,
                               const std::string& spelled);

}  // namespace trl

#endif  // TRL_COMMON_ACCELERATE_FLAGS_H_

// TRL's batch arguments, read from the worker's command line, so that the
// launcher can say what a job's effective batch size is before it starts:
// per_device_train_batch_size x processes x gradient_accumulation_steps.
#ifndef TRL_COMMON_TRL_ARGUMENTS_H_
#define TRL_COMMON_TRL_ARGUMENTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trl {

struct EffectiveBatch {
  int64_t per_device = 0;
  int64_t processes = 0;
  int64_t accumulation = 1;
  int64_t total() const { return per_device * processes * accumulation; }
  std::string Describe() const;
};

// nullopt when `argv` has no --per_device_train_batch_size (or one that is
// not a positive integer). Both `--flag N` and `--flag=N`; TRL's default of
// 1 for --gradient_accumulation_steps.
std::optional<EffectiveBatch> EffectiveBatchFromArguments(
    const std::vector<std::string>& argv, int processes);

}  // namespace trl

#endif  // TRL_COMMON_TRL_ARGUMENTS_H_

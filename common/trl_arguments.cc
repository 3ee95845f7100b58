#include "common/trl_arguments.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace trl {
namespace {

// The last value given for `--name` (argparse keeps the last), if any.
std::optional<std::string> LastValue(const std::vector<std::string>& argv,
                                     const std::string& name) {
  std::optional<std::string> value;
  const std::string flag = "--" + name;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == flag && i + 1 < argv.size()) {
      value = argv[++i];
    } else if (argv[i].rfind(flag + "=", 0) == 0) {
      value = argv[i].substr(flag.size() + 1);
    }
  }
  return value;
}

std::optional<int64_t> PositiveInteger(const std::optional<std::string>& text) {
  int64_t value = 0;
  if (!text || !absl::SimpleAtoi(*text, &value) || value < 1) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

std::string EffectiveBatch::Describe() const {
  return absl::StrCat("effective batch size ", total(), " = ", per_device,
                      " per device x ", processes, " processes x ",
                      accumulation, " gradient accumulation step",
                      accumulation == 1 ? "" : "s");
}

std::optional<EffectiveBatch> EffectiveBatchFromArguments(
    const std::vector<std::string>& argv, int processes) {
  auto per_device =
      PositiveInteger(LastValue(argv, "per_device_train_batch_size"));
  if (!per_device) return std::nullopt;
  EffectiveBatch batch;
  batch.per_device = *per_device;
  batch.processes = processes;
  if (auto given = LastValue(argv, "gradient_accumulation_steps")) {
    auto accumulation = PositiveInteger(given);
    if (!accumulation) return std::nullopt;
    batch.accumulation = *accumulation;
  }
  return batch;
}

}  // namespace trl

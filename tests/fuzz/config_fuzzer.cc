// libFuzzer target: the Accelerate config parser and validator must turn any
// bytes into a config or an error, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/accelerate_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
#ifdef TRL_FUZZ_SELFTEST_CRASH
  // scripts/fuzz.sh's self-test (-DTRL_FUZZ_SELFTEST_CRASH=ON): a crash.
  if (size > 0) std::abort();
#endif
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = trl::ParseAccelerateConfig(text, "fuzz.yaml");
  if (config.ok()) (void)trl::ValidateAccelerateConfig(*config);
  return 0;
}

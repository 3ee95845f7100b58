// Whether a process still runs, read from /proc as the tests see it.
#ifndef TRL_TESTS_INTEGRATION_PROCESS_STATE_H_
#define TRL_TESTS_INTEGRATION_PROCESS_STATE_H_

#include <sys/types.h>

#include <string>

#include "common/kernel_files.h"

namespace trl::testing {

// Whether `pid` runs (a zombie does not count: it is dead, not yet reaped).
inline bool ProcessRuns(pid_t pid) {
  const std::string text =
      ReadKernelFile("/proc/" + std::to_string(pid) + "/stat");
  if (text.empty()) return false;
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() &&
         text[paren + 2] != 'Z' && text[paren + 2] != 'X';
}

}  // namespace trl::testing

#endif  // TRL_TESTS_INTEGRATION_PROCESS_STATE_H_

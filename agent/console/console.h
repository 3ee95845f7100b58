// The agent's console: whole lines of worker output, each prefixed with its
// rank, written without interleaving between workers. It also holds the
// lines kept for `trl-coord logs` (log_ring.h), which outlive each
// generation's workers and each connection to the coordinator.
#ifndef TRL_AGENT_CONSOLE_CONSOLE_H_
#define TRL_AGENT_CONSOLE_CONSOLE_H_

#include <cstdio>
#include <mutex>
#include <string_view>

#include "agent/console/log_ring.h"

namespace trl {

class Console {
 public:
  Console(FILE* out, FILE* err) : out_(out), err_(err) {}
  // Thread-safe.
  void WriteLine(bool to_stderr, std::string_view prefix,
                 std::string_view line);
  LogRing& logs() { return logs_; }

 private:
  std::mutex mutex_;
  FILE* out_;
  FILE* err_;
  LogRing logs_;
};

}  // namespace trl

#endif  // TRL_AGENT_CONSOLE_CONSOLE_H_

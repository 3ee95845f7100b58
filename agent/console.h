// The agent's console: whole lines of worker output, each prefixed with its
// rank, written without interleaving between workers.
#ifndef TRL_AGENT_CONSOLE_H_
#define TRL_AGENT_CONSOLE_H_

#include <cstdio>
#include <mutex>
#include <string_view>

namespace trl {

class Console {
 public:
  Console(FILE* out, FILE* err) : out_(out), err_(err) {}
  // Thread-safe.
  void WriteLine(bool to_stderr, std::string_view prefix,
                 std::string_view line);

 private:
  std::mutex mutex_;
  FILE* out_;
  FILE* err_;
};

}  // namespace trl

#endif  // TRL_AGENT_CONSOLE_H_

// Test helper: runs a real program with its stdout and stderr captured to
// files, and waits for it, or for text in its output, with a deadline.
#ifndef TRL_TESTS_INTEGRATION_SUBPROCESS_H_
#define TRL_TESTS_INTEGRATION_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace trl::testing {

class Subprocess {
 public:
  // Starts `argv` with `extra_env` added to this process's environment
  // (replacing a variable of the same name).
  explicit Subprocess(std::vector<std::string> argv,
                      std::vector<std::string> extra_env = {});
  ~Subprocess();  // kills the process if it still runs
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Exit code (128+signal for a signal), or nothing if the deadline passed.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  void Signal(int signal) const;

  std::string Stdout() const;
  std::string Stderr() const;
  std::string Output() const { return Stdout() + Stderr(); }
  // Waits until `text` appears in stdout or stderr.
  bool WaitForOutput(const std::string& text,
                     std::chrono::milliseconds timeout) const;

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string stdout_path_;
  std::string stderr_path_;
};

// Polls `condition` every 20 ms until it holds or `timeout` passes.
bool WaitUntil(const std::function<bool()>& condition,
               std::chrono::milliseconds timeout);

bool ProcessExists(pid_t pid);
// How many descriptors `pid` holds, and its resident memory (VmRSS).
int OpenFileCount(pid_t pid);
long ResidentKiB(pid_t pid);
// True if no live socket holds 127.0.0.1:port (a bind with SO_REUSEADDR
// succeeds; connections in TIME_WAIT do not count).
bool PortIsFree(int port);

// CPU time (user + system) process `pid` has used, in seconds; -1 if gone.
double CpuSecondsOf(pid_t pid);
// A port (TCP and UDP on 127.0.0.1) reserved for this process: no other
// test process gets it while this one lives, and it is outside the
// kernel's ephemeral range, so no outgoing connection takes it either.
int FreePort();

}  // namespace trl::testing

#endif  // TRL_TESTS_INTEGRATION_SUBPROCESS_H_

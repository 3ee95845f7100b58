// What a worker was doing, read before it is stopped: for the worker and
// each of its descendants, the command, and per thread the state, the
// kernel wait channel and the kernel stack (/proc; the stack needs root),
// then the Python stacks of every thread from `py-spy dump --native` when
// a py-spy was found. Each py-spy run is bounded in time; a process that
// ends meanwhile, a py-spy that is missing, fails or runs out of time is
// said in the text and delays nothing past the bound.
#ifndef TRL_AGENT_WORKERS_STACK_CAPTURE_H_
#define TRL_AGENT_WORKERS_STACK_CAPTURE_H_

#include <sys/types.h>

#include <chrono>
#include <string>

namespace trl {

struct CapturedStacks {
  std::string text;   // everything, for the rank's stacks file
  std::string where;  // one line: where its main thread stands
};

// `py_spy`: the py-spy to run ("" : none was found, the kernel's view
// only); `py_spy_limit`: how long one py-spy run may take.
CapturedStacks CaptureStacks(pid_t worker, const std::string& py_spy,
                             std::chrono::milliseconds py_spy_limit);

// A py-spy for workers run by `interpreter` (the job's Python, maybe in a
// virtual environment): next to it first, then on `search_path`; "" if
// none.
std::string FindPySpy(const std::string& interpreter,
                      const std::string& search_path);

}  // namespace trl

#endif  // TRL_AGENT_WORKERS_STACK_CAPTURE_H_

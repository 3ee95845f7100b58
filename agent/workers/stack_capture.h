// What a worker was doing, read before it is stopped: for the worker and
// each of its descendants, the command, and per thread the state, the
// kernel wait channel and the kernel stack (/proc; the stack needs root),
// then the Python stacks of every thread from `py-spy dump --native` when
// a py-spy was found. The whole capture is bounded in time; a process that
// ends meanwhile, a py-spy that is missing, fails or runs out of time is
// said in the text and delays nothing past the bound.
#ifndef TRL_AGENT_WORKERS_STACK_CAPTURE_H_
#define TRL_AGENT_WORKERS_STACK_CAPTURE_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

namespace trl {

struct CapturedStacks {
  std::string text;   // everything, for the rank's stacks file
  std::string where;  // one line: where its main thread stands
};

// `py_spy`: the py-spy to run ("" : none was found, the kernel's view
// only), on the worker and the Python processes under it, 5 s at most
// each. Nothing is begun past `deadline` or once `abandoned` says so (the
// workers are being stopped), and a py-spy running then is killed: what
// was not read is said. At most 64
// processes, 256 threads each; no process's memory is read but by py-spy
// (a process stuck in the kernel holding its memory map's lock cannot
// block the capture).
CapturedStacks CaptureStacks(pid_t worker, const std::string& py_spy,
                             std::chrono::steady_clock::time_point deadline,
                             const std::function<bool()>& abandoned = {});

// A py-spy for workers run by `interpreter` (the job's Python, maybe in a
// virtual environment): next to it first, then on `search_path`; "" if
// none, or if the one found could be replaced by another user (the agent
// may run as root, its workers as --worker_user with a virtual
// environment of theirs): then `refused` names it.
std::string FindPySpy(const std::string& interpreter,
                      const std::string& search_path,
                      std::string* refused = nullptr);

// Whether `program` and every directory above it belong to root or this
// process's user and are writable by no one else.
bool TrustedToRun(const std::string& program);

}  // namespace trl

#endif  // TRL_AGENT_WORKERS_STACK_CAPTURE_H_

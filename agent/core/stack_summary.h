// Where a worker stands, in one line, from what was captured of it before
// it was stopped (agent/workers/stack_capture.h): the innermost Python
// frame of its main thread and the innermost frame of the script's own
// code (from `py-spy dump`), else its main thread's kernel state and wait
// channel (/proc). Pure text work: no process is read here.
#ifndef TRL_AGENT_CORE_STACK_SUMMARY_H_
#define TRL_AGENT_CORE_STACK_SUMMARY_H_

#include <string>

#include "absl/strings/string_view.h"

namespace trl {

// From a `py-spy dump` of one process: "in all_reduce
// (torch/distributed/distributed_c10d.py:2501), from train.py:88", "in
// <module> (train.py:41)"; "" when it holds no Python frame. Library code
// is what lives under a site-packages, dist-packages or lib/pythonX
// directory; the script's own frame is the innermost of the others.
std::string WhereInPython(absl::string_view py_spy_dump);

// From the main thread's /proc/PID/stat state and /proc/PID/wchan: "state
// S (sleeping) in the kernel at hrtimer_nanosleep"; a wait channel of "0"
// or "" (running, or not readable) is left out.
std::string WhereInTheKernel(char state, absl::string_view wchan);

}  // namespace trl

#endif  // TRL_AGENT_CORE_STACK_SUMMARY_H_

// PyTorch's NCCL flight recorder, asked for its dump before a stop.
// BuildWorkerEnvironment points TORCH_NCCL_DEBUG_INFO_PIPE_FILE and the
// dump file (TORCH_FR_DUMP_TEMP_FILE) at a stem in the generation's run
// directory; a rank whose NCCL process group records (a trace buffer)
// makes the named pipe STEM<rank>.pipe, and writing to it makes its
// watchdog write STEM<rank>. Gloo and CPU jobs make no pipe: nothing is
// asked of them.
#ifndef TRL_AGENT_WORKERS_FLIGHT_RECORDER_H_
#define TRL_AGENT_WORKERS_FLIGHT_RECORDER_H_

#include <chrono>
#include <functional>
#include <map>
#include <string>

namespace trl {

struct FlightRecorderPaths {
  std::string pipe;  // STEM<rank>.pipe
  std::string dump;  // STEM<rank>
  bool empty() const { return pipe.empty(); }
};

// The paths of `rank` as its environment names them: the pipe's stem
// (TORCH_NCCL_DEBUG_INFO_PIPE_FILE; none without it) and the dump's
// (TORCH_FR_DUMP_TEMP_FILE, else TORCH_NCCL_DEBUG_INFO_TEMP_FILE, else
// PyTorch's default), the user's own settings included.
FlightRecorderPaths FlightRecorderPathsOf(
    const std::map<std::string, std::string>& environment, int rank);

// What came of asking for a dump.
struct FlightRecorderRequest {
  bool asked = false;  // the rank's pipe took the request
  std::chrono::system_clock::time_point when;
  std::string note;  // why it was not asked, when it was not
};

// Writes one byte to the rank's pipe, never blocking and never through a
// link or into anything but a FIFO (the run directory is writable by the
// worker): a rank with no pipe, or none reading it, is said as such.
FlightRecorderRequest AskForFlightRecorderDump(
    const FlightRecorderPaths& paths);

// Waits, polling, until the dump asked for in `request` has been written
// (the file exists, changed since the request and its size held for one
// poll), until `deadline` or until `abandoned` says so; one line for the
// rank's stacks file either way.
std::string AwaitFlightRecorderDump(
    const FlightRecorderPaths& paths, const FlightRecorderRequest& request,
    std::chrono::steady_clock::time_point deadline,
    const std::function<bool()>& abandoned = {});

}  // namespace trl

#endif  // TRL_AGENT_WORKERS_FLIGHT_RECORDER_H_

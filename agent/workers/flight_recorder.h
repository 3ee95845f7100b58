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
#include <cstdint>
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

// Whether a pipe can be made in `dir`: PyTorch's NCCL process group makes
// its pipe with a check that ends the rank when mkfifo fails (a file
// system without FIFOs, a directory that could not be made), so the
// recorder's variables are set only where this holds. `why` says why not.
bool CanMakePipeIn(const std::string& dir, std::string* why);

// A dump file as it was: a new dump is one that differs from it.
struct DumpFileState {
  bool exists = false;
  uint64_t inode = 0;
  int64_t modified_ns = 0;
  int64_t size = 0;
  bool operator==(const DumpFileState& other) const {
    return exists == other.exists && inode == other.inode &&
           modified_ns == other.modified_ns && size == other.size;
  }
};

// What came of asking for a dump.
struct FlightRecorderRequest {
  bool asked = false;    // the rank's pipe took the request
  DumpFileState before;  // the dump file when it was asked
  std::string note;      // why it was not asked, when it was not
};

// Writes one byte to the rank's pipe, never blocking and never through a
// link or into anything but a FIFO (the run directory is writable by the
// worker): a rank with no pipe, or none reading it, is said as such.
FlightRecorderRequest AskForFlightRecorderDump(
    const FlightRecorderPaths& paths);

// Waits, polling, until the dump asked for in `request` has been written
// (the file differs from what it was when asked, in inode, time or size,
// is not empty and its size held for one poll; no clock is compared: the
// file's may be another machine's), until `deadline` or until `abandoned` says
// so; one line for the rank's stacks file either way.
std::string AwaitFlightRecorderDump(
    const FlightRecorderPaths& paths, const FlightRecorderRequest& request,
    std::chrono::steady_clock::time_point deadline,
    const std::function<bool()>& abandoned = {});

}  // namespace trl

#endif  // TRL_AGENT_WORKERS_FLIGHT_RECORDER_H_

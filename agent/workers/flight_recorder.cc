#include "agent/workers/flight_recorder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"

namespace trl {

namespace {

constexpr std::chrono::milliseconds kPoll{50};

std::chrono::system_clock::time_point ModifiedAt(const struct stat& st) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) +
          std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
}

}  // namespace

FlightRecorderPaths FlightRecorderPathsOf(
    const std::map<std::string, std::string>& environment, int rank) {
  auto value = [&environment](const char* name) {
    auto it = environment.find(name);
    return it == environment.end() ? std::string() : it->second;
  };
  const std::string pipe_stem = value("TORCH_NCCL_DEBUG_INFO_PIPE_FILE");
  if (pipe_stem.empty()) return {};
  std::string dump_stem = value("TORCH_FR_DUMP_TEMP_FILE");
  if (dump_stem.empty()) dump_stem = value("TORCH_NCCL_DEBUG_INFO_TEMP_FILE");
  if (dump_stem.empty()) dump_stem = "/tmp/nccl_trace_rank_";
  return {absl::StrCat(pipe_stem, rank, ".pipe"),
          absl::StrCat(dump_stem, rank)};
}

FlightRecorderRequest AskForFlightRecorderDump(
    const FlightRecorderPaths& paths) {
  FlightRecorderRequest request;
  if (paths.empty()) return request;
  // The run directory is the worker's: what is at the path is looked at
  // before it is opened (O_PATH opens nothing: a device node planted there
  // is never opened for writing), and only a FIFO is. O_NONBLOCK: a FIFO
  // nobody reads fails at once (ENXIO) instead of waiting.
  const int at = open(paths.pipe.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (at < 0) {
    request.note =
        errno == ENOENT
            ? absl::StrCat("no NCCL flight recorder: the rank made no pipe at ",
                           paths.pipe)
            : absl::StrCat("the flight recorder's pipe ", paths.pipe,
                           " cannot be opened: ", std::strerror(errno));
    return request;
  }
  struct stat st {};
  if (fstat(at, &st) != 0 || !S_ISFIFO(st.st_mode)) {
    close(at);
    request.note = absl::StrCat(paths.pipe, " is not a pipe: not written");
    return request;
  }
  const int fd = open(absl::StrCat("/proc/self/fd/", at).c_str(),
                      O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  const int open_error = errno;
  close(at);
  if (fd < 0) {
    request.note = absl::StrCat(
        "the flight recorder's pipe ", paths.pipe, " took no request: ",
        open_error == ENXIO ? "no process reads it"
                            : std::strerror(open_error));
    return request;
  }
  request.when = std::chrono::system_clock::now();
  const char byte = '1';
  request.asked = write(fd, &byte, 1) == 1;
  if (!request.asked) {
    request.note = absl::StrCat("the flight recorder's pipe ", paths.pipe,
                                " took no request: ", std::strerror(errno));
  }
  close(fd);
  return request;
}

std::string AwaitFlightRecorderDump(
    const FlightRecorderPaths& paths, const FlightRecorderRequest& request,
    std::chrono::steady_clock::time_point deadline,
    const std::function<bool()>& abandoned) {
  if (!request.asked) return request.note;
  off_t last_size = -1;
  while (true) {
    struct stat st {};
    // The file's modification time is the file system's clock, which may
    // be coarser than ours: a second's slack.
    if (lstat(paths.dump.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ModifiedAt(st) + std::chrono::seconds(1) >= request.when) {
      if (st.st_size > 0 && st.st_size == last_size) {
        return absl::StrCat("NCCL flight recorder: dumped to ", paths.dump,
                            " (", st.st_size, " bytes)");
      }
      last_size = st.st_size;
    }
    if (std::chrono::steady_clock::now() + kPoll > deadline ||
        (abandoned && abandoned())) {
      return absl::StrCat("NCCL flight recorder: asked through ", paths.pipe,
                          ", no dump at ", paths.dump,
                          " before the capture's time ran out");
    }
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace trl

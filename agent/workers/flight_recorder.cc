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

DumpFileState StateOf(const std::string& path) {
  DumpFileState state;
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return state;
  state.exists = true;
  state.inode = st.st_ino;
  state.modified_ns =
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  state.size = st.st_size;
  return state;
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

bool CanMakePipeIn(const std::string& dir, std::string* why) {
  const std::string probe = absl::StrCat(dir, "/.trl-pipe-probe-", getpid());
  if (mkfifo(probe.c_str(), 0600) != 0) {
    if (why != nullptr) *why = std::strerror(errno);
    return false;
  }
  unlink(probe.c_str());
  return true;
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
  request.before = StateOf(paths.dump);
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
  DumpFileState last;
  while (true) {
    const DumpFileState now = StateOf(paths.dump);
    if (now.exists && !(now == request.before) && now.size > 0) {
      if (now == last) {
        return absl::StrCat("NCCL flight recorder: dumped to ", paths.dump,
                            " (", now.size, " bytes)");
      }
    }
    last = now;
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

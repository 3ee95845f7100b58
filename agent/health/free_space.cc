#include "agent/health/free_space.h"

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trl {
namespace {

// What the walk up from a directory found (FreeSpace without the bound).
FreeSpace ReadFreeSpace(const std::string& directory, StatvfsFunction stat) {
  std::filesystem::path at = std::filesystem::absolute(directory);
  struct statvfs fs = {};
  while (stat(at.c_str(), &fs) != 0) {
    if (!at.has_parent_path() || at.parent_path() == at) {
      return {absl::StrCat("disk: cannot read the free space of ", directory,
                           ": ", std::strerror(errno)),
              0};
    }
    at = at.parent_path();
  }
  return {"", static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize};
}

// One read of a directory's free space, shared by its helper thread and
// whoever waits for it.
struct Read {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;  // guarded by mutex
  FreeSpace answer;   // guarded by mutex
};

// The reads under way, by directory. Never destroyed: a stuck helper may
// return after main() has, and must find its mutex still there.
std::mutex& ReadsMutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::map<std::string, std::shared_ptr<Read>>& Reads() {
  static auto* reads = new std::map<std::string, std::shared_ptr<Read>>;
  return *reads;
}

}  // namespace

FreeSpace FreeSpaceWithin(const std::string& directory,
                          std::chrono::milliseconds timeout,
                          StatvfsFunction stat) {
  std::shared_ptr<Read> read;
  {
    std::lock_guard<std::mutex> lock(ReadsMutex());
    std::shared_ptr<Read>& slot = Reads()[directory];
    if (slot == nullptr) {
      slot = std::make_shared<Read>();
      try {
        std::thread([slot_read = slot, directory, stat] {
          FreeSpace answer = ReadFreeSpace(directory, stat);
          // Off the list first: a check from now on starts a fresh read.
          {
            std::lock_guard<std::mutex> lock(ReadsMutex());
            auto it = Reads().find(directory);
            if (it != Reads().end() && it->second == slot_read) {
              Reads().erase(it);
            }
          }
          std::lock_guard<std::mutex> lock(slot_read->mutex);
          slot_read->answer = std::move(answer);
          slot_read->done = true;
          slot_read->done_cv.notify_all();
        }).detach();
      } catch (const std::system_error& e) {
        Reads().erase(directory);
        return {absl::StrCat("disk: cannot read the free space of ", directory,
                             ": no thread for it: ", e.what()),
                0};
      }
    }
    read = slot;
  }
  std::unique_lock<std::mutex> lock(read->mutex);
  if (!read->done_cv.wait_for(lock, timeout, [&] { return read->done; })) {
    return {
        absl::StrFormat("disk: the free space of %s did not come within %g s "
                        "(statvfs is stuck: a hung network file system?)",
                        directory, timeout.count() / 1000.0),
        0};
  }
  return read->answer;
}

}  // namespace trl

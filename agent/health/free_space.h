// The free space of a directory, bounded in time. statvfs of a directory on
// a hung network file system (a hard NFS mount whose server went away)
// does not return, and no signal ends it: it runs on a helper thread the
// caller waits for up to a bound. A helper still stuck is left detached
// (the agent's exit never waits for it) and is the only one for its
// directory: a later check waits on it again rather than start another,
// so that a hung mount costs one thread, not one per interval.
#ifndef TRL_AGENT_HEALTH_FREE_SPACE_H_
#define TRL_AGENT_HEALTH_FREE_SPACE_H_

#include <sys/statvfs.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace trl {

using StatvfsFunction = int (*)(const char* path, struct statvfs* fs);

struct FreeSpace {
  // Empty if the free space was read: why not (it did not answer in time,
  // or no directory of the path could be read).
  std::string problem;
  uint64_t free_bytes = 0;  // available to unprivileged users
};

// The free space under `directory`, or under the nearest directory above
// it that exists (a log directory is made when the first generation
// starts), read with `stat` (statvfs but in tests) within `timeout`.
FreeSpace FreeSpaceWithin(const std::string& directory,
                          std::chrono::milliseconds timeout,
                          StatvfsFunction stat = &statvfs);

}  // namespace trl

#endif  // TRL_AGENT_HEALTH_FREE_SPACE_H_

#include "common/daemon_process.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

extern char** environ;

namespace trl {
namespace {

rlimit original_open_files = {RLIM_INFINITY, RLIM_INFINITY};
bool have_original = false;

}  // namespace

void PrepareDaemonProcess() {
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    original_open_files = limit;
    have_original = true;
    if (limit.rlim_cur < limit.rlim_max) {
      limit.rlim_cur = limit.rlim_max;
      setrlimit(RLIMIT_NOFILE, &limit);
    }
  }
}

rlimit OriginalOpenFileLimit() {
  if (have_original) return original_open_files;
  rlimit limit;
  getrlimit(RLIMIT_NOFILE, &limit);
  return limit;
}

void ForgetTokenFromEnvironment() {
  static constexpr char kName[] = "TRL_AUTH_TOKEN=";
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, kName, sizeof(kName) - 1) == 0) {
      char* value = *entry + sizeof(kName) - 1;
      std::memset(value, 'x', std::strlen(value));
    }
  }
  unsetenv("TRL_AUTH_TOKEN");
}

}  // namespace trl

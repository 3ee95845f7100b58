#include "common/exempt_children.h"

#include <mutex>
#include <set>

namespace trl {
namespace {

std::mutex& Mutex() {
  static std::mutex mutex;
  return mutex;
}
std::set<pid_t>& Exempt() {
  static std::set<pid_t> exempt;
  return exempt;
}

}  // namespace

pid_t SpawnExemptChild(const std::function<pid_t()>& spawn) {
  std::lock_guard<std::mutex> lock(Mutex());
  const pid_t pid = spawn();
  if (pid > 0) Exempt().insert(pid);
  return pid;
}

void ForgetExemptChild(pid_t pid) {
  std::lock_guard<std::mutex> lock(Mutex());
  Exempt().erase(pid);
}

bool IsExemptChild(pid_t pid) {
  std::lock_guard<std::mutex> lock(Mutex());
  return Exempt().count(pid) > 0;
}

}  // namespace trl

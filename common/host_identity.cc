#include "common/host_identity.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

namespace trl {

std::string LocalHostId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (!std::getline(in, boot_id) || boot_id.empty()) return "";
  struct stat pid_namespace {};
  if (stat("/proc/self/ns/pid", &pid_namespace) != 0) return "";
  return boot_id + "/pidns:" + std::to_string(pid_namespace.st_dev) + ":" +
         std::to_string(pid_namespace.st_ino);
}

}  // namespace trl

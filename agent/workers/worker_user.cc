#include "agent/workers/worker_user.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace trl {

absl::StatusOr<WorkerUser> ResolveWorkerUser(const std::string& name) {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--worker_user ", name,
        " needs the agent to run as root (it switches each worker to that "
        "user before it starts)"));
  }
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  uid_t numeric = 0;
  int error =
      absl::SimpleAtoi(name, &numeric)
          ? getpwuid_r(numeric, &entry, buffer.data(), buffer.size(), &found)
          : getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(),
                       &found);
  if (found == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "--worker_user ", name, ": no such user",
        error != 0 ? absl::StrCat(" (", std::strerror(error), ")") : ""));
  }
  if (found->pw_uid == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--worker_user ", name,
        " is root: workers would hold everything the daemons hold"));
  }
  WorkerUser user;
  user.name = found->pw_name;
  user.uid = found->pw_uid;
  user.gid = found->pw_gid;
  int count = 64;
  std::vector<gid_t> groups(count);
  if (getgrouplist(found->pw_name, found->pw_gid, groups.data(), &count) < 0) {
    groups.resize(count);
    getgrouplist(found->pw_name, found->pw_gid, groups.data(), &count);
  }
  groups.resize(count);
  user.groups = std::move(groups);
  return user;
}

absl::Status CheckLogDirForWorkerUser(const std::string& log_dir) {
  if (log_dir.empty()) return absl::OkStatus();
  if (mkdir(log_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create --log_dir ", log_dir, ": ", std::strerror(errno)));
  }
  struct stat info {};
  if (lstat(log_dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) ||
      info.st_uid != geteuid() || (info.st_mode & 022) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--log_dir ", log_dir,
        " must be a directory of the agent's own user that nobody else may "
        "write to when workers run as another user (--worker_user): a worker "
        "could plant links there that the agent would follow"));
  }
  return absl::OkStatus();
}

}  // namespace trl

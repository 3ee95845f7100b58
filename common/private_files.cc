#include "common/private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trl {
namespace {

absl::Status CheckOwnDirectory(const std::string& dir) {
  struct stat info;
  if (lstat(dir.c_str(), &info) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot use ", dir, ": ", std::strerror(errno)));
  }
  if (S_ISLNK(info.st_mode) || !S_ISDIR(info.st_mode)) {
    return absl::PermissionDeniedError(absl::StrCat(
        dir, " is not a directory (a link, or a file); remove it"));
  }
  if (info.st_uid != geteuid()) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s belongs to user %d, not to this user (%d); remove it", dir,
        info.st_uid, geteuid()));
  }
  if ((info.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s may be entered or written by others (mode %o); chmod 700 it", dir,
        info.st_mode & 0777));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EnsurePrivateDirectory(const std::string& dir) {
  std::error_code ignored;
  const auto parent = std::filesystem::path(dir).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
  }
  return CheckOwnDirectory(dir);
}

absl::StatusOr<std::string> PrivateDirectory() {
  // ~/.trl/run first: $XDG_RUNTIME_DIR (/run/user/UID) goes when the
  // user's last session ends, and with it the state of a job started with
  // nohup; it is the fallback without a HOME.
  std::string dir;
  if (const char* home = std::getenv("HOME");
      home != nullptr && *home != '\0') {
    // ~/.trl holds the token too: it is made 0700 as well.
    const std::string trl_dir = absl::StrCat(home, "/.trl");
    if (absl::Status made = EnsurePrivateDirectory(trl_dir); !made.ok()) {
      return made;
    }
    dir = trl_dir + "/run";
  } else if (const char* runtime = std::getenv("XDG_RUNTIME_DIR");
             runtime != nullptr && *runtime != '\0') {
    dir = absl::StrCat(runtime, "/trl-launch");
  } else {
    return absl::FailedPreconditionError(
        "neither HOME nor XDG_RUNTIME_DIR is set: no private directory for "
        "the launcher's files");
  }
  if (absl::Status made = EnsurePrivateDirectory(dir); !made.ok()) return made;
  return dir;
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents, mode_t mode) {
  std::string temp = path + ".tmp.XXXXXX";
  const int fd = mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot write ", path,
        ": cannot create a temp file beside it: ", std::strerror(errno)));
  }
  fchmod(fd, mode);
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n =
        write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  int error = written == contents.size() ? 0 : (errno != 0 ? errno : EIO);
  if (error == 0 && fsync(fd) != 0) error = errno;
  close(fd);
  if (error == 0 && rename(temp.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    unlink(temp.c_str());
    return absl::UnavailableError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadPrivateFile(const std::string& path,
                                            size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    }
    if (errno == ELOOP) {
      return absl::PermissionDeniedError(
          absl::StrCat(path, " is a symbolic link; not trusted"));
    }
    return absl::UnavailableError(
        absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  struct stat info;
  std::string problem;
  if (fstat(fd, &info) != 0) {
    problem = std::strerror(errno);
  } else if (!S_ISREG(info.st_mode)) {
    problem = "not a regular file";
  } else if (info.st_uid != geteuid()) {
    problem = absl::StrFormat("it belongs to user %d, not to this user (%d)",
                              info.st_uid, geteuid());
  } else if ((info.st_mode & 022) != 0) {
    problem =
        absl::StrFormat("others may write it (mode %o)", info.st_mode & 0777);
  } else if (static_cast<size_t>(info.st_size) > max_bytes) {
    problem = absl::StrCat("it is larger than ", max_bytes, " bytes");
  }
  if (!problem.empty()) {
    close(fd);
    return absl::PermissionDeniedError(
        absl::StrCat(path, " is not trusted: ", problem));
  }
  std::string contents(static_cast<size_t>(info.st_size), '\0');
  size_t got = 0;
  while (got < contents.size()) {
    const ssize_t n = read(fd, contents.data() + got, contents.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  contents.resize(got);
  return contents;
}

bool IsValidJobId(const std::string& id) {
  if (id.empty() || id.size() > 128 || id == "." || id == "..") return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace trl

#include "common/auth_token.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trl {

absl::StatusOr<std::string> RandomBytes(size_t count) {
  std::string bytes(count, '\0');
  size_t got = 0;
  while (got < count) {
    const ssize_t n = getrandom(bytes.data() + got, count - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError("getrandom failed");
    got += static_cast<size_t>(n);
  }
  return bytes;
}

absl::StatusOr<std::string> RandomToken() {
  auto bytes = RandomBytes(32);
  if (!bytes.ok()) return bytes.status();
  std::string hex;
  for (unsigned char byte : *bytes) absl::StrAppendFormat(&hex, "%02x", byte);
  return hex;
}

namespace {

// Creates `path` with a new token unless it exists; never overwrites (two
// coordinators starting at once agree on one file: link() is atomic).
absl::Status CreateTokenFile(const std::string& path) {
  std::error_code ignored;
  const auto dir = std::filesystem::path(path).parent_path();
  std::filesystem::create_directories(dir, ignored);
  chmod(dir.c_str(), 0700);
  auto token = RandomToken();
  if (!token.ok()) return token.status();
  const std::string temp = absl::StrCat(path, ".new.", getpid());
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", temp, ": ", std::strerror(errno)));
  }
  const std::string line = *token + "\n";
  const bool ok = write(fd, line.data(), line.size()) ==
                      static_cast<ssize_t>(line.size()) &&
                  fsync(fd) == 0;
  close(fd);
  const int rc = ok ? link(temp.c_str(), path.c_str()) : -1;
  const int error = errno;
  unlink(temp.c_str());
  if (!ok || (rc != 0 && error != EEXIST)) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    return absl::NotFoundError(
        absl::StrCat("no auth token: ", path,
                     " does not exist. `trl-coord start` creates "
                     "~/.trl/token on its machine and says so; every machine "
                     "of the job needs that same file: copy it to ",
                     path,
                     " (mode 0600) or share the home directory, or pass "
                     "--auth_token_file or TRL_AUTH_TOKEN"));
  }
  if ((info.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "auth token file %s is readable by others (mode %o); chmod 600 it",
        path, info.st_mode & 0777));
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string token(absl::StripAsciiWhitespace(text.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("auth token file ", path, " is empty"));
  }
  return token;
}

}  // namespace

std::string DefaultTokenPath() {
  const char* home = std::getenv("HOME");
  return absl::StrCat(home ? home : "/", "/.trl/token");
}

absl::StatusOr<std::string> LoadToken(const TokenSource& source) {
  if (source.token_file.empty() &&
      (source.environment_set || !source.environment.empty())) {
    std::string token(absl::StripAsciiWhitespace(source.environment));
    if (token.empty()) {
      return absl::InvalidArgumentError(
          "TRL_AUTH_TOKEN is set but empty (or only whitespace); set it to "
          "the cluster's token, unset it to use ~/.trl/token, or pass "
          "--insecure on loopback");
    }
    return token;
  }
  const std::string path =
      source.token_file.empty() ? DefaultTokenPath() : source.token_file;
  if (source.create_if_missing && source.token_file.empty()) {
    if (absl::Status created = CreateTokenFile(path); !created.ok()) {
      return created;
    }
  }
  return ReadTokenFile(path);
}

std::string TokenOrigin(const std::string& token_file) {
  if (!token_file.empty()) return token_file;
  if (std::getenv("TRL_AUTH_TOKEN") != nullptr) return "TRL_AUTH_TOKEN";
  return DefaultTokenPath();
}

absl::StatusOr<std::string> ResolveAuthToken(const std::string& token_file,
                                             bool insecure,
                                             bool create_if_missing) {
  if (insecure) return std::string();
  const char* environment = std::getenv("TRL_AUTH_TOKEN");
  TokenSource source;
  source.token_file = token_file;
  source.environment = environment ? environment : "";
  source.environment_set = environment != nullptr;
  source.create_if_missing = create_if_missing;
  return LoadToken(source);
}

bool TokensEqual(const std::string& expected, const std::string& given) {
  // Every byte of `expected` is compared, whatever `given` holds.
  unsigned char difference = expected.size() == given.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char other =
        i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    difference |= static_cast<unsigned char>(expected[i]) ^ other;
  }
  return difference == 0 && !expected.empty();
}

std::string BearerValue(const std::string& token) {
  return absl::StrCat("Bearer ", token);
}

}  // namespace trl

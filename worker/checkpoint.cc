#include "worker/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace trl::worker {
namespace {

constexpr char kMagic[8] = {'T', 'R', 'L', 'C', 'K', 'P', 'T', '1'};

uint64_t Fnv1a(const std::string& bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

template <typename T>
void Append(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

template <typename T>
bool Take(const std::string& in, size_t* at, T* value) {
  if (in.size() - *at < sizeof(T)) return false;
  std::memcpy(value, in.data() + *at, sizeof(T));
  *at += sizeof(T);
  return true;
}

}  // namespace

absl::Status SaveCheckpoint(const std::string& path, const Checkpoint& state) {
  std::string bytes(kMagic, sizeof(kMagic));
  Append(&bytes, state.step);
  Append(&bytes, state.seed);
  Append(&bytes, state.effective_batch_size);
  Append(&bytes, static_cast<uint64_t>(state.params.size()));
  bytes.append(reinterpret_cast<const char*>(state.params.data()),
               state.params.size() * sizeof(float));
  Append(&bytes, Fnv1a(bytes));

  const std::string temp = absl::StrCat(path, ".tmp.", getpid());
  // A new file only (no link followed, nothing reused), readable by us
  // alone: checkpoints are the user's weights.
  unlink(temp.c_str());
  const int fd = open(
      temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot write ", temp, ": ", std::strerror(errno)));
  }
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  const bool ok = written == bytes.size() && fsync(fd) == 0;
  close(fd);
  if (!ok || rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(temp.c_str());
    return absl::UnavailableError(absl::StrCat(
        "cannot save the checkpoint ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Checkpoint>> LoadCheckpoint(
    const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0 && errno == ENOENT) {
    return std::optional<Checkpoint>();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::UnavailableError(absl::StrCat(
        "cannot read the checkpoint ", path, ": ", std::strerror(errno)));
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  auto corrupt = [&](const char* what) {
    return absl::DataLossError(absl::StrCat("the checkpoint ", path, " ", what,
                                            " (delete it to start over)"));
  };
  if (bytes.size() < sizeof(kMagic) ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return corrupt("is not a trl-demo-train checkpoint");
  }
  if (bytes.size() < sizeof(kMagic) + 5 * sizeof(uint64_t)) {
    return corrupt("is truncated");
  }
  uint64_t stored_hash = 0;
  std::memcpy(&stored_hash, bytes.data() + bytes.size() - sizeof(uint64_t),
              sizeof(uint64_t));
  const std::string body = bytes.substr(0, bytes.size() - sizeof(uint64_t));
  if (Fnv1a(body) != stored_hash) return corrupt("is corrupt (bad checksum)");
  Checkpoint state;
  size_t at = sizeof(kMagic);
  uint64_t count = 0;
  Take(body, &at, &state.step);
  Take(body, &at, &state.seed);
  Take(body, &at, &state.effective_batch_size);
  Take(body, &at, &count);
  if ((body.size() - at) != count * sizeof(float)) {
    return corrupt("has the wrong length");
  }
  state.params.resize(count);
  std::memcpy(state.params.data(), body.data() + at, count * sizeof(float));
  return std::optional<Checkpoint>(std::move(state));
}

}  // namespace trl::worker

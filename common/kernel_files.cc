#include "common/kernel_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace trl {

std::string ReadRestOf(int fd, size_t max_bytes) {
  std::string text;
  char buffer[4096];
  while (text.size() < max_bytes) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  if (text.size() > max_bytes) text.resize(max_bytes);
  return text;
}

std::string ReadKernelFile(const std::string& path, size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text = ReadRestOf(fd, max_bytes);
  close(fd);
  return text;
}

}  // namespace trl

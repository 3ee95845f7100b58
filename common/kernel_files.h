// Reading the kernel's files (/proc/PID/stat, environ, comm) of processes
// that may exit while they are read. A read of such a file fails with
// ESRCH once its process is gone, and libstdc++'s filebuf throws on a
// failed read whatever the stream's exception mask: an std::ifstream there
// ended the coordinator with std::terminate (seen in CI under ASan, while
// it stopped its workers). These use read(2), and a process that is gone
// reads as empty.
#ifndef TRL_COMMON_KERNEL_FILES_H_
#define TRL_COMMON_KERNEL_FILES_H_

#include <cstddef>
#include <string>

namespace trl {

// What is left to read from `fd`, at most `max_bytes`; what was read
// before an error (ESRCH: the process is gone).
std::string ReadRestOf(int fd, size_t max_bytes);

// The contents of `path` (at most `max_bytes`), empty if it cannot be
// opened or read.
std::string ReadKernelFile(const std::string& path, size_t max_bytes = 1 << 20);

}  // namespace trl

#endif  // TRL_COMMON_KERNEL_FILES_H_

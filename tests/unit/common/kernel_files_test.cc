// Reading /proc files of a process that is gone by the time they are read:
// empty, never an exception (a std::ifstream there threw from inside
// libstdc++ and ended the coordinator with std::terminate).
#include "common/kernel_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

namespace trl {
namespace {

// A child that is killed and reaped: its pid names no process any more.
pid_t GoneChild() {
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  return child;
}

void Reap(pid_t child) {
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

TEST(KernelFilesTest, AFileOfAProcessGoneBeforeItIsReadReadsAsEmpty) {
  const pid_t child = GoneChild();
  ASSERT_GT(child, 0);
  const std::string stat = "/proc/" + std::to_string(child) + "/stat";
  const int fd = open(stat.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  // What the sweeps did: an ifstream opened while the process ran...
  std::ifstream stream(stat);
  Reap(child);
  EXPECT_EQ(ReadRestOf(fd, 4096), "");
  close(fd);
  // ... which throws from inside libstdc++ when it reads (ESRCH).
  EXPECT_ANY_THROW(std::string((std::istreambuf_iterator<char>(stream)),
                               std::istreambuf_iterator<char>()));
  EXPECT_EQ(ReadKernelFile(stat), "");
}

TEST(KernelFilesTest, ALiveProcessesFileIsReadWhole) {
  const std::string stat = ReadKernelFile("/proc/self/stat");
  EXPECT_EQ(stat.rfind(std::to_string(getpid()) + " (", 0), 0u) << stat;
  EXPECT_EQ(stat.back(), '\n');
  EXPECT_EQ(ReadKernelFile("/proc/self/stat", 4).size(), 4u);
}

}  // namespace
}  // namespace trl

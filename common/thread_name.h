// Names the calling thread, as `top -H`, `ps -L`, `perf report --sort
// comm` and /proc/PID/task/TID/comm show it: the coordinator's owner among
// gRPC's threads is then found at a glance. Linux keeps 15 bytes of it.
#ifndef TRL_COMMON_THREAD_NAME_H_
#define TRL_COMMON_THREAD_NAME_H_

#include <pthread.h>

#include <string>

namespace trl {

inline void NameThisThread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace trl

#endif  // TRL_COMMON_THREAD_NAME_H_

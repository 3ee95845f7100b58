// Fresh NCCL unique ids, one per generation, each from its own
// trl-nccl-root process (see nccl_root_main.cc for why a process). At most
// one such process is alive: asking for the next id ends the previous one.
//
// Thread-compatible: the coordinator calls it under its lock.
#ifndef TRL_COORDINATOR_RENDEZVOUS_NCCL_ID_SOURCE_H_
#define TRL_COORDINATOR_RENDEZVOUS_NCCL_ID_SOURCE_H_

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"

namespace trl {

class NcclIdSource {
 public:
  // `helper_path`: the trl-nccl-root binary.
  explicit NcclIdSource(std::string helper_path);
  ~NcclIdSource();
  NcclIdSource(const NcclIdSource&) = delete;
  NcclIdSource& operator=(const NcclIdSource&) = delete;

  // Ends the previous generation's root, starts a new one whose socket
  // listens on `interface_name` (empty: NCCL's choice), returns its id in hex.
  absl::StatusOr<std::string> Next(const std::string& interface_name);

  // Ends the current root, if any.
  void Release();

  pid_t helper_pid() const { return pid_; }

 private:
  const std::string helper_path_;
  pid_t pid_ = -1;
  int keepalive_fd_ = -1;  // write end of the helper's stdin
};

// Where trl-nccl-root is, beside the running binary; "" if it is not there.
std::string FindNcclRootHelper();

}  // namespace trl

#endif  // TRL_COORDINATOR_RENDEZVOUS_NCCL_ID_SOURCE_H_

// Whether this machine is fit for ranks (docs/health.md): its log and run
// directories have space, and the operator's own check passes
// (--health_check CMD, as Slurm's HealthCheckProgram: run with /bin/sh -c,
// a non-zero exit means unhealthy and its last line of output is the
// reason). The command is bounded in time: it runs in a process group of
// its own, killed whole when its time is up or once it has exited (nothing
// it started is left running).
#ifndef TRL_AGENT_HEALTH_NODE_HEALTH_H_
#define TRL_AGENT_HEALTH_NODE_HEALTH_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/health/free_space.h"

namespace trl {

struct HealthCheckOptions {
  std::string command;  // --health_check; empty: none
  std::chrono::milliseconds command_timeout{30000};
  // Directories that must keep min_free_bytes free (the log directory,
  // the workers' working directory); 0 bytes: no disk check.
  std::vector<std::string> directories;
  uint64_t min_free_bytes = 0;
  // How long a directory's statvfs is waited for (agent/health/free_space.h)
  // and what reads it (tests make it hang).
  std::chrono::milliseconds disk_timeout{10000};
  StatvfsFunction statvfs_function = &statvfs;
};

// One line naming the check that failed and what it found; empty if every
// check passes. Takes as long as the disk reads and the command do, at
// most their timeouts.
std::string CheckNodeHealth(const HealthCheckOptions& options);

// --min_free_disk_mb in bytes, and back as the operator gave it (the
// shortest decimal that makes the same bytes).
uint64_t MinFreeBytes(double min_free_disk_mb);
std::string MinFreeDiskMbFlag(uint64_t min_free_bytes);

// The disk check's verdict on `directory` with `free_bytes` available to
// unprivileged users (pure): empty if it has at least `min_free_bytes`.
std::string DiskSpaceProblem(const std::string& directory, uint64_t free_bytes,
                             uint64_t min_free_bytes);

// Runs the operator's check: empty if it exited 0, else why not.
std::string RunHealthCommand(const std::string& command,
                             std::chrono::milliseconds timeout);

}  // namespace trl

#endif  // TRL_AGENT_HEALTH_NODE_HEALTH_H_

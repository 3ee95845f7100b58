// `trl-coord diagnose`: why each generation of a job ended, where its
// ranks stood, and how the job ended (record/diagnosis.h), from the
// job's events: the file the coordinator keeps on its machine (during the
// job or after it), else a running coordinator's (--address, or the
// config's main_process_ip:port, from any machine with the token).
#ifndef TRL_COORDINATOR_CLI_DIAGNOSE_H_
#define TRL_COORDINATOR_CLI_DIAGNOSE_H_

#include <cstdint>
#include <string>

#include "coordinator/cli/coordinator_client.h"

namespace CLI {
class App;
}

namespace trl {

struct DiagnoseFlags {
  CoordinatorConnectionFlags connection;
  std::string state_file;   // overrides the config's default
  int64_t generation = -1;  // -1: every one
  double timeout_s = 10;
};

void AddDiagnoseFlags(CLI::App& app, DiagnoseFlags& flags);

// Returns the process exit code: 0, 1 when no history could be read, 2 for
// bad flags or config.
int RunDiagnose(const DiagnoseFlags& flags);

}  // namespace trl

#endif  // TRL_COORDINATOR_CLI_DIAGNOSE_H_

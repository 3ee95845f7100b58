// Where an agent keeps its ranks' logs: its own --log_dir, else the one
// the coordinator was started with (Assignment.log_dir), so that
// `trl-coord start --log_dir` covers every machine. Pure.
#ifndef TRL_AGENT_CORE_LOG_DIR_CHOICE_H_
#define TRL_AGENT_CORE_LOG_DIR_CHOICE_H_

#include <string>

namespace trl {

struct LogDirChoice {
  std::string dir;  // empty: no rank log files
  bool from_coordinator = false;
  // Why the coordinator's was not taken (empty: it was, or there was none).
  std::string refused;
};

// `own` is the agent's --log_dir; `coordinators` the assignment's. An
// agent whose workers run as another user (--worker_user: the agent is
// root) never takes the coordinator's: root would create and write files
// where another machine said, through directories this machine did not
// check; it needs its own --log_dir, checked at its start.
LogDirChoice ChooseLogDir(const std::string& own,
                          const std::string& coordinators,
                          bool workers_of_another_user);

}  // namespace trl

#endif  // TRL_AGENT_CORE_LOG_DIR_CHOICE_H_

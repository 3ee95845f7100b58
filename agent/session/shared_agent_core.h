// The agent's core (agent/core/agent_core.h) shared by the threads of its edge:
// the stream's reader, the heartbeat and lease threads, the workers' events and
// the signal thread. Each call runs under one lock and only computes: the
// effects it returns are carried out after the lock is released, so a stream
// write blocked in a silent partition never holds up the lease.
#ifndef TRL_AGENT_SESSION_SHARED_AGENT_CORE_H_
#define TRL_AGENT_SESSION_SHARED_AGENT_CORE_H_

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/core/agent_core.h"
#include "common/tsan_visible_mutex.h"

namespace trl {

class SharedAgentCore {
 public:
  explicit SharedAgentCore(AgentCoreSettings settings)
      : core_(std::move(settings)) {}

  // Runs `step(core)` under the lock and returns what it returns.
  template <typename Step>
  auto With(Step&& step) {
    MutexLock lock(&mutex_);
    return step(core_);
  }

 private:
  absl::Mutex mutex_;
  AgentCore core_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace trl

#endif  // TRL_AGENT_SESSION_SHARED_AGENT_CORE_H_

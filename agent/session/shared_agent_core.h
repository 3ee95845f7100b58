// The agent's core (agent/core/agent_core.h) shared by the threads of its edge:
// the stream's reader, the heartbeat and lease threads, the workers' events and
// the signal thread. Each call runs under one lock and only computes: the
// effects it returns are carried out after the lock is released, so a stream
// write blocked in a silent partition never holds up the lease.
// After each call the core's fence deadline goes to the guardian's page
// (agent/cleanup/fence_page.h), so that no step moves the lease and not the
// fence.
#ifndef TRL_AGENT_SESSION_SHARED_AGENT_CORE_H_
#define TRL_AGENT_SESSION_SHARED_AGENT_CORE_H_

#include <type_traits>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/cleanup/fence_page.h"
#include "agent/core/agent_core.h"
#include "common/tsan_visible_mutex.h"

namespace trl {

class SharedAgentCore {
 public:
  explicit SharedAgentCore(AgentCoreSettings settings)
      : core_(std::move(settings)) {}

  // From now on, the fence deadline goes to `fence` (null: nowhere).
  void PublishFenceTo(FencePage* fence) {
    MutexLock lock(&mutex_);
    fence_ = fence;
    PublishFence();
  }

  // Runs `step(core)` under the lock and returns what it returns.
  template <typename Step>
  auto With(Step&& step) {
    MutexLock lock(&mutex_);
    if constexpr (std::is_void_v<decltype(step(core_))>) {
      step(core_);
      PublishFence();
    } else {
      auto result = step(core_);
      PublishFence();
      return result;
    }
  }

 private:
  void PublishFence() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (fence_ != nullptr) fence_->Publish(core_.FenceDeadline());
  }

  absl::Mutex mutex_;
  AgentCore core_ ABSL_GUARDED_BY(mutex_);
  FencePage* fence_ ABSL_GUARDED_BY(mutex_) = nullptr;
};

}  // namespace trl

#endif  // TRL_AGENT_SESSION_SHARED_AGENT_CORE_H_

// The core's slow work (a generation's rendezvous, the state file's
// writes): handed to the Offload (the slow-work thread, serial_worker.h),
// and counted until its `done` has come back on the owner's thread, so
// that the owner knows when nothing is left in flight. Without an Offload
// (a test's core), the work and its `done` run at once, in line.
//
// Not thread-safe: the owner serialises calls, and the Offload must call
// `done` on the owner's thread.
#ifndef TRL_COORDINATOR_OWNER_OFFLOADED_WORK_H_
#define TRL_COORDINATOR_OWNER_OFFLOADED_WORK_H_

#include <functional>
#include <utility>

namespace trl {

class OffloadedWork {
 public:
  // Runs `work` where slow work may run (it must not touch the core), then
  // `done` on the owner's thread.
  using Offload = std::function<void(std::function<void()> work,
                                     std::function<void()> done)>;

  void SetOffload(Offload offload) { offload_ = std::move(offload); }
  // Hands `work` to the Offload (or runs it in line), then `done` here.
  void Run(std::function<void()> work, std::function<void()> done);
  // Run as an Offload, for the parts of the core that offload work; this
  // must outlive it.
  Offload AsOffload() {
    return [this](std::function<void()> work, std::function<void()> done) {
      Run(std::move(work), std::move(done));
    };
  }
  // Whether work handed out has not come back yet.
  bool outstanding() const { return outstanding_ > 0; }

 private:
  Offload offload_;
  int outstanding_ = 0;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_OFFLOADED_WORK_H_

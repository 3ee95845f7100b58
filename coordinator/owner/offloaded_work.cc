#include "coordinator/owner/offloaded_work.h"

namespace trl {

void OffloadedWork::Run(std::function<void()> work,
                        std::function<void()> done) {
  ++outstanding_;
  auto finish = [this, done = std::move(done)] {
    --outstanding_;
    done();
  };
  if (!offload_) {
    work();
    finish();
    return;
  }
  offload_(std::move(work), std::move(finish));
}

}  // namespace trl

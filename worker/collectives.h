// The collectives data-parallel training needs, over whatever joins the
// ranks: Gloo over TCP for CPU jobs, NCCL for GPU jobs, or nothing for a
// job of one. Errors (a peer gone, a deadline passed) come back as
// statuses, never as a hang or an exception.
#ifndef TRL_WORKER_COLLECTIVES_H_
#define TRL_WORKER_COLLECTIVES_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"

namespace trl::worker {

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;
  // Every rank ends with the element-wise sum of every rank's `data`.
  virtual absl::Status AllReduceSum(float* data, size_t count) = 0;
  // Every rank ends with `root`'s bytes.
  virtual absl::Status Broadcast(void* data, size_t bytes, int root) = 0;
};

// A job of one process: both collectives are the identity.
class SingleProcessCollectives : public Collectives {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "single process"; }
  absl::Status AllReduceSum(float*, size_t) override {
    return absl::OkStatus();
  }
  absl::Status Broadcast(void*, size_t, int) override {
    return absl::OkStatus();
  }
};

}  // namespace trl::worker

#endif  // TRL_WORKER_COLLECTIVES_H_

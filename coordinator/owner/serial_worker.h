// One thread that runs posted work in the order it was posted: where the
// coordinator's slow work goes (a generation's rendezvous, the state
// file's writes and fsync), so that the owner thread never waits on a
// disk or a helper process, and two writes of the state file never pass
// each other.
#ifndef TRL_COORDINATOR_OWNER_SERIAL_WORKER_H_
#define TRL_COORDINATOR_OWNER_SERIAL_WORKER_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace trl {

class SerialWorker {
 public:
  SerialWorker();
  // Runs what is still queued (a job's last write must reach the disk),
  // then ends the thread.
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  void Post(std::function<void()> work);

 private:
  void Run();

  absl::Mutex mutex_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mutex_);
  bool ending_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_SERIAL_WORKER_H_

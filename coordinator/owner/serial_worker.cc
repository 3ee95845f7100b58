#include "coordinator/owner/serial_worker.h"

#include <utility>

#include "common/thread_name.h"
#include "common/tsan_visible_mutex.h"

namespace trl {

SerialWorker::SerialWorker() : thread_([this] { Run(); }) {}

SerialWorker::~SerialWorker() {
  {
    MutexLock lock(&mutex_);
    ending_ = true;
  }
  thread_.join();
}

void SerialWorker::Post(std::function<void()> work) {
  MutexLock lock(&mutex_);
  queue_.push_back(std::move(work));
}

void SerialWorker::Run() {
  NameThisThread("trl-slow-work");
  while (true) {
    std::function<void()> work;
    {
      MutexLock lock(&mutex_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
        return !queue_.empty() || ending_;
      };
      Await(&mutex_, ready);
      if (queue_.empty()) return;  // ending, and nothing left to run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
  }
}

}  // namespace trl

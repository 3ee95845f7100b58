// Keeps TRL_HEARTBEAT_FILE fresh, so that the agent (with
// --worker_heartbeat_timeout) can tell a hung worker from a busy one. Beat()
// from the training loop proves progress; HeartbeatThread only proves the
// process is alive, for phases with no loop to beat from.
#ifndef TRL_WORKER_HEARTBEAT_H_
#define TRL_WORKER_HEARTBEAT_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace trl::worker {

class Heartbeat {
 public:
  // An empty path (no TRL_HEARTBEAT_FILE) makes Beat() do nothing.
  explicit Heartbeat(std::string path) : path_(std::move(path)) {}
  // Sets the file's modification time to now, creating it if needed.
  // Returns false if the file cannot be touched.
  bool Beat() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class HeartbeatThread {
 public:
  HeartbeatThread(std::string path, std::chrono::milliseconds interval);
  ~HeartbeatThread();
  HeartbeatThread(const HeartbeatThread&) = delete;
  HeartbeatThread& operator=(const HeartbeatThread&) = delete;

 private:
  const Heartbeat heartbeat_;
  const std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace trl::worker

#endif  // TRL_WORKER_HEARTBEAT_H_

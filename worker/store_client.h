// A worker's client of the coordinator's rendezvous store (service Store):
// set, get (waiting for keys up to a deadline), wait and add, always in
// this worker's job and generation, with this generation's store token.
#ifndef TRL_WORKER_STORE_CLIENT_H_
#define TRL_WORKER_STORE_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/launch_env.h"

namespace trl::worker {

class StoreClient {
 public:
  // Needs TRL_COORDINATOR_ADDR and TRL_STORE_TOKEN in `env` (an error says
  // so otherwise). Connects lazily.
  static absl::StatusOr<std::unique_ptr<StoreClient>> Create(
      const LaunchEnv& env);
  ~StoreClient();

  absl::Status Set(const std::string& key, const std::string& value);
  // The keys' values, in order, once every key is set; DEADLINE_EXCEEDED
  // naming the missing keys after `timeout`.
  absl::StatusOr<std::vector<std::string>> Get(
      const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  absl::Status Wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout);
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);

 private:
  class Impl;
  explicit StoreClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace trl::worker

#endif  // TRL_WORKER_STORE_CLIENT_H_

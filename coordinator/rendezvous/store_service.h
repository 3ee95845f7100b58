// The gRPC face of the workers' rendezvous store (service Store in the
// wire protocol), served on the coordinator's own port. Waits hold no
// thread: a Get that must wait is a reactor that a later Set, Add, its
// deadline (kept by one timer thread) or the caller's cancellation ends.
#ifndef TRL_COORDINATOR_RENDEZVOUS_STORE_SERVICE_H_
#define TRL_COORDINATOR_RENDEZVOUS_STORE_SERVICE_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "coordinator/rendezvous/store.h"

namespace grpc {
class Service;
}

namespace trl {

class StoreService {
 public:
  explicit StoreService(StoreLimits limits = {});
  ~StoreService();
  StoreService(const StoreService&) = delete;
  StoreService& operator=(const StoreService&) = delete;

  // Opens `generation`'s namespace and returns its new random token; every
  // older generation's keys and waits end.
  std::string OpenGeneration(const std::string& job_id, int64_t generation);

  grpc::Service* service();

  // Where calls with a valid credential of the current generation came
  // from ("ADDRESS:PORT"): connection caps never cut these.
  std::set<std::string> AuthenticatedPeers() const;
  // Whether `token` is the current generation's store credential.
  bool IsCurrentToken(const std::string& token) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_RENDEZVOUS_STORE_SERVICE_H_

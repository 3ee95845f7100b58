#include "coordinator/rendezvous.h"

#include "common/network.h"

namespace trl {

absl::StatusOr<RendezvousData> PrepareRendezvous(
    const std::string& master_addr) {
  RendezvousData data;
  auto port = PickFreePort(master_addr);
  if (!port.ok()) port = PickFreePort("0.0.0.0");
  if (!port.ok()) return port.status();
  data.master_port = *port;
  return data;
}

}  // namespace trl

#include "coordinator/rendezvous/generation_rendezvous.h"

#include "common/logging.h"
#include "common/network.h"

namespace trl {

absl::StatusOr<RendezvousData> PrepareRendezvous(const std::string& master_addr,
                                                 NcclIdSource* nccl) {
  RendezvousData data;
  auto port = PickFreePort(master_addr);
  if (!port.ok()) port = PickFreePort("0.0.0.0");
  if (!port.ok()) return port.status();
  data.master_port = *port;
  if (nccl != nullptr) {
    auto id = nccl->Next(InterfaceWithAddress(master_addr));
    if (id.ok()) {
      data.nccl_unique_id_hex = *id;
    } else {
      ComponentLogger("coord")->warn("no NCCL unique id this generation: {}",
                                     std::string(id.status().message()));
    }
  }
  return data;
}

}  // namespace trl

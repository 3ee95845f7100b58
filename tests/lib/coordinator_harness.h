// For tests of how the Coordinator answers agents, without sockets: a
// small CPU job's options, a Coordinator on a caller's clock with a fixed
// rendezvous, and a registration as a real agent sends it.
#ifndef TRL_TESTS_LIB_COORDINATOR_HARNESS_H_
#define TRL_TESTS_LIB_COORDINATOR_HARNESS_H_

#include <memory>
#include <string>

#include "coordinator/owner/core.h"

namespace trl {

// Two machines of one CPU process each, running /bin/true.
inline CoordinatorOptions TwoMachineCpuJob() {
  CoordinatorOptions options;
  options.config.num_machines = 2;
  options.config.num_processes = 2;
  options.config.use_cpu = true;
  options.job_id = "job";
  options.worker_argv = {"/bin/true"};
  return options;
}

inline std::unique_ptr<CoordinatorCore> CoordinatorOnClock(
    const CoordinatorOptions& options, CoordinatorCore::Clock clock) {
  return std::make_unique<CoordinatorCore>(
      options,
      [](const std::string&) {
        return absl::StatusOr<RendezvousData>(RendezvousData{1234, ""});
      },
      std::move(clock));
}

// Machine `machine_rank`'s registration for `options`' job, one worker.
inline trl::launch::v1::AgentMessage Registration(
    const CoordinatorOptions& options, int machine_rank, int lease_ms) {
  trl::launch::v1::AgentMessage message;
  auto* r = message.mutable_registration();
  r->set_machine_rank(machine_rank);
  r->set_hostname("node" + std::to_string(machine_rank));
  r->set_host_id("boot-" + std::to_string(machine_rank) + "/pidns:1");
  r->set_advertise_addr("127.0.0.1");
  r->set_local_world_size(1);
  r->set_lease_ms(lease_ms);
  for (const auto& [key, value] : AgreementFingerprint(options.config)) {
    (*r->mutable_config_fingerprint())[key] = value;
  }
  return message;
}

}  // namespace trl

#endif  // TRL_TESTS_LIB_COORDINATOR_HARNESS_H_

// libFuzzer target: the coordinator's handling of agent messages. The input
// is a sequence of length-prefixed AgentMessages from up to four fake
// agents; whatever they say (registrations with odd ranks, exits of unknown
// generations, heartbeats of strangers), the coordinator answers or
// ignores, and never crashes or breaks its invariants.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>

#include "coordinator/owner/core.h"
#include "tests/lib/fake_agent_link.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  trl::CoordinatorOptions options;
  options.config.num_machines = 2;
  options.config.num_processes = 4;
  options.config.use_cpu = true;
  options.job_id = "fuzz";
  options.worker_argv = {"/bin/true"};
  options.policy.restart.max_restarts = 2;
  auto now = trl::TimePoint();
  trl::CoordinatorCore core(
      options,
      [](const std::string&) {
        return absl::StatusOr<trl::RendezvousData>(
            trl::RendezvousData{1234, ""});
      },
      [&now] { return now; });
  trl::FakeAgentLink links[4];
  size_t at = 0;
  while (at + 2 <= size) {
    const size_t length = (data[at] | (data[at + 1] << 8)) & 0x3ff;
    const uint8_t target = at + 2 < size ? data[at + 2] : 0;
    at += 3;
    if (at + length > size) break;
    trl::launch::v1::AgentMessage message;
    if (message.ParseFromArray(data + at, static_cast<int>(length))) {
      core.OnMessage(&links[target % 4], message);
    }
    if (target & 0x80) core.OnDisconnected(&links[target % 4]);
    if (target & 0x40) {
      now += std::chrono::seconds(2);
      core.Tick();
    }
    at += length;
  }
  // Invariant 2: a started generation has ranks 0..world-1 once each.
  const auto status = core.Status();
  std::set<int> ranks;
  for (const auto& rank : status.ranks()) ranks.insert(rank.rank());
  if (static_cast<int>(ranks.size()) != status.ranks_size()) abort();
  return 0;
}

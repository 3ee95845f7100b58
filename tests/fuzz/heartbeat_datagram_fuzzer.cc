// libFuzzer target: the coordinator's handling of UDP heartbeat datagrams.
// Two agents are registered (their sessions and keys are known here); the
// input is a sequence of records, each either raw bytes sent as a datagram
// or the fields of a heartbeat that is then signed with a real key or a
// wrong one. Whatever arrives, the coordinator acks only correctly signed
// heartbeats of a live session with a counter above the last, never
// crashes, and each ack verifies with the key of the session it answers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/heartbeat_datagram.h"
#include "coordinator/owner/core.h"
#include "tests/lib/coordinator_harness.h"
#include "tests/lib/fake_agent_link.h"

namespace {

namespace pb = trl::launch::v1;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const trl::CoordinatorOptions options = trl::TwoMachineCpuJob();
  auto now = trl::TimePoint();
  auto owned = trl::CoordinatorOnClock(options, [&now] { return now; });
  trl::CoordinatorCore& core = *owned;
  uint8_t seed = 1;
  core.OfferUdpHeartbeats(
      29500,
      [&seed](size_t count) {
        std::string bytes(count, '\0');
        for (auto& byte : bytes) byte = static_cast<char>(seed++ * 151 + 7);
        return bytes;
      },
      /*encrypted=*/true);
  trl::FakeAgentLink links[2];
  for (int m = 0; m < 2; ++m) {
    core.OnMessage(&links[m], trl::Registration(options, m, 4000));
    if (links[m].reply().heartbeat_key().size() != trl::kHeartbeatKeySize) {
      abort();
    }
  }

  std::vector<std::string> batch;
  size_t at = 0;
  while (at < size) {
    const uint8_t kind = data[at++];
    if ((kind & 1) == 0) {  // raw bytes: a length, then that many
      if (at >= size) break;
      const size_t wanted = data[at++];
      const size_t length = std::min<size_t>(wanted, size - at);
      batch.emplace_back(reinterpret_cast<const char*>(data + at), length);
      at += length;
    } else {  // fields: machine, counter; signed with a real or a wrong key
      if (at + 2 > size) break;
      trl::HeartbeatDatagram beat;
      beat.kind = (kind & 2) ? trl::HeartbeatKind::kAck
                             : trl::HeartbeatKind::kHeartbeat;
      beat.machine_rank = data[at] % 3;
      const trl::FakeAgentLink& owner = links[(kind >> 2) & 1];
      beat.session = (kind & 8) ? owner.reply().heartbeat_session() + 1
                                : owner.reply().heartbeat_session();
      beat.counter = data[at + 1];
      const std::string wrong(trl::kHeartbeatKeySize, 'w');
      batch.push_back(trl::EncodeHeartbeat(
          beat, (kind & 16) ? std::string_view(wrong)
                            : std::string_view(owner.reply().heartbeat_key())));
      at += 2;
    }
    if ((kind & 0xe0) == 0xe0 || batch.size() == 64) {
      std::vector<std::string_view> views(batch.begin(), batch.end());
      for (const auto& reply : core.OnHeartbeatDatagrams(views)) {
        if (reply.index >= batch.size()) abort();
        const auto beat = trl::ParseHeartbeat(batch[reply.index]);
        const auto ack = trl::ParseHeartbeat(reply.bytes);
        if (!beat || !ack || beat->kind != trl::HeartbeatKind::kHeartbeat ||
            ack->kind != trl::HeartbeatKind::kAck ||
            ack->session != beat->session || ack->counter != beat->counter) {
          abort();
        }
        const trl::FakeAgentLink* owner = nullptr;
        for (const auto& link : links) {
          if (link.reply().heartbeat_session() == beat->session) owner = &link;
        }
        if (owner == nullptr ||
            !trl::HeartbeatSignedWith(batch[reply.index],
                                      owner->reply().heartbeat_key()) ||
            !trl::HeartbeatSignedWith(reply.bytes,
                                      owner->reply().heartbeat_key())) {
          abort();
        }
      }
      batch.clear();
      now += std::chrono::milliseconds(500);
      core.Tick();
    }
  }
  return 0;
}

// The coordinator's heartbeat socket holds what arrives while its owner is
// busy: at 16,384 agents the default buffer (about 270 datagrams, 17 ms of
// their heartbeats) overflowed during a generation's start, and the
// dropped heartbeats left leases without acks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "coordinator/ports/udp_heartbeat_server.h"
#include "tests/lib/coordinator_harness.h"

namespace trl {
namespace {

int RmemMax() {
  std::ifstream in("/proc/sys/net/core/rmem_max");
  int bytes = 0;
  in >> bytes;
  return bytes;
}

TEST(UdpHeartbeatBufferTest, TheSocketHoldsASecondOf16384AgentsHeartbeats) {
  Coordinator core(
      TwoMachineCpuJob(),
      [](const std::string&) {
        return absl::StatusOr<RendezvousData>(RendezvousData{1234, ""});
      },
      [] { return std::chrono::steady_clock::now(); });
  auto server = UdpHeartbeatServer::Start("127.0.0.1", 0, &core);
  ASSERT_TRUE(server.ok()) << server.status();
  // 8 MiB asked for, which the kernel accounts twice: as root beyond
  // net.core.rmem_max, otherwise up to it.
  const int asked = 8 << 20;
  const int expected =
      geteuid() == 0 ? 2 * asked : 2 * std::min(asked, RmemMax());
  EXPECT_GE((*server)->receive_buffer_bytes(), expected);
  EXPECT_GT((*server)->receive_buffer_bytes(), 2 * 212992);  // the default
}

}  // namespace
}  // namespace trl

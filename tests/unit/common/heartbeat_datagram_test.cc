// The UDP heartbeat datagram: its layout, its MAC, and what is refused.
#include "common/heartbeat_datagram.h"

#include <gtest/gtest.h>

#include <string>

namespace trl {
namespace {

const std::string kKey(kHeartbeatKeySize, 'k');

HeartbeatDatagram Beat() {
  HeartbeatDatagram beat;
  beat.kind = HeartbeatKind::kHeartbeat;
  beat.machine_rank = 4095;
  beat.session = 0x0123456789abcdefULL;
  beat.counter = 42;
  return beat;
}

TEST(HeartbeatDatagramTest, RoundTripsEveryField) {
  const std::string bytes = EncodeHeartbeat(Beat(), kKey);
  ASSERT_EQ(bytes.size(), kHeartbeatDatagramSize);
  EXPECT_EQ(bytes.substr(0, 4), "TRLH");
  const auto parsed = ParseHeartbeat(bytes);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->kind, HeartbeatKind::kHeartbeat);
  EXPECT_EQ(parsed->machine_rank, 4095u);
  EXPECT_EQ(parsed->session, 0x0123456789abcdefULL);
  EXPECT_EQ(parsed->counter, 42u);
  EXPECT_TRUE(HeartbeatSignedWith(bytes, kKey));

  HeartbeatDatagram ack = Beat();
  ack.kind = HeartbeatKind::kAck;
  ack.counter = ~uint64_t{0};
  const auto parsed_ack = ParseHeartbeat(EncodeHeartbeat(ack, kKey));
  ASSERT_TRUE(parsed_ack.has_value());
  EXPECT_EQ(parsed_ack->kind, HeartbeatKind::kAck);
  EXPECT_EQ(parsed_ack->counter, ~uint64_t{0});
}

TEST(HeartbeatDatagramTest, AnyChangedBitBreaksTheMac) {
  const std::string bytes = EncodeHeartbeat(Beat(), kKey);
  for (size_t byte = 0; byte < bytes.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string changed = bytes;
      changed[byte] = static_cast<char>(changed[byte] ^ (1 << bit));
      EXPECT_FALSE(HeartbeatSignedWith(changed, kKey))
          << "byte " << byte << " bit " << bit;
    }
  }
}

TEST(HeartbeatDatagramTest, AnotherKeyOrNoKeyDoesNotVerify) {
  const std::string bytes = EncodeHeartbeat(Beat(), kKey);
  std::string other = kKey;
  other.back() = 'j';
  EXPECT_FALSE(HeartbeatSignedWith(bytes, other));
  EXPECT_FALSE(HeartbeatSignedWith(bytes, ""));
}

TEST(HeartbeatDatagramTest, ParsingRefusesWhatIsNotADatagram) {
  const std::string good = EncodeHeartbeat(Beat(), kKey);
  EXPECT_FALSE(ParseHeartbeat("").has_value());
  EXPECT_FALSE(ParseHeartbeat(good.substr(0, 63)).has_value());
  EXPECT_FALSE(ParseHeartbeat(good + "x").has_value());
  EXPECT_FALSE(
      ParseHeartbeat("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(37, ' '))
          .has_value());
  auto with = [&](size_t at, char value) {
    std::string changed = good;
    changed[at] = value;
    return ParseHeartbeat(changed);
  };
  EXPECT_FALSE(with(0, 'X').has_value());  // magic
  EXPECT_FALSE(with(4, 2).has_value());    // version
  EXPECT_FALSE(with(5, 0).has_value());    // kind
  EXPECT_FALSE(with(5, 4).has_value());
  EXPECT_FALSE(with(7, 1).has_value());   // reserved
  EXPECT_FALSE(with(13, 1).has_value());  // reserved
}

}  // namespace
}  // namespace trl

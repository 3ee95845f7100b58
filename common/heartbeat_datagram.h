// Heartbeats over UDP: one 64-byte datagram per agent and interval, and an
// acknowledgement back, instead of a gRPC message each way. A gRPC
// message costs the coordinator ~100 us of CPU (HTTP/2 framing, a hop to
// the callback executor, ~3 context switches); a datagram read in a batch
// costs a few. The gRPC stream stays: it carries everything else, and the
// heartbeats too whenever datagrams do not get through.
//
// Layout (big-endian):
//   0  "TRLH"        4  version (1)   5  kind (1 heartbeat, 2 ack,
//                                        3 agent gone)
//   6  reserved (0, 2 bytes)          8  machine_rank (u32)
//   12 reserved (0, 4 bytes)          16 session (u64)   24 counter (u64)
//   32 HMAC-SHA256 of bytes 0..31 with the session's key
// The key and session come with the registration reply, over the
// authenticated (and, with TLS, encrypted) stream; a datagram of another
// session, with a bad MAC, or with a counter not above the last one
// accepted is dropped.
//
// An "agent gone" datagram is the agent's last word, sent for it by its
// guardian (agent/cleanup/job_guardian.h) once the agent has died and every
// worker it started has been seen to end: the coordinator may give its
// ranks to another machine at once instead of waiting out its lease. The
// agent signs it in advance (its counter is 0) and leaves it with the
// guardian; it is sent only after the agent's end, so a copy seen on the
// network says nothing that is not already true.
#ifndef TRL_COMMON_HEARTBEAT_DATAGRAM_H_
#define TRL_COMMON_HEARTBEAT_DATAGRAM_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct evp_mac_ctx_st;  // OpenSSL's EVP_MAC_CTX

namespace trl {

inline constexpr size_t kHeartbeatDatagramSize = 64;
inline constexpr size_t kHeartbeatKeySize = 32;

enum class HeartbeatKind : uint8_t { kHeartbeat = 1, kAck = 2, kAgentGone = 3 };

struct HeartbeatDatagram {
  HeartbeatKind kind = HeartbeatKind::kHeartbeat;
  uint32_t machine_rank = 0;
  uint64_t session = 0;
  uint64_t counter = 0;
};

// A signing key, prepared once: HMAC's key set-up (and OpenSSL's lookup
// of the algorithm) cost more than signing 32 bytes. Not thread-safe.
class HeartbeatKey {
 public:
  // An empty key signs nothing that verifies.
  explicit HeartbeatKey(std::string_view key);
  ~HeartbeatKey();
  HeartbeatKey(const HeartbeatKey&) = delete;
  HeartbeatKey& operator=(const HeartbeatKey&) = delete;

  // HMAC-SHA256 of `data`; false if the key is empty or OpenSSL failed.
  bool Mac(std::string_view data, unsigned char out[32]);

 private:
  evp_mac_ctx_st* context_ = nullptr;
};

// The 64 bytes to send, signed with `key` (kHeartbeatKeySize bytes).
std::string EncodeHeartbeat(const HeartbeatDatagram& datagram,
                            HeartbeatKey& key);
std::string EncodeHeartbeat(const HeartbeatDatagram& datagram,
                            std::string_view key);

// The fields of `bytes` if it has the layout above; the MAC is not checked
// (the key depends on the machine rank and session read here).
std::optional<HeartbeatDatagram> ParseHeartbeat(std::string_view bytes);

// Whether `bytes` carries a valid MAC for `key` (constant time).
bool HeartbeatSignedWith(std::string_view bytes, HeartbeatKey& key);
bool HeartbeatSignedWith(std::string_view bytes, std::string_view key);

}  // namespace trl

#endif  // TRL_COMMON_HEARTBEAT_DATAGRAM_H_

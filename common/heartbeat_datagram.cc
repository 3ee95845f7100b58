#include "common/heartbeat_datagram.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>

namespace trl {
namespace {

constexpr char kMagic[4] = {'T', 'R', 'L', 'H'};
constexpr uint8_t kVersion = 1;
constexpr size_t kSignedSize = 32;

void PutBigEndian(uint64_t value, int bytes, char* out) {
  for (int i = bytes - 1; i >= 0; --i) {
    out[i] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
}

uint64_t GetBigEndian(const char* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value = (value << 8) | static_cast<unsigned char>(in[i]);
  }
  return value;
}

std::array<unsigned char, 32> Mac(std::string_view signed_part,
                                  std::string_view key) {
  std::array<unsigned char, 32> mac{};
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(signed_part.data()),
       signed_part.size(), mac.data(), &length);
  return mac;
}

}  // namespace

std::string EncodeHeartbeat(const HeartbeatDatagram& datagram,
                            std::string_view key) {
  std::string bytes(kHeartbeatDatagramSize, '\0');
  char* out = bytes.data();
  std::copy(kMagic, kMagic + 4, out);
  out[4] = static_cast<char>(kVersion);
  out[5] = static_cast<char>(datagram.kind);
  PutBigEndian(datagram.machine_rank, 4, out + 8);
  PutBigEndian(datagram.session, 8, out + 16);
  PutBigEndian(datagram.counter, 8, out + 24);
  const auto mac = Mac(std::string_view(out, kSignedSize), key);
  std::copy(mac.begin(), mac.end(), out + kSignedSize);
  return bytes;
}

std::optional<HeartbeatDatagram> ParseHeartbeat(std::string_view bytes) {
  if (bytes.size() != kHeartbeatDatagramSize) return std::nullopt;
  const char* in = bytes.data();
  if (!std::equal(kMagic, kMagic + 4, in)) return std::nullopt;
  if (static_cast<uint8_t>(in[4]) != kVersion) return std::nullopt;
  const auto kind = static_cast<uint8_t>(in[5]);
  if (kind != static_cast<uint8_t>(HeartbeatKind::kHeartbeat) &&
      kind != static_cast<uint8_t>(HeartbeatKind::kAck)) {
    return std::nullopt;
  }
  if (GetBigEndian(in + 6, 2) != 0 || GetBigEndian(in + 12, 4) != 0) {
    return std::nullopt;
  }
  HeartbeatDatagram datagram;
  datagram.kind = static_cast<HeartbeatKind>(kind);
  datagram.machine_rank = static_cast<uint32_t>(GetBigEndian(in + 8, 4));
  datagram.session = GetBigEndian(in + 16, 8);
  datagram.counter = GetBigEndian(in + 24, 8);
  return datagram;
}

bool HeartbeatSignedWith(std::string_view bytes, std::string_view key) {
  if (bytes.size() != kHeartbeatDatagramSize || key.empty()) return false;
  const auto mac = Mac(bytes.substr(0, kSignedSize), key);
  return CRYPTO_memcmp(mac.data(), bytes.data() + kSignedSize, mac.size()) == 0;
}

}  // namespace trl

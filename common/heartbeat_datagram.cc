#include "common/heartbeat_datagram.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <algorithm>

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

// OpenSSL's HMAC, looked up once.
EVP_MAC* Hmac() {
  static EVP_MAC* const hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  return hmac;
}

}  // namespace

HeartbeatKey::HeartbeatKey(std::string_view key) {
  if (key.empty() || Hmac() == nullptr) return;
  context_ = EVP_MAC_CTX_new(Hmac());
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string("digest", digest, 0),
      OSSL_PARAM_construct_end()};
  if (context_ != nullptr &&
      EVP_MAC_init(context_, reinterpret_cast<const unsigned char*>(key.data()),
                   key.size(), params) == 1) {
    return;
  }
  EVP_MAC_CTX_free(context_);
  context_ = nullptr;
}

HeartbeatKey::~HeartbeatKey() { EVP_MAC_CTX_free(context_); }

bool HeartbeatKey::Mac(std::string_view data, unsigned char out[32]) {
  if (context_ == nullptr) return false;
  size_t length = 0;
  // Initialising with no key starts over with the key already set up.
  return EVP_MAC_init(context_, nullptr, 0, nullptr) == 1 &&
         EVP_MAC_update(context_,
                        reinterpret_cast<const unsigned char*>(data.data()),
                        data.size()) == 1 &&
         EVP_MAC_final(context_, out, &length, 32) == 1 && length == 32;
}

std::string EncodeHeartbeat(const HeartbeatDatagram& datagram,
                            std::string_view key) {
  HeartbeatKey prepared(key);
  return EncodeHeartbeat(datagram, prepared);
}

std::string EncodeHeartbeat(const HeartbeatDatagram& datagram,
                            HeartbeatKey& key) {
  std::string bytes(kHeartbeatDatagramSize, '\0');
  char* out = bytes.data();
  std::copy(kMagic, kMagic + 4, out);
  out[4] = static_cast<char>(kVersion);
  out[5] = static_cast<char>(datagram.kind);
  PutBigEndian(datagram.machine_rank, 4, out + 8);
  PutBigEndian(datagram.session, 8, out + 16);
  PutBigEndian(datagram.counter, 8, out + 24);
  unsigned char mac[32] = {};
  key.Mac(std::string_view(out, kSignedSize), mac);  // zeros: never valid
  std::copy(mac, mac + 32, out + kSignedSize);
  return bytes;
}

std::optional<HeartbeatDatagram> ParseHeartbeat(std::string_view bytes) {
  if (bytes.size() != kHeartbeatDatagramSize) return std::nullopt;
  const char* in = bytes.data();
  if (!std::equal(kMagic, kMagic + 4, in)) return std::nullopt;
  if (static_cast<uint8_t>(in[4]) != kVersion) return std::nullopt;
  const auto kind = static_cast<uint8_t>(in[5]);
  if (kind != static_cast<uint8_t>(HeartbeatKind::kHeartbeat) &&
      kind != static_cast<uint8_t>(HeartbeatKind::kAck) &&
      kind != static_cast<uint8_t>(HeartbeatKind::kAgentGone)) {
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

bool HeartbeatSignedWith(std::string_view bytes, HeartbeatKey& key) {
  unsigned char mac[32];
  if (bytes.size() != kHeartbeatDatagramSize ||
      !key.Mac(bytes.substr(0, kSignedSize), mac)) {
    return false;
  }
  return CRYPTO_memcmp(mac, bytes.data() + kSignedSize, sizeof(mac)) == 0;
}

bool HeartbeatSignedWith(std::string_view bytes, std::string_view key) {
  HeartbeatKey prepared(key);
  return HeartbeatSignedWith(bytes, prepared);
}

}  // namespace trl

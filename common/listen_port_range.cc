#include "common/listen_port_range.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace trl {
namespace {

// The next whole number of `text` from `*at`, after blanks; nullopt if
// none.
std::optional<int> NextNumber(std::string_view text, size_t* at) {
  while (*at < text.size() &&
         std::isspace(static_cast<unsigned char>(text[*at]))) {
    ++*at;
  }
  int value = 0;
  const char* begin = text.data() + *at;
  const auto [end, error] =
      std::from_chars(begin, text.data() + text.size(), value);
  if (error != std::errc() || end == begin) return std::nullopt;
  *at += static_cast<size_t>(end - begin);
  return value;
}

}  // namespace

std::optional<PortRange> ParsePortRange(std::string_view text) {
  size_t at = 0;
  const auto first = NextNumber(text, &at);
  const auto last = NextNumber(text, &at);
  if (!first || !last) return std::nullopt;
  for (; at < text.size(); ++at) {
    if (!std::isspace(static_cast<unsigned char>(text[at])))
      return std::nullopt;
  }
  if (*first < 1 || *last > 65535 || *first > *last) return std::nullopt;
  return PortRange{*first, *last};
}

std::optional<PortRange> ListenPortsBelow(PortRange ephemeral) {
  constexpr int kFirstUnprivileged = 1025;
  const int last = ephemeral.first - 1;
  const int first = std::max(kFirstUnprivileged, last - kListenSpan + 1);
  if (last - first + 1 < kMinListenSpan) return std::nullopt;
  return PortRange{first, last};
}

int CandidatePort(PortRange ports, unsigned seed, int i) {
  const unsigned size = static_cast<unsigned>(ports.size());
  return ports.first +
         static_cast<int>((seed % size + static_cast<unsigned>(i)) % size);
}

bool IsAnotherLaunchersDefault(int port) {
  // 29400 and 29500, and the ports next to them that their users take for
  // a second job (+1, +100 and the like).
  return port >= 29400 && port <= 29600;
}

}  // namespace trl

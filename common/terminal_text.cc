#include "common/terminal_text.h"

namespace trl {

namespace {

// How many bytes at `at` encode a C1 or bidi control; 0 for any other
// character.
size_t InvisibleControlBytes(const std::string& text, size_t at) {
  auto byte = [&](size_t i) {
    return i < text.size() ? static_cast<unsigned char>(text[i]) : 0;
  };
  const unsigned char b0 = byte(at), b1 = byte(at + 1), b2 = byte(at + 2);
  if (b0 == 0xC2 && b1 >= 0x80 && b1 <= 0x9F) return 2;  // C1
  if (b0 == 0xD8 && b1 == 0x9C) return 2;                // U+061C
  if (b0 == 0xE2 && b1 == 0x80 &&
      (b2 == 0x8E || b2 == 0x8F || (b2 >= 0xAA && b2 <= 0xAE))) {
    return 3;  // U+200E, U+200F, U+202A..U+202E
  }
  if (b0 == 0xE2 && b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9) return 3;
  return 0;
}

}  // namespace

std::string TerminalSafe(const std::string& text) {
  std::string line;
  line.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (const size_t n = InvisibleControlBytes(text, i); n > 0) {
      line += ' ';
      i += n;
    } else {
      line += (c < 0x20 || c == 0x7f) ? ' ' : text[i];
      ++i;
    }
  }
  return line;
}

}  // namespace trl

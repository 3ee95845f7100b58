// Text from the outside world (a worker's output, a path) made fit for a
// proto3 `string`, which must be UTF-8: a message holding anything else
// does not parse, and the agent's stream breaks with it.
#ifndef TRL_COMMON_UTF8_H_
#define TRL_COMMON_UTF8_H_

#include <string>
#include <string_view>

namespace trl {

// `text` with every byte that does not start a well-formed UTF-8 sequence
// (a stray continuation byte, a truncated sequence, an overlong form, a
// surrogate, a code point past U+10FFFF) replaced by U+FFFD. Valid text is
// returned as it is.
std::string ToValidUtf8(std::string_view text);

}  // namespace trl

#endif  // TRL_COMMON_UTF8_H_

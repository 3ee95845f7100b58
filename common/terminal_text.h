// Text from agents and workers (a hostname, where a rank stood, why it
// ended) made safe to print on an operator's terminal: one line, with no
// character a terminal would act on rather than show. Pure.
#ifndef TRL_COMMON_TERMINAL_TEXT_H_
#define TRL_COMMON_TERMINAL_TEXT_H_

#include <string>

namespace trl {

// `text` with each C0 control (newlines and ESC included), DEL, C1
// control (U+0080..U+009F; U+009B is CSI on some terminals, as ESC [ is on
// all) and bidi control, which reorders what follows it on the line
// ("Trojan Source": U+061C, U+200E, U+200F, U+202A..U+202E,
// U+2066..U+2069), replaced by a space.
std::string TerminalSafe(const std::string& text);

}  // namespace trl

#endif  // TRL_COMMON_TERMINAL_TEXT_H_

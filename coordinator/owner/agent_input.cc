#include "coordinator/owner/agent_input.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace trl {

namespace pb = trl::launch::v1;

std::string Bounded(const std::string& text, size_t bytes) {
  if (text.size() <= bytes) return text;
  size_t end = bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;  // a UTF-8 continuation byte
  }
  return absl::StrCat(text.substr(0, end), "... [cut]");
}

namespace {

// How many bytes at `at` encode a character a terminal would act on rather
// than show: a C1 control (U+0080..U+009F; U+009B is CSI on some
// terminals, as ESC [ is on all) or a bidi control, which reorders what
// follows it on the line ("Trojan Source"): U+061C, U+200E, U+200F,
// U+202A..U+202E, U+2066..U+2069. 0 for any other character.
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

std::string OneLine(const std::string& text) {
  const std::string bounded = Bounded(text, kReasonBytes);
  std::string line;
  line.reserve(bounded.size());
  for (size_t i = 0; i < bounded.size();) {
    const unsigned char c = static_cast<unsigned char>(bounded[i]);
    if (const size_t n = InvisibleControlBytes(bounded, i); n > 0) {
      line += ' ';
      i += n;
    } else {
      line += (c < 0x20 || c == 0x7f) ? ' ' : bounded[i];
      ++i;
    }
  }
  return line;
}

WorkerExit FromProto(const pb::WorkerExited& exited) {
  WorkerExit exit;
  exit.exit_code = exited.exit_code();
  exit.signal = exited.signal();
  exit.start_error = Bounded(exited.start_error(), kReasonBytes);
  exit.out_of_resources =
      exited.out_of_resources() && !exited.start_error().empty();
  exit.reason = Bounded(exited.reason(), kReasonBytes);
  exit.where = OneLine(exited.where());
  // Agents send at most 20 lines of about 1 KiB.
  const int first = std::max(0, exited.last_lines_size() - kLines);
  for (int i = first; i < exited.last_lines_size(); ++i) {
    exit.last_lines.push_back(Bounded(exited.last_lines(i), kLineBytes));
  }
  return exit;
}

AgentInfo AgentInfoFromRegistration(const pb::AgentRegistration& request) {
  AgentInfo info;
  info.machine_rank = request.machine_rank();
  info.hostname = Bounded(request.hostname(), kNameBytes);
  info.host_id = Bounded(request.host_id(), kNameBytes);
  info.advertise_addr = Bounded(request.advertise_addr(), kNameBytes);
  info.interface_name = Bounded(request.interface_name(), kNameBytes);
  info.local_world_size = request.local_world_size();
  info.local_device_count = request.local_device_count();
  info.agent_pid = request.agent_pid();
  info.checks_command = request.checks_command();
  info.spare = request.spare();
  info.health_problem = OneLine(request.health_problem());
  for (const auto& exited : request.last_generation_exits()) {
    // One generation's report; anything else in it is ignored.
    if (info.report_generation < 0)
      info.report_generation = exited.generation();
    if (exited.generation() == info.report_generation &&
        exited.local_rank() >= 0 &&
        exited.local_rank() < request.local_world_size()) {
      info.reported_exits[exited.local_rank()] = FromProto(exited);
    }
  }
  info.lease = std::chrono::milliseconds(std::max(0, request.lease_ms()));
  // A fence longer than a minute is no fence worth the name: such an agent
  // is waited for as one without (the stop grace).
  if (request.fence_ms() > 0 && request.fence_ms() <= 60000) {
    info.fence = std::chrono::milliseconds(request.fence_ms());
  }
  info.config_fingerprint.insert(request.config_fingerprint().begin(),
                                 request.config_fingerprint().end());
  return info;
}

}  // namespace trl

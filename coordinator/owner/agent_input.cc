#include "coordinator/owner/agent_input.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/terminal_text.h"
#include "common/utf8.h"

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

std::string OneLine(const std::string& text) {
  return TerminalSafe(Bounded(text, kReasonBytes));
}

std::string ProgressLine(const std::string& text) {
  // Sent as bytes: made valid UTF-8 here, or one agent could make the whole
  // status unparseable (a proto3 string must be UTF-8).
  return TerminalSafe(Bounded(ToValidUtf8(text), kProgressLineBytes));
}

WorkerExit FromProto(const pb::WorkerExited& exited) {
  WorkerExit exit;
  exit.exit_code = exited.exit_code();
  exit.signal = exited.signal();
  exit.start_error = OneLine(exited.start_error());
  exit.out_of_resources =
      exited.out_of_resources() && !exited.start_error().empty();
  exit.reason = OneLine(exited.reason());
  exit.where = OneLine(exited.where());
  exit.executable = TerminalSafe(Bounded(exited.executable(), kNameBytes));
  // Agents send at most 20 lines of about 1 KiB.
  const int first = std::max(0, exited.last_lines_size() - kLines);
  for (int i = first; i < exited.last_lines_size(); ++i) {
    exit.last_lines.push_back(Bounded(exited.last_lines(i), kLineBytes));
  }
  return exit;
}

AgentInfo AgentInfoFromRegistration(const pb::AgentRegistration& request,
                                    const std::string& run_id) {
  AgentInfo info;
  info.machine_rank = request.machine_rank();
  info.hostname = TerminalSafe(Bounded(request.hostname(), kNameBytes));
  info.host_id = TerminalSafe(Bounded(request.host_id(), kNameBytes));
  info.advertise_addr =
      TerminalSafe(Bounded(request.advertise_addr(), kNameBytes));
  info.interface_name =
      TerminalSafe(Bounded(request.interface_name(), kNameBytes));
  info.local_world_size = request.local_world_size();
  info.local_device_count = request.local_device_count();
  info.agent_pid = request.agent_pid();
  info.checks_command = request.checks_command();
  info.captures_before_stop = request.captures_before_stop();
  info.spare = request.spare();
  info.health_problem = OneLine(request.health_problem());
  // One generation's report, of this run; anything else is ignored (a new
  // agent reads what an earlier one kept on disk, which may be of an
  // earlier job on this address, or of an earlier run of a job whose id
  // TRL_JOB_ID fixed, with the same generation numbers).
  for (const auto& exited : request.last_generation_exits()) {
    if (run_id.empty() || request.report_run_id() != run_id) break;
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

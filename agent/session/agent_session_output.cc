// The agent session's progress reports (agent_session.h): every few
// seconds, each rank's newest output line that has not been reported, so
// that `ps` and the status page show where each rank is (its step, its
// loss) without anyone reading the logs. Only lines that changed are sent:
// a rank that prints nothing costs nothing.
#include <chrono>

#include "agent/console/console.h"
#include "agent/session/agent_session.h"
#include "common/utf8.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

constexpr auto kOutputReportInterval = std::chrono::seconds(2);
// What a ps row or the page can show; the coordinator bounds it again.
constexpr size_t kReportedLineBytes = 240;

}  // namespace

void AgentSession::WriteOutputLocked(
    std::chrono::steady_clock::time_point now) {
  if (now < next_output_report_) return;
  next_output_report_ = now + kOutputReportInterval;
  uint64_t newest = 0;
  const std::vector<LogRing::NewestLine> lines =
      console_->logs().NewestLinesAfter(output_reported_, &newest);
  output_reported_ = newest;
  if (lines.empty()) return;
  pb::AgentMessage message;
  pb::RankOutput* output = message.mutable_rank_output();
  for (const LogRing::NewestLine& line : lines) {
    pb::RankLastLine* last = output->add_lines();
    last->set_rank(line.rank);
    last->set_generation(line.generation);
    last->set_unix_ms(line.unix_ms);
    last->set_text(ToValidUtf8(ShownPartOfLine(line.text, kReportedLineBytes)));
  }
  WriteLocked(message);
}

}  // namespace trl

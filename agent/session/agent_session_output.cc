// The agent session's progress reports (agent_session.h): every few
// seconds, each rank's newest output line that has not been reported, so
// that `ps` and the status page show where each rank is (its step, its
// loss) without anyone reading the logs. Only lines that changed are sent:
// a rank that prints nothing costs nothing. ForwardLogs sends them with a
// log credit, which the coordinator gives back when it has read them.
#include <algorithm>
#include <chrono>

#include "agent/console/console.h"
#include "agent/session/agent_session.h"
#include "common/utf8.h"

namespace trl {

namespace pb = trl::launch::v1;
using std::chrono::milliseconds;

namespace {

// Every 2 s; a larger job less often, so that the coordinator reads about
// 1,000 reports a second at most (16,384 machines: every 16 s).
milliseconds OutputReportInterval(int num_machines) {
  return std::max<milliseconds>(milliseconds(2000),
                                milliseconds(std::max(num_machines, 0)));
}
// What a ps row or the page can show; the coordinator bounds it again.
constexpr size_t kReportedLineBytes = 240;

int64_t NowUnixMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool AgentSession::TakeOutputReport(std::chrono::steady_clock::time_point now,
                                    pb::AgentMessage* message) {
  if (now < next_output_report_) return false;
  next_output_report_ =
      now + OutputReportInterval(options_.config.num_machines);
  uint64_t newest = 0;
  const std::vector<LogRing::NewestLine> lines =
      console_->logs().NewestLinesAfter(output_reported_, &newest);
  output_reported_ = newest;
  message->Clear();
  pb::RankOutput* output = message->mutable_rank_output();
  const int64_t now_ms = NowUnixMs();
  for (const LogRing::NewestLine& line : lines) {
    std::string shown = ShownPartOfLine(line.text, kReportedLineBytes);
    if (shown.empty()) continue;  // a blank line says nothing new
    pb::RankLastLine* last = output->add_lines();
    last->set_rank(line.rank);
    last->set_generation(line.generation);
    last->set_unix_ms(line.unix_ms);
    last->set_age_ms(std::max<int64_t>(0, now_ms - line.unix_ms));
    last->set_text(ToValidUtf8(shown));
  }
  return output->lines_size() > 0;
}

}  // namespace trl

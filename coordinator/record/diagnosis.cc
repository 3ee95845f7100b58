#include "coordinator/record/diagnosis.h"

#include <ctime>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/terminal_text.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

// "00:41:08.456" (UTC): the day is in `trl-coord events`.
std::string TimeOfDay(int64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char when[16];
  std::strftime(when, sizeof(when), "%H:%M:%S", &utc);
  return absl::StrCat(when, ".", absl::Dec(unix_ms % 1000, absl::kZeroPad3));
}

// What each kind of event says in a diagnosis; kinds not listed (a
// registration, a heartbeat's return) say nothing of why a job stopped.
const char* Heading(const std::string& kind) {
  static const std::map<std::string, const char*> headings = {
      {"lost", "lost"},           {"agent_gone", "agent gone"},
      {"unhealthy", "unhealthy"}, {"cordoned", "cordoned"},
      {"spare", "spare"},         {"stalled", "stalled"},
      {"resumed", "coordinator"}, {"stop_requested", "stop asked"},
      {"stopping", "stopped"},    {"finished", "job ended"},
  };
  auto it = headings.find(kind);
  return it == headings.end() ? nullptr : it->second;
}

struct Generation {
  const pb::JobEvent* start = nullptr;
  std::vector<const pb::JobEvent*> told;
};

}  // namespace

std::string DiagnoseJob(const pb::JobEvents& events, int64_t generation) {
  std::map<int64_t, Generation> generations;  // -1: before the first
  for (const pb::JobEvent& event : events.events()) {
    Generation& g = generations[event.generation()];
    if (event.kind() == "generation") {
      g.start = &event;
    } else if (event.kind() == "stood" || Heading(event.kind())) {
      g.told.push_back(&event);
    }
  }
  std::string out;
  if (events.left_out() > 0) {
    absl::StrAppend(&out, "(the ", events.left_out(),
                    " oldest events are no longer kept)\n");
  }
  for (const auto& [number, g] : generations) {
    if (generation >= 0 && number != generation) continue;
    if (number < 0) {
      if (g.told.empty()) continue;
      absl::StrAppend(&out, "before the first generation\n");
    } else if (g.start != nullptr) {
      absl::StrAppend(&out, "generation ", number, " (",
                      TerminalSafe(g.start->text()), "), started ",
                      TimeOfDay(g.start->unix_ms()), "\n");
    } else {
      absl::StrAppend(&out, "generation ", number, "\n");
    }
    if (g.told.empty()) {
      absl::StrAppend(&out, "  nothing went wrong in it\n");
      continue;
    }
    for (const pb::JobEvent* event : g.told) {
      if (event->kind() == "stood") {
        absl::StrAppend(&out, "  where its ranks stood:\n");
        for (absl::string_view place :
             absl::StrSplit(TerminalSafe(event->text()), "; ")) {
          absl::StrAppend(&out, "    ", place, "\n");
        }
        continue;
      }
      absl::StrAppend(
          &out, "  ", Heading(event->kind()), " ", TimeOfDay(event->unix_ms()),
          ": ",
          event->machine_rank() >= 0 && event->kind() != "unhealthy"
              ? absl::StrCat("machine ", event->machine_rank(), ": ")
              : "",
          TerminalSafe(event->text()), "\n");
    }
  }
  if (out.empty()) {
    return generation >= 0
               ? absl::StrCat("no events of generation ", generation, "\n")
               : "no generation has started yet\n";
  }
  return out;
}

int64_t LastStoppedGeneration(const pb::JobEvents& events) {
  int64_t last = -1;
  for (const pb::JobEvent& event : events.events()) {
    if (event.kind() == "stopping") last = event.generation();
  }
  return last;
}

}  // namespace trl

#include "coordinator/owner/farewells.h"

#include <iterator>

namespace trl {

void Farewells::ToldAtTheEnd(AgentLink* stream, int key) {
  told_[stream] = key;
  if (key >= 0) awaiting_[key] = TimePoint::max();
}

void Farewells::AwaitUntil(int machine, TimePoint until) {
  awaiting_.emplace(machine, until);
}

bool Farewells::ToldOnReturn(AgentLink* stream, int machine) {
  // (A spare registers as kSpareCutOff, which has no old agent.)
  const int old_agent = machine >= 0 ? OldAgentOf(machine) : machine;
  for (const int key : {old_agent, machine}) {
    if (awaiting_.count(key)) {
      told_[stream] = key;
      return true;
    }
  }
  return false;
}

bool Farewells::Heard(AgentLink* stream) {
  const auto told = told_.find(stream);
  if (told == told_.end()) return false;
  awaiting_.erase(told->second);
  told_.erase(told);
  return true;
}

bool Farewells::AllHeard(TimePoint now) {
  for (auto it = awaiting_.begin(); it != awaiting_.end();) {
    it = it->second < now ? awaiting_.erase(it) : std::next(it);
  }
  return awaiting_.empty();
}

}  // namespace trl

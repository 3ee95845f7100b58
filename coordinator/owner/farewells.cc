#include "coordinator/owner/farewells.h"

#include <iterator>

namespace trl {

void Farewells::ToldAtTheEnd(AgentLink* stream, int key) {
  if (key < 0) {
    told_[stream] = {Told::kSpare, 0};
    return;
  }
  told_[stream] = {Told::kMachine, key};
  awaiting_[key] = TimePoint::max();
}

void Farewells::AwaitUntil(int machine, TimePoint until) {
  awaiting_.emplace(machine, until);
}

void Farewells::AwaitOldAgentUntil(int machine, TimePoint until) {
  old_agents_.emplace(machine, until);
}

bool Farewells::ToldOnReturn(AgentLink* stream, int machine, bool spare) {
  // A machine's agent names its machine; a spare the one it stood for, or
  // kSpareCutOff if none. Anything else is nobody awaited.
  if (machine < kSpareCutOff || (!spare && machine < 0)) return false;
  if (!spare && old_agents_.count(machine)) {
    told_[stream] = {Told::kOldAgent, machine};
    return true;
  }
  if (!awaiting_.count(machine)) return false;
  told_[stream] = {Told::kMachine, machine};
  return true;
}

bool Farewells::Heard(AgentLink* stream) {
  const auto told = told_.find(stream);
  if (told == told_.end()) return false;
  if (told->second.kind == Told::kMachine) {
    awaiting_.erase(told->second.machine);
  } else if (told->second.kind == Told::kOldAgent) {
    old_agents_.erase(told->second.machine);
  }
  told_.erase(told);
  return true;
}

bool Farewells::AllHeard(TimePoint now) {
  for (auto* waits : {&awaiting_, &old_agents_}) {
    for (auto it = waits->begin(); it != waits->end();) {
      it = it->second < now ? waits->erase(it) : std::next(it);
    }
  }
  return awaiting_.empty() && old_agents_.empty();
}

}  // namespace trl

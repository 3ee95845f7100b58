#include "coordinator/access/refused_calls.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/tsan_visible_mutex.h"

namespace trl {
namespace {

std::atomic<uint64_t> refused_in_process{0};

}  // namespace

std::optional<std::string> RefusedCalls::Refused(const std::string& peer,
                                                 const std::string& problem,
                                                 Clock::time_point now) {
  refused_in_process.fetch_add(1, std::memory_order_relaxed);
  MutexLock lock(&mutex_);
  ++total_;
  ++unreported_;
  if (last_report_ && now - *last_report_ < interval_) return std::nullopt;
  std::string line =
      unreported_ == 1
          ? absl::StrCat("refused a call from ", peer, ": ", problem)
          : absl::StrCat("refused ", unreported_, " calls in the last ",
                         interval_.count() / 1000.0, " s, the latest from ",
                         peer, ": ", problem, " (", total_, " in all)");
  unreported_ = 0;
  last_report_ = now;
  return line;
}

uint64_t RefusedCalls::total() const {
  MutexLock lock(&mutex_);
  return total_;
}

uint64_t RefusedCalls::InProcess() {
  return refused_in_process.load(std::memory_order_relaxed);
}

void RefusedCallLog::Log(const std::string& peer, const std::string& problem) {
  if (auto line = calls_.Refused(peer, problem, RefusedCalls::Clock::now())) {
    ComponentLogger("coord")->warn("{}", *line);
  }
}

}  // namespace trl

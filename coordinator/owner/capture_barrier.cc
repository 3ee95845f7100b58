#include "coordinator/owner/capture_barrier.h"

#include <utility>

namespace trl {

std::optional<CaptureBarrier::Message> CaptureBarrier::Hold(
    int64_t generation, std::set<int> machines, Message stop,
    TimePoint deadline) {
  std::optional<Message> earlier = Release();
  generation_ = generation;
  awaited_ = std::move(machines);
  stop_ = std::move(stop);
  deadline_ = deadline;
  return earlier;
}

std::optional<CaptureBarrier::Message> CaptureBarrier::Captured(
    int m, int64_t generation) {
  if (!stop_ || generation != generation_) return std::nullopt;
  awaited_.erase(m);
  return ReleaseIfNoneAwaited();
}

std::optional<CaptureBarrier::Message> CaptureBarrier::Gone(int m) {
  if (!stop_) return std::nullopt;
  awaited_.erase(m);
  return ReleaseIfNoneAwaited();
}

std::optional<CaptureBarrier::Message> CaptureBarrier::Due(TimePoint now) {
  if (!stop_ || now < deadline_) return std::nullopt;
  return Release();
}

std::optional<CaptureBarrier::Message> CaptureBarrier::Release() {
  std::optional<Message> stop = std::move(stop_);
  stop_.reset();
  awaited_.clear();
  return stop;
}

std::optional<TimePoint> CaptureBarrier::deadline() const {
  if (!stop_) return std::nullopt;
  return deadline_;
}

std::optional<CaptureBarrier::Message> CaptureBarrier::ReleaseIfNoneAwaited() {
  if (!awaited_.empty()) return std::nullopt;
  return Release();
}

}  // namespace trl

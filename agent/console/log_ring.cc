#include "agent/console/log_ring.h"

#include <algorithm>

namespace trl {

namespace pb = trl::launch::v1;

namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What an entry costs beyond its text, roughly (for the bounds).
constexpr size_t kEntryOverhead = 64;

}  // namespace

std::string ShownPartOfLine(std::string_view line, size_t max_bytes) {
  // The newest segment after a carriage return that is not empty ("loss
  // 0.5\r\n" shows "loss 0.5").
  while (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const size_t carriage_return = line.find_last_of('\r');
  if (carriage_return != std::string_view::npos) {
    line.remove_prefix(carriage_return + 1);
  }
  // Without terminal escapes (colours, cursor moves): ESC [ ... final byte,
  // and ESC ] ... BEL or ESC \ (a title); another ESC goes with its next
  // byte.
  std::string plain;
  plain.reserve(line.size());
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\x1b') {
      plain.push_back(line[i]);
      continue;
    }
    if (i + 1 < line.size() && line[i + 1] == '[') {
      i += 2;
      while (i < line.size() && !(line[i] >= 0x40 && line[i] <= 0x7e)) {
        ++i;
      }
    } else if (i + 1 < line.size() && line[i + 1] == ']') {
      i += 2;
      while (
          i < line.size() && line[i] != '\a' &&
          !(line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '\\')) {
        ++i;
      }
      if (i < line.size() && line[i] == '\x1b') ++i;
    } else {
      ++i;
    }
  }
  line = plain;
  if (line.size() > max_bytes) {
    size_t end = max_bytes;
    // Not inside a UTF-8 sequence: back to a byte that starts a character.
    while (end > 0 && (static_cast<unsigned char>(line[end]) & 0xC0) == 0x80) {
      --end;
    }
    line = line.substr(0, end);
  }
  return std::string(line);
}

void LogRing::Append(int rank, bool is_stderr, std::string_view line,
                     int64_t generation) {
  const int64_t now = NowUnixMs();
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry entry;
    entry.unix_ms = now;
    entry.seq = next_seq_++;
    entry.rank = rank;
    entry.generation = generation;
    entry.is_stderr = is_stderr;
    entry.text.assign(line.data(), line.size());
    const size_t cost = entry.text.size() + kEntryOverhead;
    for (auto& [id, subscription] : subscriptions_) {
      if (!subscription.follow) continue;
      if (!subscription.ranks.empty() && subscription.ranks.count(rank) == 0) {
        continue;
      }
      if (subscription.queue_bytes + cost > limits_.queue_bytes) {
        // The reader is behind: drop the line for this subscription, and
        // say so where it would have been.
        if (!subscription.queue.empty() &&
            subscription.queue.back().dropped > 0) {
          ++subscription.queue.back().dropped;
        } else {
          Entry marker;
          marker.unix_ms = now;
          marker.seq = entry.seq;
          marker.dropped = 1;
          subscription.queue.push_back(std::move(marker));
          subscription.queue_bytes += kEntryOverhead;
        }
        continue;
      }
      subscription.queue.push_back(entry);
      subscription.queue_bytes += cost;
      wake = true;
    }
    Ring& ring = rings_[rank];
    ring.bytes += cost;
    ring.lines.push_back(std::move(entry));
    while (!ring.lines.empty() && (ring.lines.size() > limits_.ring_lines ||
                                   ring.bytes > limits_.ring_bytes)) {
      ring.bytes -= ring.lines.front().text.size() + kEntryOverhead;
      ring.lines.pop_front();
    }
  }
  if (wake) work_.notify_one();
}

std::vector<LogRing::NewestLine> LogRing::NewestLinesAfter(
    uint64_t after, uint64_t* newest) const {
  std::vector<NewestLine> lines;
  std::lock_guard<std::mutex> lock(mutex_);
  *newest = next_seq_;  // every line so far has a lower number
  for (const auto& [rank, ring] : rings_) {
    if (ring.lines.empty()) continue;
    const Entry& entry = ring.lines.back();
    if (entry.seq + 1 <= after) continue;  // sent already
    NewestLine line;
    line.rank = rank;
    line.generation = entry.generation;
    line.unix_ms = entry.unix_ms;
    line.text = entry.text;
    lines.push_back(std::move(line));
  }
  return lines;
}

void LogRing::Subscribe(uint64_t id, const std::set<int>& ranks, bool follow,
                        int64_t history_after_unix_ms) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Subscription subscription;
    subscription.ranks = ranks;
    subscription.follow = follow;
    for (const auto& [rank, ring] : rings_) {
      if (!ranks.empty() && ranks.count(rank) == 0) continue;
      for (const Entry& entry : ring.lines) {
        if (entry.unix_ms > history_after_unix_ms) {
          subscription.history.push_back(entry);
        }
      }
    }
    std::sort(subscription.history.begin(), subscription.history.end(),
              [](const Entry& a, const Entry& b) { return a.seq < b.seq; });
    subscriptions_[id] = std::move(subscription);
  }
  work_.notify_one();
}

void LogRing::Unsubscribe(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  subscriptions_.erase(id);
}

void LogRing::UnsubscribeAll(const std::set<uint64_t>& ids) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (uint64_t id : ids) subscriptions_.erase(id);
}

bool LogRing::Follows(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = subscriptions_.find(id);
  return it != subscriptions_.end() && it->second.follow;
}

bool LogRing::HasWork(const Subscription& subscription) {
  return !subscription.history.empty() || !subscription.history_done_sent ||
         !subscription.queue.empty();
}

void LogRing::StopTakers() {
  std::lock_guard<std::mutex> lock(mutex_);
  takers_stopped_ = true;
  work_.notify_all();
}

void LogRing::ResumeTakers() {
  std::lock_guard<std::mutex> lock(mutex_);
  takers_stopped_ = false;
}

bool LogRing::TakeBatch(pb::LogBatch* batch, size_t max_bytes,
                        std::chrono::milliseconds wait) {
  batch->Clear();
  std::unique_lock<std::mutex> lock(mutex_);
  auto has_work = [this] {
    for (const auto& [id, subscription] : subscriptions_) {
      if (HasWork(subscription)) return true;
    }
    return false;
  };
  auto woken = [&] { return takers_stopped_ || has_work(); };
  if (!work_.wait_for(lock, wait, woken) || takers_stopped_) return false;
  // The subscription with the oldest waiting line goes first: no
  // subscription starves another.
  auto chosen = subscriptions_.end();
  uint64_t oldest = UINT64_MAX;
  for (auto it = subscriptions_.begin(); it != subscriptions_.end(); ++it) {
    const Subscription& s = it->second;
    if (!HasWork(s)) continue;
    uint64_t seq = UINT64_MAX - 1;
    if (!s.history.empty()) {
      seq = s.history.front().seq;
    } else if (!s.queue.empty()) {
      seq = s.queue.front().seq;
    }
    if (seq < oldest || chosen == subscriptions_.end()) {
      oldest = seq;
      chosen = it;
    }
  }
  Subscription& s = chosen->second;
  batch->set_subscription(chosen->first);
  size_t bytes = 0;
  auto add = [&](const Entry& entry) {
    pb::LogLine* line = batch->add_lines();
    line->set_unix_ms(entry.unix_ms);
    line->set_rank(entry.rank);
    line->set_generation(entry.generation);
    line->set_is_stderr(entry.is_stderr);
    if (entry.dropped > 0) {
      line->set_dropped(entry.dropped);
    } else {
      line->set_text(entry.text);
    }
    bytes += entry.text.size() + 16;
  };
  while (!s.history.empty() && bytes < max_bytes) {
    add(s.history.front());
    s.history.pop_front();
  }
  if (s.history.empty() && !s.history_done_sent) {
    s.history_done_sent = true;
    batch->set_history_done(true);
    if (!s.follow) {
      subscriptions_.erase(chosen);
      return true;
    }
  }
  while (!s.queue.empty() && bytes < max_bytes) {
    const Entry& entry = s.queue.front();
    s.queue_bytes -= entry.text.size() + kEntryOverhead;
    add(entry);
    s.queue.pop_front();
  }
  return true;
}

size_t LogRing::HeldBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t total = 0;
  for (const auto& [rank, ring] : rings_) total += ring.bytes;
  for (const auto& [id, s] : subscriptions_) {
    total += s.queue_bytes;
    for (const auto& entry : s.history) {
      total += entry.text.size() + kEntryOverhead;
    }
  }
  return total;
}

}  // namespace trl

// Worker output kept for `trl-coord logs`: per rank, a bounded ring of the
// last lines (the retained lines), and per subscription of the coordinator,
// a bounded queue of new lines waiting for the agent's stream.
//
// The workers' pumps (agent/workers/worker_output.cc) call Append for every
// line and it never waits for the network: when a subscription's queue is full,
// the line is dropped for that subscription only, counted, and a marker ("N
// lines dropped") takes its place in the queue. So a worker printing at
// 100 MB/s is read at full speed whoever reads its logs, and the agent's
// memory stays bounded: kRingLines / kRingBytes per rank, kQueueBytes per
// subscription (and its history: at most the rings' contents, copied once).
#ifndef TRL_AGENT_CONSOLE_LOG_RING_H_
#define TRL_AGENT_CONSOLE_LOG_RING_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "proto/trl_launch.pb.h"

namespace trl {

// What a terminal shows of a worker's line (the newest non-empty part
// after a carriage return: a progress bar's newest state), without terminal
// escape sequences, at most `max_bytes`, cut at a character's start.
std::string ShownPartOfLine(std::string_view line, size_t max_bytes);

class LogRing {
 public:
  struct Limits {
    size_t ring_lines = 1000;      // per rank
    size_t ring_bytes = 1 << 20;   // per rank
    size_t queue_bytes = 4 << 20;  // per subscription, new lines
  };
  LogRing() : LogRing(Limits{}) {}
  explicit LogRing(Limits limits) : limits_(limits) {}

  // Thread-safe; takes one short lock, never waits for a reader.
  // `generation`: the printing worker's (-1: not known).
  void Append(int rank, bool is_stderr, std::string_view line,
              int64_t generation = -1);

  // Starts subscription `id` (replacing one of that id): the retained lines
  // of `ranks` (every rank when empty) read after `history_after_unix_ms`
  // (0: all), oldest first, then with `follow` every new line of them.
  void Subscribe(uint64_t id, const std::set<int>& ranks, bool follow,
                 int64_t history_after_unix_ms = 0);
  void Unsubscribe(uint64_t id);
  void UnsubscribeAll(const std::set<uint64_t>& ids);
  // Whether subscription `id` is open and follows new lines.
  bool Follows(uint64_t id) const;

  // Waits up to `wait` for lines of any subscription, then fills `batch`
  // with those of one subscription, at most about `max_bytes` of text.
  // False if there was nothing to send. A batch that sends a
  // subscription's last retained line has history_done set; a
  // subscription without follow ends with it.
  bool TakeBatch(trl::launch::v1::LogBatch* batch, size_t max_bytes,
                 std::chrono::milliseconds wait);
  // Ends every TakeBatch waiting now, and makes each later one return at
  // once (false), until Resume: a session that ends does not wait out
  // its forwarder's wait.
  void StopTakers();
  void ResumeTakers();

  // Each rank's newest line appended after line number `after` (0: any),
  // and in `*newest` the number to pass next time: what a progress report
  // has not sent yet.
  struct NewestLine {
    int rank = -1;
    int64_t generation = -1;
    int64_t unix_ms = 0;
    std::string text;
  };
  std::vector<NewestLine> NewestLinesAfter(uint64_t after,
                                           uint64_t* newest) const;

  // Lines held now (rings and queues), for tests.
  size_t HeldBytes() const;

 private:
  struct Entry {
    int64_t unix_ms = 0;
    uint64_t seq = 0;
    int rank = -1;
    int64_t generation = -1;
    bool is_stderr = false;
    std::string text;
    uint64_t dropped = 0;  // a marker
  };
  struct Ring {
    std::deque<Entry> lines;
    size_t bytes = 0;
  };
  struct Subscription {
    std::set<int> ranks;
    bool follow = false;
    std::deque<Entry> history;  // sent first
    bool history_done_sent = false;
    std::deque<Entry> queue;  // new lines, bounded by queue_bytes
    size_t queue_bytes = 0;
  };
  static bool HasWork(const Subscription& subscription);

  const Limits limits_;
  mutable std::mutex mutex_;
  std::condition_variable work_;
  bool takers_stopped_ = false;
  uint64_t next_seq_ = 0;
  std::map<int, Ring> rings_;
  std::map<uint64_t, Subscription> subscriptions_;
};

}  // namespace trl

#endif  // TRL_AGENT_CONSOLE_LOG_RING_H_

// libFuzzer target for the workers' rendezvous store: the requests of its
// RPCs (Set, Get/wait, Add) as the network would send them, with tokens
// right or wrong, scopes current or stale, cancels, clock jumps and new
// generations, fed to the coordinator's RendezvousStore. Checks: no crash,
// the waiter bound holds, and every wait completes at most once.
//
// Input: records of [op][length: 2 bytes LE][payload]; the payload is the
// op's protobuf request.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>

#include "coordinator/rendezvous/store.h"
#include "proto/trl_launch.pb.h"

namespace pb = trl::launch::v1;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Keys that are not UTF-8 are refused by the parser, with a log line
  // each: expected here, and noise.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  trl::StoreLimits limits;
  limits.max_total_bytes = 64 << 10;
  limits.max_waiters = 64;
  limits.max_keys_per_wait = 16;
  trl::RendezvousStore store(limits);
  int64_t generation = 0;
  std::string token = "token-0";
  store.OpenGeneration("job", generation, token);
  trl::TimePoint now{};
  std::set<uint64_t> issued, completed;

  // The caller a request claims to be; bit 0x40 of the op makes it the
  // current generation's, bit 0x80 gives it a wrong token.
  auto caller = [&](uint8_t op, const pb::StoreNamespace& scope) {
    trl::StoreCaller c{scope.job_id(), scope.generation(), token};
    if (op & 0x40) c = trl::StoreCaller{"job", generation, token};
    if (op & 0x80) c.token = "wrong";
    return c;
  };

  size_t at = 0;
  while (at + 3 <= size) {
    const uint8_t op = data[at];
    const size_t length = (data[at + 1] | (data[at + 2] << 8)) & 0xfff;
    at += 3;
    if (at + length > size) break;
    const uint8_t* payload = data + at;
    at += length;
    switch (op % 6) {
      case 0: {
        pb::StoreSetRequest request;
        if (!request.ParseFromArray(payload, static_cast<int>(length))) break;
        store.Set(caller(op, request.scope()), request.key(), request.value())
            .IgnoreError();
        break;
      }
      case 1: {
        pb::StoreGetRequest request;
        if (!request.ParseFromArray(payload, static_cast<int>(length))) break;
        auto id = store.Wait(
            caller(op, request.scope()),
            std::vector<std::string>(request.keys().begin(),
                                     request.keys().end()),
            request.want_values(),
            now + std::chrono::milliseconds(request.timeout_ms() % 100000));
        if (id.ok() && !issued.insert(*id).second) abort();  // ids are unique
        break;
      }
      case 2: {
        pb::StoreAddRequest request;
        if (!request.ParseFromArray(payload, static_cast<int>(length))) break;
        store.Add(caller(op, request.scope()), request.key(), request.delta())
            .IgnoreError();
        break;
      }
      case 3:
        if (length > 0 && !issued.empty()) {
          store.Cancel(*std::next(issued.begin(), payload[0] % issued.size()));
        }
        break;
      case 4:
        now += std::chrono::seconds(length > 0 ? payload[0] : 1);
        store.Expire(now);
        break;
      case 5:
        ++generation;
        token = "token-" + std::to_string(generation);
        store.OpenGeneration("job", generation, token);
        break;
    }
    for (const auto& done : store.TakeCompletions()) {
      if (issued.count(done.id) == 0) abort();         // never issued
      if (!completed.insert(done.id).second) abort();  // completed twice
    }
    if (store.waiter_count() > limits.max_waiters) abort();
  }
  return 0;
}

#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (AddressSanitizer on) into
# build-fuzz/ and runs each for a bounded time over its committed corpus.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DTRL_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target config_fuzzer agent_message_fuzzer store_fuzzer \
  heartbeat_datagram_fuzzer
for target in config agent_message store heartbeat_datagram; do
  echo "== fuzzing $target for ${seconds}s"
  work=$(mktemp -d)
  # New inputs go to a scratch directory; the committed corpus is read only.
  build-fuzz/tests/fuzz/${target}_fuzzer -max_total_time="$seconds" \
    -max_len=4096 -print_final_stats=1 "$work" "tests/fuzz/corpus/$target" 2>&1 |
    grep -E "^(#[0-9]+.*DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)" || true
  status=${PIPESTATUS[0]}
  rm -rf "$work"
  [ "$status" = 0 ] || { echo "fuzzer $target failed ($status)"; exit 1; }
done
echo "fuzzing: no crash"

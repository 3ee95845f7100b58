#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (AddressSanitizer on) into
# build-fuzz/ and runs each for a bounded time over its committed corpus.
# Any failure of a fuzzer (a crash, a leak, a timeout, a non-zero exit)
# fails this script, with a line "FAIL: fuzzer TARGET ..." and the crash's
# input kept under the build directory.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 20)
# Environment:
#   FUZZ_TARGETS      the targets to run (default: all four)
#   FUZZ_BUILD_DIR    the build directory (default build-fuzz)
#   FUZZ_CMAKE_ARGS   extra cmake arguments, e.g. -DTRL_FUZZ_SELFTEST_CRASH=ON
#                     (config_fuzzer aborts on every input: the proof that a
#                     crash fails this script; scripts/mutants.sh uses it)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
build=${FUZZ_BUILD_DIR:-build-fuzz}
read -r -a targets <<<"${FUZZ_TARGETS:-config agent_message store heartbeat_datagram}"
read -r -a cmake_args <<<"${FUZZ_CMAKE_ARGS:-}"
CC=clang CXX=clang++ cmake -S . -B "$build" -DTRL_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRL_FUZZ_SELFTEST_CRASH=OFF "${cmake_args[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]/%/_fuzzer}"
crashes="$build/crashes"
mkdir -p "$crashes"
for target in "${targets[@]}"; do
  echo "== fuzzing $target for ${seconds}s"
  work=$(mktemp -d)
  log="$work/log"
  mkdir -p "$work/new"
  # New inputs go to a scratch directory; the committed corpus is read only.
  # A hang of the whole run (not caught by libFuzzer's own -timeout per
  # input) is cut off by timeout(1), and fails too.
  status=0
  timeout --kill-after=10 $((seconds + 120)) \
    "$build/tests/fuzz/${target}_fuzzer" -max_total_time="$seconds" \
    -timeout=25 -max_len=4096 -print_final_stats=1 \
    -artifact_prefix="$crashes/${target}-" \
    "$work/new" "tests/fuzz/corpus/$target" >"$log" 2>&1 || status=$?
  grep -E "^(#[0-9]+.*DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)" "$log" || true
  if [ "$status" != 0 ]; then
    echo "--- last lines of the $target fuzzer's output"
    tail -25 "$log"
    echo "FAIL: fuzzer $target exited with status $status (crash, leak or timeout); inputs kept in $crashes"
    rm -rf "$work"
    exit 1
  fi
  rm -rf "$work"
done
echo "fuzzing: no crash in ${targets[*]}"

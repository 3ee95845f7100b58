#!/usr/bin/env bash
# Sets up (scripts/setup.sh), checks formatting, and runs every test:
# unit, integration (real processes on loopback) and multi-host (network
# namespaces, real PyTorch), then the fuzzers. Every stage runs; any failure
# in any of them makes the exit status non-zero. The last line is
#   tests: N passed, N failed, N skipped
# A skip is never a pass: each skipped test is named with its reason. Under
# CI=true (root, test hosts and Slurm available) any skip but the GPU test's
# on a machine without a GPU fails the run.
# TRL_SANITIZERS=1 (the default under CI=true) also runs
# scripts/sanitizers.sh all: the unit and integration tests built with
# ThreadSanitizer, then with AddressSanitizer + UBSan; any report fails it.
# TRL_MUTANTS=1 (the default under CI=true) also runs scripts/mutants.sh
# --quick (deliberate breakages that the tests must catch). TRL_CTEST_ARGS: extra arguments for ctest
# (e.g. "-R deploy"); TRL_FUZZ_SECONDS (default 20): seconds per target.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# ccache keys on paths relative to the checkout: the mutants' copy of the
# tree (build-mutants/tree, built the same way) reuses the main build.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# Each stage's seconds, printed with the verdict (CI must stay under 50
# minutes on a fresh machine: this says where the time goes).
stage_times=() stage_name="" stage_start=$SECONDS
stage() {
  [ -n "$stage_name" ] && stage_times+=("${stage_name%%[ :]*} $((SECONDS - stage_start)) s")
  stage_name=$1 stage_start=$SECONDS
  [ -z "$1" ] || echo "== $1 (at $SECONDS s)"
}
stage setup
./scripts/setup.sh --tests || { echo "FAIL: scripts/setup.sh --tests"; exit 1; }

failed_stages=()

stage clang-format
files=$(git ls-files '*.cc' '*.h' 2>/dev/null || find . -name '*.cc' -o -name '*.h')
# shellcheck disable=SC2086
if clang-format --dry-run -Werror $files; then
  echo "formatting ok"
else
  echo "FAIL: clang-format"; failed_stages+=(format)
fi

# Hermetic: each ctest gets its own fresh HOME, TMPDIR and TEST_TMPDIR
# under $TRL_TEST_SCRATCH (tests/hermetic.cmake); the real ~/.trl/token
# must be as it was (created, changed or removed: a failure).
scratch=$(mktemp -d /tmp/trl-test-run.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/ctest"
export TRL_TEST_SCRATCH="$scratch/ctest"
real_token="$HOME/.trl/token"
token_state() { stat -c '%i %Y %s' "$real_token" 2>/dev/null || echo absent; }
token_before=$(token_state)

stage tests
junit="$scratch/ctest.xml"
# A failed test's output over ctest's limit loses its start, not its end
# (the verdict shows each failure's last lines).
(cd build && ctest --output-on-failure -j2 --timeout 300 --output-junit "$junit" \
  --test-output-truncation head \
  ${TRL_CTEST_ARGS:-})
ctest_rc=$?
ci_flag=()
[ "${CI:-}" = true ] && ci_flag=(--ci)
summary=$(python3 scripts/ctest_summary.py "${ci_flag[@]}" "$junit")
summary_rc=$?
echo "$summary"
if [ $ctest_rc != 0 ] || [ $summary_rc != 0 ]; then
  echo "FAIL: ctest (exit $ctest_rc, summary exit $summary_rc)"; failed_stages+=(ctest)
fi

if [ "$(token_state)" != "$token_before" ]; then
  echo "FAIL: the tests touched the real $real_token ($token_before -> $(token_state))"
  failed_stages+=(hermetic)
fi

stage "fuzzing (bounded)"
if ! ./scripts/fuzz.sh "${TRL_FUZZ_SECONDS:-20}"; then
  failed_stages+=(fuzz)
fi

if [ "${TRL_SANITIZERS:-$([ "${CI:-}" = true ] && echo 1 || echo 0)}" = 1 ]; then
  stage "sanitizers: unit and integration tests under TSan, and under ASan + UBSan"
  ./scripts/sanitizers.sh all || failed_stages+=(sanitizers)
fi

if [ "${TRL_MUTANTS:-$([ "${CI:-}" = true ] && echo 1 || echo 0)}" = 1 ]; then
  stage "mutants (quick): every deliberate breakage must be caught"
  bash ./scripts/mutants.sh --quick || failed_stages+=(mutants)
fi

stage ""
# The verdict, last: CI keeps only the end of this output, so the failed
# tests are named again here.
echo "stage times:$(printf ' %s;' "${stage_times[@]}") total $SECONDS s"
[ ${#failed_stages[@]} = 0 ] || echo "FAILED stages: ${failed_stages[*]}"
if echo "$summary" | grep -qE '^FAIL: '; then
  python3 scripts/ctest_summary.py --tails "$junit"
  echo "$summary" | grep -E '^FAIL: '
fi
line=$(echo "$summary" | grep -E '^tests: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' | tail -1)
echo "${line:-tests: 0 passed, 0 failed, 0 skipped}"
[ -n "$line" ] || exit 1
[ ${#failed_stages[@]} = 0 ]

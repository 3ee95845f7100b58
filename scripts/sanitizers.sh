#!/usr/bin/env bash
# Builds trl-launch with sanitizers and runs the unit and loopback
# integration tests under them:
#   thread             ThreadSanitizer, in build-tsan/
#   address,undefined  AddressSanitizer (with LeakSanitizer) and UBSan, in
#                      build-asan/
# Everything the tests run is instrumented: the test binaries and the real
# trl-coord, trl-agent, trl-agent-sim and workers they start. A report in
# any of those processes fails the run: every sanitizer writes its reports
# to BUILD/sanitizer-reports/ (log_path) instead of stderr, where a child
# daemon's report could go unseen; any file there fails this script, and is
# printed. Suppressions (tests/sanitizers/) are for the uninstrumented
# system libraries only, each explained there.
# Prints one line per sanitizer, e.g.
#   sanitizer thread: 312 tests passed, 0 reports
# and exits non-zero if any test failed or any report was written.
# Usage: scripts/sanitizers.sh [thread|address|all]   (default all)
# CI (scripts/test.sh) runs both. Under "thread", the system's gRPC is not
# instrumented: its header code is left uninstrumented too
# (tests/sanitizers/tsan_ignorelist.txt), and our reactors tell TSan of
# gRPC's hand-off from an operation's start to its completion
# (common/grpc_handoff.h); tests/sanitizers/tsan.supp says what is left.
# Environment: TRL_SANITIZER_CTEST_ARGS, extra ctest arguments (e.g.
# "-R Launcher"); CI=true counts a skipped test as a failure, as test.sh.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD
supp=$root/tests/sanitizers

case ${1:-all} in
  thread) kinds=(thread) ;;
  address) kinds=(address) ;;
  all) kinds=(thread address) ;;
  *) echo "usage: scripts/sanitizers.sh [thread|address|all]" >&2; exit 2 ;;
esac

# Not run sanitized (ctest labels): multihost and nemesis need root and
# network namespaces and take minutes even unsanitized; bench measures
# speed, which a sanitizer changes by 2-15x; gpu needs a GPU; deploy checks
# text files (systemd units, manifests) and runs no C++ of ours.
excluded_labels="multihost|bench|gpu|nemesis|deploy"
# The test binaries; the integration tests depend on the daemons and
# workers they start, so those are built too. Nothing else (benchmark
# clients) is.
targets=(trl_unit_tests trl_integration_tests)

ci_flag=()
[ "${CI:-}" = true ] && ci_flag=(--ci)
read -r -a extra_ctest_args <<<"${TRL_SANITIZER_CTEST_ARGS:-}"

verdicts=()
failed=0

# run_one NAME BUILD_DIR FLAGS: configure, build, test; appends the verdict.
run_one() {
  local name=$1 build=$2 flags=$3 exclude=$4
  local reports=$root/$build/sanitizer-reports
  echo "== sanitizer $name: building $build (-fsanitize=$flags)"
  # clang, as the fuzzers: g++'s TSan build breaks protobuf's map layout
  # against Debian's libprotobuf (CMakeLists.txt says how).
  if ! CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DTRL_SANITIZE="$flags" >"$build.cmake.log" 2>&1; then
    cat "$build.cmake.log"
    verdicts+=("sanitizer $name: FAIL (cmake; see above)"); failed=1; return
  fi
  rm -f "$build.cmake.log"
  if ! cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"; then
    verdicts+=("sanitizer $name: FAIL (build)"); failed=1; return
  fi

  rm -rf "$reports"
  mkdir -p "$reports"
  # Tests run some daemons as a second user (setpriv): they write here too.
  chmod 1777 "$reports"
  local scratch
  scratch=$(mktemp -d /tmp/trl-sanitizers.XXXXXX)
  mkdir -p "$scratch/ctest"
  # The exit status of a process with a report is 66, and the first report
  # ends it; reports go to files under $reports (report.PID; the path must
  # hold no ':' or ','). Only the options of the tools in this build are
  # set: a TSan or ASan runtime also reads UBSAN_OPTIONS, whose common
  # options (suppressions, log_path) would replace its own.
  local common="exitcode=66:halt_on_error=1:log_path=$reports/report"
  local ctest_rc
  (
    export TRL_TEST_SCRATCH=$scratch/ctest
    unset TSAN_OPTIONS ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS
    case $name in
      thread)
        # ignore_noninstrumented_modules: see tests/sanitizers/tsan.supp.
        export TSAN_OPTIONS="$common:suppressions=$supp/tsan.supp:ignore_noninstrumented_modules=1:second_deadlock_stack=1" ;;
      *)
        # LSan reads its own suppressions from LSAN_OPTIONS; UBSan's
        # findings are fatal at compile time (-fno-sanitize-recover=all).
        export ASAN_OPTIONS="$common:detect_leaks=1:check_initialization_order=1"
        # print_suppressions=0: a leak the file suppresses (OpenSSL's, at
        # exit) is no report; without it LSan writes the suppression
        # counts to log_path, a file, which fails the run.
        export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
        export UBSAN_OPTIONS="$common:print_stacktrace=1" ;;
    esac
    cd "$build" && ctest --output-on-failure -j2 --timeout 300 \
      -LE "$excluded_labels" -E "$exclude" --output-junit "$scratch/ctest.xml" \
      "${extra_ctest_args[@]}"
  )
  ctest_rc=$?
  local summary summary_rc
  summary=$(python3 scripts/ctest_summary.py "${ci_flag[@]}" "$scratch/ctest.xml")
  summary_rc=$?
  echo "$summary"
  rm -rf "$scratch"

  local report_files=()
  mapfile -t report_files < <(find "$reports" -type f | sort)
  # The first three in full, then a count of each kind (a broken lock can
  # make hundreds); all are kept in $reports.
  for f in "${report_files[@]:0:3}"; do
    echo "--- sanitizer report $f"
    cat "$f"
  done
  if [ ${#report_files[@]} -gt 0 ]; then
    echo "--- $name: ${#report_files[@]} report files; by summary line:"
    cat "${report_files[@]}" | grep -h '^SUMMARY' | sort | uniq -c | sort -rn | head -20
  fi
  local line passed
  line=$(echo "$summary" | grep -E '^tests: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' | tail -1)
  passed=$(echo "$line" | sed -E 's/^tests: ([0-9]+) passed.*/\1/')
  if [ $ctest_rc = 0 ] && [ $summary_rc = 0 ] && [ ${#report_files[@]} = 0 ] \
      && [ -n "$line" ] && [ "$passed" -gt 0 ]; then
    verdicts+=("sanitizer $name: $passed tests passed, 0 reports")
  else
    verdicts+=("sanitizer $name: FAIL: ${line:-no test results} (ctest exit $ctest_rc), ${#report_files[@]} reports${report_files[*]:+ in $reports}")
    failed=1
  fi
}

# Tests left out under one sanitizer (ctest -E; "^$" leaves out none):
# - address and thread: LauncherTest.HostileBytesDoNotStopTheCoordinator
#   asserts that the coordinator's resident memory grows by < 16 MiB; ASan's
#   quarantine keeps freed blocks resident on purpose (seen: +14.5 MiB over
#   the limit), and TSan's shadow memory grows with every byte touched
#   (seen: +37 MiB). The fuzzers (scripts/fuzz.sh) put the same hostile
#   input through the coordinator's handlers under ASan; the unsanitized
#   run checks the memory.
for kind in "${kinds[@]}"; do
  case $kind in
    thread) run_one thread build-tsan thread \
      '^LauncherTest\.HostileBytesDoNotStopTheCoordinator$' ;;
    address) run_one address,undefined build-asan address,undefined \
      '^LauncherTest\.HostileBytesDoNotStopTheCoordinator$' ;;
  esac
done

echo "== sanitizers"
printf '%s\n' "${verdicts[@]}"
exit $failed

#!/usr/bin/env bash
# The status page of a two-host job, seen from a third host through
# `trl-coord ui`: node01 runs the coordinator (ranks 0-1, no status page of
# its own), node02 an agent (ranks 2-3), and node03 runs `trl-coord ui`,
# which reaches the coordinator with the token's identity (as `ps`) and
# serves the page on node03's loopback. Headless Chromium on node03 loads
# it once (tests/integration/status/browser_check.py): machines (node02's
# address among them), ranks and generation 0 are shown; a worker is
# killed and the page shows generation 1 and the failure without a reload.
# Then the ui ends on SIGTERM with exit 0.
#
# Usage: ui_across_hosts.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
source "$here/../lib/testhosts.sh"
source "$here/../lib/generations.sh"
testhosts_skip_unless_possible
if [ ! -x /usr/bin/chromium ]; then
  skip_or_fail "Chromium is not installed (scripts/setup.sh --tests)"
fi

work=$(mktemp -d)
cleanup() { testhosts_destroy; rm -rf "$work"; }
trap cleanup EXIT
testhosts_create "ui$(( $$ % 10000 ))x" 3

address="${TESTHOST_ADDR[1]}:29400"
flags=(--num_machines 2 --num_processes 4 --main_process_ip "${TESTHOST_ADDR[1]}"
       --main_process_port 29400 --use_cpu)
testhosts_exec 2 "$build/agent/trl-agent" --machine_rank 1 "${flags[@]}" \
  >"$work/agent.out" 2>"$work/agent.err" &
agent=$!
testhosts_exec 1 "$build/coordinator/trl-coord" start "${flags[@]}" --no_status \
  --max_restarts 1 --restart_backoff 0.1 --state_file "$work/state" \
  /bin/sh -c "echo '<img src=x onerror=alert(1)>'; exec sleep 120" \
  >"$work/coord.out" 2>"$work/coord.err" &
coord=$!

fail=0
url_shown() { grep -q '^http://127\.0\.0\.1:[0-9]*/$' "$work/ui.out"; }
running() {
  testhosts_exec 3 "$build/coordinator/trl-coord" ps --address "$address" --json \
    2>/dev/null | python3 -c 'import json, sys
s = json.load(sys.stdin)
sys.exit(0 if [r["state"] for r in s["ranks"]] == ["running"] * 4 else 1)'
}
if ! wait_for 30 running; then
  echo "FAIL: the job did not start"; cat "$work"/*.out "$work"/*.err; exit 1
fi
# After `trl-coord start` made the token (~/.trl/token, shared by the hosts
# here as a home directory is across a cluster's nodes).
testhosts_exec 3 "$build/coordinator/trl-coord" ui --address "$address" \
  >"$work/ui.out" 2>"$work/ui.err" &
ui=$!
if ! wait_for 30 url_shown; then
  echo "FAIL: the ui did not start"
  cat "$work"/*.out "$work"/*.err; exit 1
fi
ui_port=$(head -1 "$work/ui.out" | sed 's|^http://127\.0\.0\.1:\([0-9]*\)/$|\1|')
mkdir "$work/browser"
testhosts_exec 3 timeout 180 /usr/bin/python3 \
  "$here/../integration/status/browser_check.py" /usr/bin/chromium "$ui_port" \
  "$work/browser" "${TESTHOST_ADDR[2]}" >"$work/browser.out" 2>&1
browser_rc=$?
cat "$work/browser.out"
[ $browser_rc = 0 ] || { echo "FAIL: the page through trl-coord ui (exit $browser_rc)"; fail=1; }

# The daemons' own pids ($! is the wrapper that entered the host).
host_pid() {  # host_pid HOST PATTERN
  for pid in $(testhosts_pids "$1"); do
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2"; then echo "$pid"; return; fi
  done
}
kill -TERM "$(host_pid 1 'trl-coord start')"; wait "$coord"
wait "$agent"
kill -TERM "$(host_pid 3 'trl-coord ui')"; wait "$ui"; ui_rc=$?
[ $ui_rc = 0 ] || { echo "FAIL: trl-coord ui ended with $ui_rc on SIGTERM, not 0"; fail=1; }
for i in 1 2 3; do
  left=$(testhosts_pids $i)
  [ -z "$left" ] || { echo "FAIL: processes left on ${TESTHOST_NAME[$i]}: $left"; fail=1; }
done
if [ $fail != 0 ]; then
  for f in ui.out ui.err coord.err agent.err; do echo "== $f"; tail -5 "$work/$f"; done
fi
[ $fail = 0 ] && echo "PASS: the page of a two-host job through trl-coord ui on a third host"
exit $fail

#!/usr/bin/env bash
# `trl-coord logs` from a host that runs neither daemon: node01 runs the
# coordinator (ranks 0-1), node02 an agent (ranks 2-3), and node03 asks
# for rank 3's output as it is printed (-f) and for rank 2's retained
# lines. Each client must show its rank's lines in order, every one, with
# its prefix and a timestamp, and exit 0 (-f when the job ends).
#
# Usage: logs_across_hosts.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
source "$here/../lib/testhosts.sh"
source "$here/../lib/generations.sh"
testhosts_skip_unless_possible

work=$(mktemp -d)
cleanup() { testhosts_destroy; rm -rf "$work"; }
trap cleanup EXIT
testhosts_create "lg$(( $$ % 10000 ))x" 3

# Every rank prints a line every 100 ms for 6 s, then exits 0.
cat >"$work/worker.sh" <<'WORKER'
#!/bin/sh
i=0
while [ $i -lt 60 ]; do echo "tick $i of $RANK"; i=$((i + 1)); sleep 0.1; done
WORKER
chmod +x "$work/worker.sh"

address="${TESTHOST_ADDR[1]}:29400"
flags=(--num_machines 2 --num_processes 4 --main_process_ip "${TESTHOST_ADDR[1]}"
       --main_process_port 29400 --use_cpu --no_python)
testhosts_exec 2 "$build/agent/trl-agent" --machine_rank 1 "${flags[@]}" \
  >"$work/agent.out" 2>"$work/agent.err" &
agent=$!
testhosts_exec 1 "$build/coordinator/trl-coord" start "${flags[@]}" \
  --state_file "$work/state" "$work/worker.sh" >"$work/coord.out" 2>"$work/coord.err" &
coord=$!

fail=0
started() { grep -q '\[rank 3\] tick 0 of 3' "$work/agent.out"; }
if ! wait_for 30 started; then
  echo "FAIL: the job did not start"; cat "$work"/*.out "$work"/*.err; exit 1
fi
testhosts_exec 3 timeout 60 "$build/coordinator/trl-coord" logs --address "$address" \
  -f --rank 3 >"$work/follow.out" 2>"$work/follow.err" &
follow=$!
halfway() { grep -q '\[rank 2\] tick 30 of 2' "$work/agent.out"; }
wait_for 30 halfway
testhosts_exec 3 timeout 60 "$build/coordinator/trl-coord" logs --address "$address" \
  --rank 2 >"$work/retained.out" 2>"$work/retained.err"
retained_rc=$?
# Lines are shown as they are printed: some before the job ends.
if ! grep -q 'tick 3[0-9] of 3' "$work/follow.out"; then
  echo "FAIL: logs -f showed nothing of rank 3 while it printed"; fail=1
fi

wait $coord; coord_rc=$?
wait $agent; agent_rc=$?
wait $follow; follow_rc=$?
echo "trl-coord exit $coord_rc, trl-agent exit $agent_rc, logs -f exit $follow_rc, logs exit $retained_rc"
if [ $coord_rc != 0 ] || [ $agent_rc != 0 ] || [ $follow_rc != 0 ] || [ $retained_rc != 0 ]; then
  echo "FAIL: an exit code is not 0"; fail=1
fi
# check FILE RANK FIRST LAST: every line is "TIME [rank RANK] tick N of
# RANK" with N from FIRST to LAST, in order.
check() {
  local bad marks
  # One generation: its mark first, then only the workers' lines.
  marks=$(grep -c '^==== generation [0-9]* ====$' "$1")
  [ "$marks" = 1 ] && head -1 "$1" | grep -qx '==== generation 0 ====' \
    || { echo "expected one mark, generation 0's, first: $marks"; return 1; }
  sed -i '1d' "$1"
  bad=$(grep -Ev '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z \[rank [0-9]+\] tick [0-9]+ of [0-9]+$' "$1" | head -1)
  [ -z "$bad" ] || { echo "bad line: $bad"; return 1; }
  awk -v rank="$2" -v first="$3" -v last="$4" '
    $3 != rank "]" || $7 != rank { print "wrong rank: " $0; bad = 1; exit }
    { if ($5 != first + n) { print "expected tick " first + n ": " $0; bad = 1; exit } n++ }
    END { if (!bad && (n == 0 || first + n - 1 < last)) { print "last tick " first + n - 1 ", expected " last; bad = 1 }
          exit bad }' "$1"
}
check "$work/follow.out" 3 0 59 || { echo "FAIL: logs -f --rank 3"; fail=1; }
check "$work/retained.out" 2 0 30 || { echo "FAIL: logs --rank 2"; fail=1; }
for i in 1 2 3; do
  left=$(testhosts_pids $i)
  [ -z "$left" ] || { echo "FAIL: processes left on ${TESTHOST_NAME[$i]}: $left"; fail=1; }
done
if [ $fail != 0 ]; then
  for f in follow.out follow.err retained.err coord.err agent.err; do
    echo "== $f"; tail -5 "$work/$f"
  done
fi
[ $fail = 0 ] && echo "PASS: trl-coord logs from a third host, followed and retained"
exit $fail

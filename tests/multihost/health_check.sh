#!/usr/bin/env bash
# An unhealthy machine gets no ranks (issue 33). trl-coord on node01
# (machine 0), agents on node02 (machine 1) and node03 (machine 2), a spare
# on node04; 2 workers each. node02's agent runs
#   --health_check 'test ! -e SICK || { echo GPU 3 is missing; exit 1; }'
# with SICK present: node02 is cordoned at its registration, the spare takes
# machine 1, and generation 0 runs its 6 ranks without node02. `ps` and
# `ps --json` name node02 and the failed check. Once generation 0 runs,
# node03's check hangs once (`sleep 600` while a file exists), bounded by
# --health_check_timeout 1: node03 is cordoned for that check (the running
# generation goes on) and healthy again after. When SICK is
# removed, node02's next check passes and its cordon ends by itself. Then
# the workers are released: the job succeeds, nothing is left on any host.
#
# Usage: health_check.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
source "$here/../lib/testhosts.sh"
source "$here/../lib/generations.sh"
testhosts_skip_unless_possible

work=$(mktemp -d)
cleanup() { testhosts_destroy; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 143' TERM; trap 'exit 130' INT; trap 'exit 129' HUP
testhosts_create "trlhc$(( $$ % 10000 ))x" 4
bad=${TESTHOST_NAME[2]}
touch "$work/sick"

cat >"$work/worker.sh" <<'WORKER'
#!/bin/sh
echo "start gen $TRL_GENERATION rank $RANK/$WORLD_SIZE machine $TRL_MACHINE_RANK host $(hostname)"
i=0
while [ ! -e "$1" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$1" ] || exit 3
WORKER
chmod +x "$work/worker.sh"

port=29670
coord_addr="${TESTHOST_ADDR[1]}:$port"
flags=(--num_machines 3 --num_processes 6 --main_process_ip "${TESTHOST_ADDR[1]}"
       --main_process_port "$port" --use_cpu --max_restarts 2 --no_python
       --heartbeat_interval 0.5 --heartbeat_misses 3 --lease 2 --stop_grace 2
       --health_check_interval 0.5)
testhosts_exec 2 "$build/agent/trl-agent" --machine_rank 1 "${flags[@]}" \
  --health_check "test ! -e $work/sick || { echo GPU 3 is missing; exit 1; }" \
  >"$work/m1.out" 2>"$work/m1.err" &
m1=$!
testhosts_exec 3 "$build/agent/trl-agent" --machine_rank 2 "${flags[@]}" \
  --health_check "if [ -e $work/hang_once ]; then rm $work/hang_once; sleep 600; fi" \
  --health_check_timeout 1 >"$work/m2.out" 2>"$work/m2.err" &
m2=$!
testhosts_exec 4 "$build/agent/trl-agent" --spare "${flags[@]}" \
  >"$work/spare.out" 2>"$work/spare.err" &
spare=$!
testhosts_exec 1 "$build/coordinator/trl-coord" start "${flags[@]}" \
  "$work/worker.sh" "$work/release" >"$work/coord.out" 2>"$work/coord.err" &
coord=$!

fail=0
outputs() { cat "$work"/*.out | sed 's/^\[[^]]*\] *//'; }
ps_text() { testhosts_exec 1 "$build/coordinator/trl-coord" ps --address "$coord_addr" 2>&1; }
ps_json() { testhosts_exec 1 "$build/coordinator/trl-coord" ps --address "$coord_addr" --json 2>/dev/null; }
gen0_started() { [ "$(outputs | grep -c '^start gen 0 ')" = 6 ]; }
if ! wait_for 30 gen0_started; then
  echo "FAIL: generation 0 did not start its 6 ranks"; outputs; cat "$work/coord.err"; fail=1
fi
outputs | grep '^start'
on_bad=$(outputs | awk -v bad="$bad" '$1 == "start" && $9 == bad' | wc -l)
[ "$on_bad" = 0 ] || { echo "FAIL: $on_bad ranks ran on the unhealthy $bad"; fail=1; }
m1_hosts=$(outputs | awk '$1 == "start" && $7 == 1 {print $9}' | sort -u)
[ "$m1_hosts" = "${TESTHOST_NAME[4]}" ] ||
  { echo "FAIL: machine 1 ran on '$m1_hosts', not the spare ${TESTHOST_NAME[4]}"; fail=1; }
grep -q "machine 1 (host $bad) is unhealthy: --health_check exited 1: GPU 3 is missing" "$work/coord.err" ||
  { echo "FAIL: the coordinator did not name the unhealthy machine and its check"; cat "$work/coord.err"; fail=1; }
ps_text | grep -q "^ *cordoned: $bad (health check failed: --health_check exited 1: GPU 3 is missing" ||
  { echo "FAIL: ps shows no health cordon of $bad"; ps_text; fail=1; }
health_json=$(ps_json | /usr/bin/python3 -c "import json,sys; print(' '.join(c.get('hostname','?') + '=' + c.get('health','') for c in json.load(sys.stdin).get('cordoned', [])))" 2>/dev/null)
echo "$health_json" | grep -q "^$bad=--health_check exited 1: GPU 3 is missing" ||
  { echo "FAIL: ps --json's cordoned list is '$health_json'"; fail=1; }
# node03's check hangs once while the generation runs: killed at its
# bound, and it is healthy again.
touch "$work/hang_once"
hang_told() { grep -q "did not finish within 1 s (killed)" "$work/m2.err"; }
wait_for 15 hang_told || { echo "FAIL: node03's hanging check was not bounded"; cat "$work/m2.err"; fail=1; }
node03_back() { grep -q "host ${TESTHOST_NAME[3]}) passes its health checks again" "$work/coord.err"; }
wait_for 10 node03_back || { echo "FAIL: node03 never passed again"; fail=1; }
grep -q "host ${TESTHOST_NAME[3]} is cordoned (health check failed: --health_check did not finish within 1 s (killed))" "$work/coord.err" ||
  { echo "FAIL: node03's hanging check did not cordon it"; fail=1; }
[ "$(outputs | grep -c '^start gen 1 ')" = 0 ] ||
  { echo "FAIL: the running generation was stopped for node03's check"; fail=1; }
# node02 is mended: its cordon ends by itself.
rm -f "$work/sick"
cordon_gone() {
  local text
  text=$(testhosts_exec 1 "$build/coordinator/trl-coord" ps --address "$coord_addr" 2>&1) || return 1
  ! echo "$text" | grep -q "^ *cordoned:"
}
wait_for 10 cordon_gone || { echo "FAIL: $bad is still cordoned once its check passes"; ps_text; fail=1; }
grep -q "host $bad passes its health checks again" "$work/coord.err" ||
  { echo "FAIL: the coordinator did not say $bad is healthy again"; fail=1; }

touch "$work/release"
wait $coord; coord_rc=$?
wait $m2; m2_rc=$?
wait $spare; spare_rc=$?
wait_for 20 eval '! kill -0 $m1 2>/dev/null' || { echo "FAIL: $bad's agent outlived the job"; fail=1; }
echo "trl-coord exit $coord_rc, node03's agent exit $m2_rc, spare exit $spare_rc"
if [ $coord_rc != 0 ] || [ $m2_rc != 0 ] || [ $spare_rc != 0 ]; then
  echo "FAIL: non-zero exit"; cat "$work/coord.err"; fail=1
fi
grep -iE "health|cordon|spare" "$work/coord.err" | tail -12
for i in 1 2 3 4; do
  left=$(testhosts_pids "$i")
  [ -z "$left" ] || { echo "FAIL: processes left on ${TESTHOST_NAME[$i]}: $left"; fail=1; }
done
[ $fail = 0 ] && echo "PASS: unhealthy $bad got no ranks, the spare took machine 1, a hanging check was bounded, the cordon ended once the check passed"
exit $fail

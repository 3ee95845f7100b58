#!/usr/bin/env bash
# A network blip under the default settings: node02's link goes down for
# 2 s (BLIP_S) in the middle of a job and comes back. Heartbeats are missed, but
# fewer than the coordinator's timeout allows, and the agent's lease holds:
# nobody is declared lost, nothing restarts (the default is --max_restarts
# 0, so a loss would fail the job), and the job succeeds in generation 0.
#
# Usage: blip.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
source "$here/../lib/testhosts.sh"
source "$here/../lib/generations.sh"
testhosts_skip_unless_possible

work=$(mktemp -d)
cleanup() { testhosts_destroy; rm -rf "$work"; }
trap cleanup EXIT
testhosts_create "trlbl$(( $$ % 10000 ))x" 2

# Every rank runs 6 s, then exits 0.
cat >"$work/worker.sh" <<'WORKER'
#!/bin/sh
echo "start gen $TRL_GENERATION rank $RANK pid $$"
sleep 6
echo "end gen $TRL_GENERATION rank $RANK pid $$"
WORKER
chmod +x "$work/worker.sh"

# Nothing but the job's shape: the defaults are what is tested.
flags=(--num_machines 2 --num_processes 4 --main_process_ip "${TESTHOST_ADDR[1]}"
       --main_process_port 29400 --use_cpu --no_python)
testhosts_exec 2 "$build/agent/trl-agent" --machine_rank 1 "${flags[@]}" \
  >"$work/agent.out" 2>"$work/agent.err" &
agent=$!
testhosts_exec 1 "$build/coordinator/trl-coord" start "${flags[@]}" \
  --state_file "$work/state" "$work/worker.sh" >"$work/coord.out" 2>"$work/coord.err" &
coord=$!

fail=0
gen0_up() { [ "$(cat "$work/coord.out" "$work/agent.out" | grep -c 'start gen 0')" = 4 ]; }
if ! wait_for 30 gen0_up; then
  echo "FAIL: generation 0 did not start"; cat "$work"/*.out "$work"/*.err; exit 1
fi
# For 2 s (BLIP_S), at some point within a heartbeat interval.
sleep 0.5
# BLIP_KIND=silent: everything node02 sends to node01 goes to a gateway
# nobody has (dropped without an error, as in a silent partition);
# otherwise its link goes down (senders get errors at once).
gone="${TESTHOST_ADDR[2]%.*}.250"
if [ "${BLIP_KIND:-silent}" = silent ]; then
  ip -n "${TESTHOST_PREFIX}2" rule add to "${TESTHOST_ADDR[1]}" table 100
  ip -n "${TESTHOST_PREFIX}2" route add default via "$gone" dev "${TESTHOST_IF[2]}" table 100
else
  ip -n "${TESTHOST_PREFIX}2" link set "${TESTHOST_IF[2]}" down
fi
echo "node02 cut off ($${BLIP_KIND:-silent}) at $(date +%s.%N)"
sleep "${BLIP_S:-2}"
if [ "${BLIP_KIND:-silent}" = silent ]; then
  ip -n "${TESTHOST_PREFIX}2" rule del to "${TESTHOST_ADDR[1]}" table 100
else
  ip -n "${TESTHOST_PREFIX}2" link set "${TESTHOST_IF[2]}" up
fi
echo "node02 back at $(date +%s.%N)"

wait $coord; coord_rc=$?
wait $agent; agent_rc=$?
echo "trl-coord exit $coord_rc, trl-agent exit $agent_rc"
if [ $coord_rc != 0 ] || [ $agent_rc != 0 ]; then
  echo "FAIL: a ${BLIP_S:-2} s blip failed the job"; fail=1
fi
if grep -E "is lost|disconnected|lease|generation 1" "$work/coord.err" "$work/agent.err"; then
  echo "FAIL: the blip was taken for a loss"; fail=1
fi
all=$(cat "$work/coord.out" "$work/agent.out")
for rank in 0 1 2 3; do
  echo "$all" | grep -q "end gen 0 rank $rank " || { echo "FAIL: rank $rank of generation 0 did not finish"; fail=1; }
done
for i in 1 2; do
  left=$(testhosts_pids $i)
  [ -z "$left" ] || { echo "FAIL: processes left on ${TESTHOST_NAME[$i]}: $left"; fail=1; }
done
[ $fail = 0 ] && echo "PASS: a ${BLIP_S:-2} s blip under the defaults"
exit $fail

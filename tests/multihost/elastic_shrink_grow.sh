#!/usr/bin/env bash
# An elastic job (--num_machines 2:3) on three test hosts. All three
# register: generation 0 starts at once with world size 6. node02's agent
# (machine 1) is killed (SIGKILL): instead of waiting for it to rejoin, the
# job goes on at generation 1 on machines 0 and 2 (world size 4,
# GROUP_WORLD_SIZE 2, machine 2 is GROUP_RANK 1 with ranks 2..3). A new
# agent on node02 registers while generation 1 runs; with
# --rescale_on_join generation 1 stops at once and generation 2 takes it in
# (world size 6 again), then succeeds. In every generation the ranks are
# 0..N-1 once each, every worker agrees on the shape, generations never
# overlap, `ps --json` shows the members and MIN, and nothing is left.
#
# Usage: elastic_shrink_grow.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
source "$here/../lib/testhosts.sh"
source "$here/../lib/generations.sh"
testhosts_skip_unless_possible

work=$(mktemp -d)
cleanup() { testhosts_destroy; rm -rf "$work"; }
trap cleanup EXIT
testhosts_create "trlel$(( $$ % 10000 ))x" 3

# Generations 0 and 1 run until stopped; generation 2 exits 0. Each line
# carries the shape the worker saw ($5 is the generation, $NF the time, as
# generations.sh reads them).
cat >"$work/worker.sh" <<'WORKER'
#!/bin/sh
g=$TORCHELASTIC_RESTART_COUNT
shape="world $WORLD_SIZE group $GROUP_RANK/$GROUP_WORLD_SIZE trlgen $TRL_GENERATION"
echo "start gen $g rank $RANK $shape pid $$ at $(date +%s.%N)"
trap 'echo "end gen $g rank $RANK $shape pid $$ at $(date +%s.%N)"; exit 0' TERM
if [ "$g" -lt 2 ]; then
  while true; do sleep 0.1; done
fi
sleep 0.3
echo "end gen $g rank $RANK $shape pid $$ at $(date +%s.%N)"
WORKER
chmod +x "$work/worker.sh"

port=29470
coord_addr="${TESTHOST_ADDR[1]}:$port"
flags=(--num_machines 2:3 --num_processes 6 --main_process_ip "${TESTHOST_ADDR[1]}"
       --main_process_port $port --use_cpu --max_restarts 3
       --heartbeat_interval 0.5 --heartbeat_misses 3 --lease 2 --stop_grace 2
       --rejoin_timeout 60)
start_agent() {  # start_agent HOST MACHINE_RANK OUTPUT_NAME
  testhosts_exec "$1" "$build/agent/trl-agent" --machine_rank "$2" "${flags[@]}" \
    >"$work/$3.out" 2>"$work/$3.err" &
}
start_agent 2 1 agent1; agent1=$!
start_agent 3 2 agent2; agent2=$!
testhosts_exec 1 "$build/coordinator/trl-coord" start "${flags[@]}" --elastic_wait 30 \
  --rescale_on_join --state_file "$work/state" "$work/worker.sh" \
  >"$work/coord.out" 2>"$work/coord.err" &
coord=$!

fail=0
outputs() { cat "$work"/*.out; }
started() { [ "$(outputs | grep -c "start gen $1 ")" = "$2" ]; }
# All MAX there: no elastic wait (30 s) before generation 0.
if ! wait_for 20 started 0 6; then
  echo "FAIL: generation 0 did not start on 3 machines at once"
  cat "$work"/*; exit 1
fi

host_pid() {  # the pid, as seen from outside, of the process matching $2 on host $1
  for pid in $(testhosts_pids "$1"); do
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2"; then echo "$pid"; return; fi
  done
}
pid=$(host_pid 2 trl-agent)
[ -n "$pid" ] || { echo "FAIL: no trl-agent on node02"; cat "$work"/*; exit 1; }
kill -9 "$pid"
killed_at=$(date +%s.%N)
echo "node02's agent killed at $killed_at"
wait "$agent1" 2>/dev/null
node02_empty() { [ -z "$(testhosts_pids 2)" ]; }
wait_for 10 node02_empty || { echo "FAIL: node02's workers outlived its agent"; fail=1; }
# Lease (2 s) + stop grace (2 s) + 2 s, not the rejoin timeout (60 s).
if ! wait_for 20 started 1 4; then
  echo "FAIL: generation 1 did not start on the 2 machines left"
  cat "$work"/*; exit 1
fi
gen1_at=$(date +%s.%N)
echo "generation 1 running $(echo "$gen1_at - $killed_at" | bc) s after the kill"

members() {
  testhosts_exec 1 "$build/coordinator/trl-coord" ps --address "$coord_addr" --json 2>/dev/null |
    /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(d.get('min_machines'), d.get('num_machines'), d.get('members'))" 2>/dev/null
}
shown=$(members)
echo "ps: min, max, members = $shown"
[ "$shown" = "2 3 [0, 2]" ] || { echo "FAIL: ps --json did not show MIN 2 of 3 and members [0, 2]"; fail=1; }

start_agent 2 1 agent1b; agent1b=$!
wait $coord; coord_rc=$?
wait $agent2; agent2_rc=$?
wait $agent1b; agent1b_rc=$?
echo "trl-coord exit $coord_rc, agents exit $agent2_rc $agent1b_rc"
if [ $coord_rc != 0 ] || [ $agent2_rc != 0 ] || [ $agent1b_rc != 0 ]; then
  echo "FAIL: non-zero exit"; fail=1
fi
all=$(outputs)
echo "$all"
grep -E "generation [0-9]+:|rescale|joined|lost|disconnected|registered" "$work/coord.err"

# The shape every worker of a generation saw: WORLD_SIZE, GROUP_WORLD_SIZE
# and TRL_GENERATION agree, ranks 0..N-1 once each.
check_generation() {  # check_generation G WORLD MACHINES
  local g=$1 world=$2 machines=$3 ranks
  ranks=$(echo "$all" | awk -v g="$g" '$3=="start" && $4=="gen" && $5==g {print $7}' | sort -n | tr '\n' ' ')
  [ "$ranks" = "$(seq 0 $((world - 1)) | tr '\n' ' ')" ] ||
    { echo "FAIL: generation $g ranks were '$ranks', not 0..$((world - 1))"; fail=1; }
  local shapes
  shapes=$(echo "$all" | awk -v g="$g" '$3=="start" && $5==g {print $9, $11, $13}' |
    sed 's#[0-9]*/# #' | sort -u)
  [ "$shapes" = "$world  $machines $g" ] ||
    { echo "FAIL: generation $g workers saw '$shapes', not world $world on $machines machines"; fail=1; }
}
check_generation 0 6 3
check_generation 1 4 2
check_generation 2 6 3
# GROUP_RANK is the machine's place among the members: machine 2 is 1 of
# 2 in generation 1, with ranks 2..3 (in agent2.out: node03's workers).
g1_m2=$(awk '$3=="start" && $5==1 {print $7, $11}' "$work/agent2.out" | sort | tr '\n' ' ')
[ "$g1_m2" = "2 1/2 3 1/2 " ] || { echo "FAIL: machine 2's ranks and GROUP_RANK in generation 1 were '$g1_m2', not ranks 2..3 as 1/2"; fail=1; }
overlap=$(echo "$all" | generations_overlap)
[ -z "$overlap" ] || { echo "FAIL: generations overlapped: $overlap"; fail=1; }
[ "$(echo "$all" | last_generation)" = 2 ] || { echo "FAIL: the last generation was not 2"; fail=1; }
grep -q "generation 1: 2 of 2:3 machines (0, 2), world size 4, effective batch size = per-device batch x 4" "$work/coord.err" ||
  { echo "FAIL: the coordinator did not log generation 1's shape"; fail=1; }
grep -q "joined: generation 1 stops to take it in" "$work/coord.err" ||
  { echo "FAIL: the joiner did not stop generation 1 (--rescale_on_join)"; fail=1; }
grep -q "restarts used 1 of 3" "$work/coord.err" ||
  { echo "FAIL: the loss did not count as one restart"; fail=1; }
grep -q "generation 2: .*restarts used 2" "$work/coord.err" &&
  { echo "FAIL: the rescale spent a restart"; fail=1; }
for i in 1 2 3; do
  left=$(testhosts_pids $i)
  [ -z "$left" ] || { echo "FAIL: processes left on ${TESTHOST_NAME[$i]}: $left"; fail=1; }
done
[ $fail = 0 ] && echo "PASS: elastic 2:3; lost node02 -> generation 1 on 2 machines; node02 back -> generation 2 on 3"
exit $fail

#!/usr/bin/env bash
# A cut link on two test hosts: node02's link goes down for longer than the
# lease while generation 0 runs. node02's agent must stop its workers by
# itself (no worker runs unsupervised), the coordinator must notice the
# silent machine, and once the link is back node02 rejoins and generation 1
# runs to success. Only one generation ever runs at a time, and nothing is
# left on either host.
#
# Usage: cut_link_rejoin.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
source "$here/../lib/testhosts.sh"
source "$here/../lib/generations.sh"
testhosts_skip_unless_possible

work=$(mktemp -d)
cleanup() { testhosts_destroy; rm -rf "$work"; }
trap cleanup EXIT
testhosts_create "trlcl$(( $$ % 10000 ))x" 2

write_generation_worker "$work/worker.sh"

flags=(--num_machines 2 --num_processes 4 --main_process_ip "${TESTHOST_ADDR[1]}"
       --main_process_port 29400 --use_cpu --max_restarts 2
       --heartbeat_interval 0.5 --heartbeat_misses 3 --lease 2 --stop_grace 2
       --rejoin_timeout 60)
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

ip -n "${TESTHOST_PREFIX}2" link set "${TESTHOST_IF[2]}" down
echo "link of node02 cut at $(date +%s.%N)"
node02_stopped() { [ "$(grep -c 'end gen 0' "$work/agent.out")" = 2 ]; }
coord_noticed() { grep -q 'machine 1 is lost' "$work/coord.err"; }
wait_for 10 node02_stopped || { echo "FAIL: node02 kept its workers while cut off"; fail=1; }
wait_for 10 coord_noticed || { echo "FAIL: the coordinator did not notice node02"; fail=1; }
sleep 1  # cut for longer than the lease (2 s) in all
restored=$(date +%s.%N)
ip -n "${TESTHOST_PREFIX}2" link set "${TESTHOST_IF[2]}" up
echo "link of node02 restored at $restored"

wait $coord; coord_rc=$?
wait $agent; agent_rc=$?
echo "trl-coord exit $coord_rc, trl-agent exit $agent_rc"
cat "$work/coord.out" "$work/agent.out"
if [ $coord_rc != 0 ] || [ $agent_rc != 0 ]; then
  echo "FAIL: non-zero exit"; fail=1
fi
grep -E "lost|lease|rejoin|registered|generation 1" "$work/coord.err" "$work/agent.err"

all=$(cat "$work/coord.out" "$work/agent.out")
last=$(echo "$all" | last_generation)
if [ "${last:-0}" -lt 1 ]; then
  echo "FAIL: no generation after 0 ran"; fail=1
fi
for rank in 0 1 2 3; do
  echo "$all" | grep -q "end gen $last rank $rank " || { echo "FAIL: rank $rank of the last generation ($last) did not finish"; fail=1; }
done
# Only one generation at a time: every end of a generation comes before any
# start of a later one.
overlap=$(echo "$all" | generations_overlap)
[ -z "$overlap" ] || { echo "FAIL: generations overlapped: $overlap"; fail=1; }
# node02 stopped its generation-0 workers while it was cut off.
node02_end0=$(awk '/end gen 0/ {print $NF}' "$work/agent.out" | sort -g | tail -1)
if [ -z "$node02_end0" ] || [ "$(echo "$node02_end0 < $restored" | bc)" != 1 ]; then
  echo "FAIL: node02 did not stop its workers while cut off"; fail=1
fi
for i in 1 2; do
  left=$(testhosts_pids $i)
  [ -z "$left" ] || { echo "FAIL: processes left on ${TESTHOST_NAME[$i]}: $left"; fail=1; }
done
[ $fail = 0 ] && echo "PASS: cut link; node02 stopped its workers, rejoined, one generation at a time"
exit $fail

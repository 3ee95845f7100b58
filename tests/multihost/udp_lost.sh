#!/usr/bin/env bash
# Heartbeat datagrams that vanish on the way: once both agents send their
# heartbeats as UDP datagrams, node02's UDP traffic to the coordinator's port
# is routed into the void (a policy rule sends it to a gateway that does not
# exist; the TCP stream takes the normal route). node02's agent must notice
# that its acks stopped and carry its heartbeats on the gRPC stream again,
# soon enough that the coordinator never counts it as lost: the job runs on
# in generation 0 and succeeds. Nothing is left on either host.
#
# Usage: udp_lost.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
source "$here/../lib/testhosts.sh"
source "$here/../lib/generations.sh"
testhosts_skip_unless_possible

work=$(mktemp -d)
cleanup() { testhosts_destroy; rm -rf "$work"; }
trap cleanup EXIT
testhosts_create "trlud$(( $$ % 10000 ))x" 2

port=29450
coord_addr="${TESTHOST_ADDR[1]}:$port"
# Workers run 6 s; heartbeats every 0.3 s, lost after 5 misses (1.5 s):
# the fallback must bring a heartbeat within 2 intervals (0.6 s).
flags=(--num_machines 2 --num_processes 4 --main_process_ip "${TESTHOST_ADDR[1]}"
       --main_process_port $port --use_cpu --max_restarts 0
       --heartbeat_interval 0.3 --heartbeat_misses 5)
testhosts_exec 2 "$build/agent/trl-agent" --machine_rank 1 "${flags[@]}" \
  >"$work/agent.out" 2>"$work/agent.err" &
agent=$!
testhosts_exec 1 "$build/coordinator/trl-coord" start "${flags[@]}" \
  /bin/sh -c 'sleep 6; echo "rank $RANK done"' >"$work/coord.out" 2>"$work/coord.err" &
coord=$!

fail=0
via() {  # via MACHINE -> how ps last saw its heartbeats come
  testhosts_exec 1 "$build/coordinator/trl-coord" ps --address "$coord_addr" --json 2>/dev/null |
    /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print([n.get('heartbeat_via','') for n in d['nodes'] if n['machine_rank']==$1][0])" 2>/dev/null
}
both_udp() { [ "$(via 0)" = udp ] && [ "$(via 1)" = udp ]; }
if ! wait_for 20 both_udp; then
  echo "FAIL: heartbeats never came as datagrams"; cat "$work"/*; exit 1
fi
echo "both agents send datagrams; node02's UDP to port $port now goes nowhere"
subnet_gone="${TESTHOST_ADDR[2]%.*}.250"  # on the link, but nobody has it
ip -n "${TESTHOST_PREFIX}2" rule add ipproto udp dport $port table 100
ip -n "${TESTHOST_PREFIX}2" route add default via "$subnet_gone" dev "${TESTHOST_IF[2]}" table 100
node1_stream() { [ "$(via 1)" = stream ]; }
wait_for 5 node1_stream || { echo "FAIL: node02 did not go back to the stream"; fail=1; }
sleep 3  # twice the 1.5 s timeout, on the stream alone
echo "node 0 via $(via 0), node 1 via $(via 1)"
[ "$(via 0)" = udp ] || { echo "FAIL: node01's datagrams stopped too"; fail=1; }

wait $coord; coord_rc=$?
wait $agent; agent_rc=$?
echo "trl-coord exit $coord_rc, trl-agent exit $agent_rc"
if [ $coord_rc != 0 ] || [ $agent_rc != 0 ]; then
  echo "FAIL: non-zero exit"; fail=1; cat "$work"/*.err
fi
[ "$(cat "$work/coord.out" "$work/agent.out" | grep -c 'done$')" = 4 ] \
  || { echo "FAIL: not every rank finished"; fail=1; }
if grep -E "is lost|generation 1|restarting|restarts used [1-9]" "$work/coord.err" | grep -v "restarts used 0" ; then
  echo "FAIL: the job lost a machine or restarted"; fail=1
fi
for i in 1 2; do
  left=$(testhosts_pids $i)
  [ -z "$left" ] || { echo "FAIL: processes left on ${TESTHOST_NAME[$i]}: $left"; fail=1; }
done
[ $fail = 0 ] && echo "PASS: lost heartbeat datagrams; node02 went back to the gRPC stream, no machine lost"
exit $fail

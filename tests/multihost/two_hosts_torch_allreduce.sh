#!/usr/bin/env bash
# Two test hosts x two workers: trl-coord start on node01, trl-agent on
# node02, each worker a real PyTorch process that rendezvouses through Gloo
# and all-reduces. Every rank must get the right sum, MASTER_ADDR must be
# node01's network address (not the 127.0.1.1 its hostname resolves to), and
# nothing may be left on either host afterwards.
#
# Usage: two_hosts_torch_allreduce.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
source "$here/../lib/testhosts.sh"
testhosts_skip_unless_possible
python=${TRL_TEST_PYTHON:-/usr/bin/python3}
if ! "$python" -c "import torch.distributed" 2>/dev/null; then
  skip_or_fail "$python has no torch.distributed (apt-get install python3-torch)"
fi

work=$(mktemp -d)
cleanup() { testhosts_destroy; rm -rf "$work"; }
trap cleanup EXIT
testhosts_create "trlar$(( $$ % 10000 ))x" 2

port=29400
master=${TESTHOST_ADDR[1]}
flags=(--num_machines 2 --num_processes 4 --main_process_ip "$master"
       --main_process_port "$port" --use_cpu --python "$python")

testhosts_exec 2 "$build/agent/trl-agent" --machine_rank 1 "${flags[@]}" \
  >"$work/agent.out" 2>"$work/agent.err" &
agent=$!
testhosts_exec 1 "$build/coordinator/trl-coord" start "${flags[@]}" \
  "$here/allreduce.py" "$master" >"$work/coord.out" 2>"$work/coord.err" &
coord=$!

fail=0
wait $coord; coord_rc=$?
wait $agent; agent_rc=$?
echo "trl-coord exit $coord_rc, trl-agent exit $agent_rc"
cat "$work/coord.out" "$work/agent.out"
if [ $coord_rc != 0 ] || [ $agent_rc != 0 ]; then
  echo "FAIL: non-zero exit"; cat "$work/coord.err" "$work/agent.err"; fail=1
fi
for rank in 0 1 2 3; do
  if ! grep -q "^\[rank $rank\] allreduce ok: rank $rank/4" "$work/coord.out" "$work/agent.out"; then
    echo "FAIL: rank $rank did not report a correct all-reduce"; fail=1
  fi
done
# Ranks 0,1 on node01 and 2,3 on node02, each on its host's own interface.
grep -q "^\[rank 1\] allreduce ok: rank 1/4 on node01 .*iface ${TESTHOST_IF[1]})" "$work/coord.out" \
  || { echo "FAIL: rank 1 not on node01 via ${TESTHOST_IF[1]}"; fail=1; }
grep -q "^\[rank 3\] allreduce ok: rank 3/4 on node02 .*iface ${TESTHOST_IF[2]})" "$work/agent.out" \
  || { echo "FAIL: rank 3 not on node02 via ${TESTHOST_IF[2]}"; fail=1; }
grep -q "machine 1 registered: host node02, address ${TESTHOST_ADDR[2]}" "$work/coord.err" \
  || { echo "FAIL: node02 did not advertise ${TESTHOST_ADDR[2]}"; cat "$work/coord.err"; fail=1; }
# Invariant 3: nothing of the job is left on either host.
for i in 1 2; do
  left=$(testhosts_pids $i)
  if [ -n "$left" ]; then
    echo "FAIL: processes left on ${TESTHOST_NAME[$i]}: $left"; ps -o pid,args -p $left; fail=1
  fi
done
[ $fail = 0 ] && echo "PASS: 2 hosts x 2 workers, PyTorch Gloo all-reduce correct on every rank"
exit $fail

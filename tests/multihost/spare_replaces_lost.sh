#!/usr/bin/env bash
# A machine lost in the middle of training, on four test hosts: trl-coord
# on node01 (machine 0), agents on node02 (machine 1) and node03 (machine
# 2), 3 machines x 2 workers, fixed size. Once training is under way every
# process of node02 (its agent and its workers) is killed with SIGKILL, as
# when the machine dies.
#
#   spare (default): `trl-agent --spare` runs on node04. It takes machine
#     1's place: the next generation runs machine 1's ranks on node04
#     (TRL_MACHINE_RANK 1), `ps --json` lists node04 as a spare before the
#     loss and as machine 1 after it.
#   return: no spare; node02 comes back (a new agent, --machine_rank 1) at
#     once after the loss, as a rebooted machine would.
#   shrink: no spare, --num_machines 2:3: the job goes on on machines 0
#     and 2 (4 ranks); only the ddp job runs (the demo's effective batch,
#     and so its weights, follow the world size), and its weights must
#     still be bit-identical to the uninterrupted run's.
#
# Two jobs run this way, one after the other:
#   demo: the project's trl-demo-train (6 ranks x 4 per device), checkpoint
#     every 20 steps; its final weights must be bit-identical to those of
#     the same job run uninterrupted on the same hosts (run first), and the
#     last generation must have resumed from a checkpoint.
#   ddp:  tests/multihost/ddp_resume.py (PyTorch, Gloo, --mode exact); its
#     final weights' SHA-256 must equal that of the same script run alone
#     without interruption (bit-identical: the script's arithmetic does not
#     depend on the world size), and a later generation must have resumed
#     from a step > 0.
# Both must end with exit 0 from trl-coord and every agent still alive, and
# nothing may be left on any host.
#
# Usage: spare_replaces_lost.sh BUILD_DIR [spare|return|shrink]
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR [spare|return]}" && pwd)
mode=${2:-spare}
source "$here/../lib/testhosts.sh"
source "$here/../lib/generations.sh"
testhosts_skip_unless_possible
python=${TRL_TEST_PYTHON:-/usr/bin/python3}
if ! "$python" -c "import torch.distributed" 2>/dev/null; then
  skip_or_fail "$python has no torch.distributed (apt-get install python3-torch)"
fi
case "$mode" in
  spare|return|shrink) ;;
  *) echo "usage: $0 BUILD_DIR [spare|return|shrink]"; exit 2 ;;
esac

work=$(mktemp -d)
cleanup() { testhosts_destroy; rm -rf "$work"; }
trap cleanup EXIT
# Killed (ctest's timeout, ^C): exit through the EXIT trap, which removes
# the hosts and everything on them.
trap 'exit 143' TERM; trap 'exit 130' INT; trap 'exit 129' HUP
if [ "$mode" = spare ]; then
  testhosts_create "trlsp$(( $$ % 10000 ))x" 4
elif [ "$mode" = return ]; then
  testhosts_create "trlsr$(( $$ % 10000 ))x" 3
else
  testhosts_create "trlsh$(( $$ % 10000 ))x" 3
fi

fail=0
demo_steps=${DEMO_STEPS:-600}
ddp_steps=${DDP_STEPS:-150}
# The kill comes once the job is this far (and checkpointed).
demo_kill_at=$((demo_steps / 4))
ddp_kill_at=$((ddp_steps / 3))

# The reference of ddp_resume.py: the same script alone, uninterrupted (the
# reference of the demo is an uninterrupted run on the same hosts, below).
# With a spare the world size stays 6, so the job runs PyTorch's own
# DistributedDataParallel (--mode ddp); its averaged all-reduce sums in
# another order than one process does, so it is compared to a tolerance.
# Shrunk or returned, the bit-exact mode (world-size independent).
ddp_mode=exact
[ "$mode" = spare ] && ddp_mode=ddp
"$python" "$here/ddp_resume.py" --ckpt_dir "$work/ddp-ref-ckpt" --result "$work/ddp-ref.result" \
  --steps "$ddp_steps" --mode "$ddp_mode" >"$work/ddp-ref.out" 2>&1 ||
  { echo "FAIL: the reference ddp_resume run"; cat "$work/ddp-ref.out"; exit 1; }
echo "reference: ddp $(cat "$work/ddp-ref.result")"

host_empty() { [ -z "$(testhosts_pids "$1")" ]; }
kill_host() {  # every process of test host $1, as when the machine dies
  local pid
  for _ in 1 2 3; do
    for pid in $(testhosts_pids "$1"); do kill -9 "$pid" 2>/dev/null; done
    host_empty "$1" && return 0
    sleep 0.1
  done
  host_empty "$1"
}
ps_json() {
  testhosts_exec 1 "$build/coordinator/trl-coord" ps --address "$coord_addr" --json 2>/dev/null
}
# The hostname of machine $1 in ps --json ("" when absent).
machine_host() {
  ps_json | "$python" -c "
import json, sys
d = json.load(sys.stdin)
print(''.join(n.get('hostname', '') for n in d.get('nodes', []) if n.get('machine_rank', 0) == $1))" 2>/dev/null
}
machine_on() { [ "$(machine_host "$1")" = "$2" ]; }
spares_json() {  # the hostnames of ps --json's spares
  ps_json | "$python" -c "import json,sys; print(' '.join(s.get('hostname', '?') for s in json.load(sys.stdin).get('spares', [])))" 2>/dev/null
}
spare_listed() { spares_json | grep -qw "${TESTHOST_NAME[4]}"; }

# lose_node02 NAME FLAGS...: node02 dies (every process), then machine 1
# comes back on node02 (return) or the spare takes it (spare).
lose_node02() {
  local name=$1; shift
  if [ "$mode" = spare ]; then
    testhosts_exec 1 "$build/coordinator/trl-coord" ps --address "$coord_addr" >"$work/$name.ps-before" 2>&1
    spare_listed || { echo "FAIL: $name: ps --json did not list ${TESTHOST_NAME[4]} as a spare before the loss (spares: $(spares_json))"; fail=1; }
    grep -q "^ *spares:.*${TESTHOST_NAME[4]}" "$work/$name.ps-before" ||
      { echo "FAIL: $name: ps showed no 'spares:' line naming ${TESTHOST_NAME[4]}"; cat "$work/$name.ps-before"; fail=1; }
  fi
  kill_host 2 || { echo "FAIL: $name: could not empty node02"; fail=1; }
  local killed_at; killed_at=$(date +%s.%N)
  echo "$name: every process of node02 killed at $killed_at"
  if [ "$mode" = return ]; then
    testhosts_exec 2 "$build/agent/trl-agent" --machine_rank 1 "$@" \
      >"$work/$name.m1b.out" 2>"$work/$name.m1b.err" &
    back=$!
  elif [ "$mode" = spare ]; then
    if wait_for 30 machine_on 1 "${TESTHOST_NAME[4]}"; then
      echo "$name: ps --json shows machine 1 on ${TESTHOST_NAME[4]} $(echo "$(date +%s.%N) - $killed_at" | bc) s after the kill"
    else
      echo "FAIL: $name: ps --json never showed machine 1 on the spare ${TESTHOST_NAME[4]} (it showed '$(machine_host 1)')"
      fail=1
    fi
    spare_listed && { echo "FAIL: $name: node04 still listed as a spare after taking machine 1 ($(spares_json))"; fail=1; }
  fi
}

# run_job NAME PORT PROGRESS_CHECK COMMAND...: the job on the test hosts;
# once PROGRESS_CHECK succeeds node02 dies.
run_job() {
  local name=$1 port=$2 progress=$3; shift 3
  coord_addr="${TESTHOST_ADDR[1]}:$port"
  local machines=3
  [ "$mode" = shrink ] && machines=2:3
  local flags=(--num_machines "$machines" --num_processes 6 --main_process_ip "${TESTHOST_ADDR[1]}"
               --main_process_port "$port" --use_cpu --max_restarts 3 --python "$python"
               --heartbeat_interval 0.5 --heartbeat_misses 3 --lease 2 --stop_grace 2
               --rejoin_timeout 60)
  testhosts_exec 2 "$build/agent/trl-agent" --machine_rank 1 "${flags[@]}" \
    >"$work/$name.m1.out" 2>"$work/$name.m1.err" &
  local m1=$!
  testhosts_exec 3 "$build/agent/trl-agent" --machine_rank 2 "${flags[@]}" \
    >"$work/$name.m2.out" 2>"$work/$name.m2.err" &
  local m2=$! spare=""
  back=""
  if [ "$mode" = spare ]; then
    testhosts_exec 4 "$build/agent/trl-agent" --spare "${flags[@]}" \
      >"$work/$name.spare.out" 2>"$work/$name.spare.err" &
    spare=$!
  fi
  local extra=()
  [ "$mode" = shrink ] && extra=(--elastic_wait 30)
  testhosts_exec 1 "$build/coordinator/trl-coord" start "${flags[@]}" "${extra[@]}" \
    --state_file "$work/$name.state" "$@" >"$work/$name.out" 2>"$work/$name.err" &
  local coord=$!

  if [ "$progress" = none ]; then  # the uninterrupted reference
    :
  elif ! wait_for 120 "$progress"; then
    echo "FAIL: $name: training did not get under way"; cat "$work/$name".*; fail=1
    kill_host 2; kill $coord; wait; return
  else
    lose_node02 "$name" "${flags[@]}"
  fi
  wait $coord; local coord_rc=$?
  wait $m2; local m2_rc=$?
  local other_rc=0
  [ -n "$spare" ] && { wait "$spare"; other_rc=$?; }
  [ -n "$back" ] && { wait "$back"; other_rc=$?; }
  [ "$progress" = none ] && { wait $m1; other_rc=$?; }
  echo "== $name: trl-coord exit $coord_rc, machine 2's agent exit $m2_rc, other agent exit $other_rc"
  if [ $coord_rc != 0 ] || [ $m2_rc != 0 ] || [ $other_rc != 0 ]; then
    echo "FAIL: $name: non-zero exit"; cat "$work/$name".*; fail=1
  fi
  grep -E "generation [0-9]+|lost|spare|registered|restarts used" "$work/$name.err" | tail -15
  for i in $(seq 1 "$TESTHOST_COUNT"); do
    host_empty "$i" || { echo "FAIL: $name: processes left on ${TESTHOST_NAME[$i]}: $(testhosts_pids "$i")"; fail=1; }
  done
}

# The new machine 1 after the loss: its agent's output file.
new_m1() { if [ "$mode" = spare ]; then echo "$work/$1.spare.out"; else echo "$work/$1.m1b.out"; fi; }

# --- demo: trl-demo-train ---
if [ "$mode" != shrink ]; then
demo_args=(--per_device_train_batch_size 4 --max_steps "$demo_steps" --save_steps 20
           --logging_steps 50)
run_job demo-ref 29600 none "$build/worker/trl-demo-train" "${demo_args[@]}" \
  --output_dir "$work/demo-ref-dir"
demo_progress() { grep -q "step $demo_kill_at/" "$work/demo.out" 2>/dev/null; }
run_job demo 29610 demo_progress "$build/worker/trl-demo-train" "${demo_args[@]}" \
  --output_dir "$work/demo-dir"
grep -E "rank\(s\) over|resumed|checksum" "$work/demo-ref.out" "$work/demo.out"
resumed=$(grep -o "resumed from the checkpoint at step [0-9]*" "$work/demo.out" | awk '{print $NF}' | tail -1)
# Killed after step $demo_kill_at was logged: the checkpoint every 20 steps
# before it at least.
[ -n "$resumed" ] && [ "$resumed" -ge $((demo_kill_at - 20)) ] ||
  { echo "FAIL: demo: the last generation did not resume from a checkpoint at or after step $((demo_kill_at - 20)) ('$resumed')"; fail=1; }
[ "$(grep -c "6 rank(s) over Gloo" "$work/demo.out")" -ge 2 ] ||
  { echo "FAIL: demo: not two generations of 6 ranks"; fail=1; }
# Bit-identical to the uninterrupted run (the same 6 ranks on 3 hosts).
if [ ! -s "$work/demo-ref-dir/final_weights.txt" ] ||
   ! cmp -s "$work/demo-ref-dir/final_weights.txt" "$work/demo-dir/final_weights.txt"; then
  echo "FAIL: demo: final weights differ from the uninterrupted run's"
  paste "$work/demo-ref-dir/final_weights.txt" "$work/demo-dir/final_weights.txt" 2>/dev/null | awk '$1 != $2' | head -3
  fail=1
else
  echo "demo: final weights bit-identical to the uninterrupted run's"
fi
fi

# --- ddp: ddp_resume.py ---
# A checkpoint at or after step $ddp_kill_at (only the 3 newest are kept).
ddp_progress() {
  ls "$work/ddp-ckpt" 2>/dev/null | sed -n 's/^step-0*\([0-9][0-9]*\)\.pt$/\1/p' |
    awk -v k="$ddp_kill_at" '$1 >= k {found = 1} END {exit !found}'
}
run_job ddp 29630 ddp_progress "$here/ddp_resume.py" --ckpt_dir "$work/ddp-ckpt" \
  --result "$work/ddp.result" --steps "$ddp_steps" --step_sleep 0.1 --pg_timeout 20 \
  --mode "$ddp_mode"
ddp_lines=$(cat "$work"/ddp.*out | grep "ddp_resume start" | sed 's/^\[[^]]*\] *//')
echo "$ddp_lines" | sort -k4n -k6n
echo "ddp: $(cat "$work/ddp.result" 2>/dev/null)"
same_weights() {  # exact: the same digest; ddp: the same sum to 1e-5
  if [ "$ddp_mode" = exact ]; then
    [ "$(cat "$work/ddp.result" 2>/dev/null)" = "$(cat "$work/ddp-ref.result")" ]
  else
    "$python" - "$work/ddp.result" "$work/ddp-ref.result" <<'PY'
import sys
def total(path):
    words = open(path).read().split()
    return float(words[words.index("sum") + 1])
got, want = total(sys.argv[1]), total(sys.argv[2])
sys.exit(0 if abs(got - want) <= 1e-5 * max(1.0, abs(want)) else 1)
PY
  fi
}
if ! same_weights; then
  echo "FAIL: ddp: final weights differ from the uninterrupted run's ($(cat "$work/ddp.result" 2>/dev/null) vs $(cat "$work/ddp-ref.result"))"; fail=1
fi
last_gen=$(echo "$ddp_lines" | awk '{print $4}' | sort -n | tail -1)
[ -n "$last_gen" ] && [ "$last_gen" -ge 1 ] || { echo "FAIL: ddp: no generation after the loss"; fail=1; }
# Every rank of the last generation resumed past the kill point: 6 ranks
# (4 on machines 0 and 2 when shrunk).
world=6
[ "$mode" = shrink ] && world=4
last_lines=$(echo "$ddp_lines" | awk -v g="$last_gen" '$4 == g')
[ "$(echo "$last_lines" | awk '{print $6}' | sort -u | tr '\n' ' ')" = "$(seq -s ' ' -f "%g/$world" 0 $((world - 1))) " ] ||
  { echo "FAIL: ddp: generation $last_gen did not run ranks 0..$((world - 1)) of $world"; fail=1; }
echo "$last_lines" | awk -v k="$ddp_kill_at" '$NF < k {bad=1} END {exit bad}' ||
  { echo "FAIL: ddp: generation $last_gen resumed before the checkpoint at step $ddp_kill_at"; fail=1; }
if [ "$mode" = shrink ]; then
  # Ranks 2, 3 of the shrunk generation are machine 2's, on node03.
  for r in 2 3; do
    grep -q "ddp_resume start gen $last_gen rank $r/4 machine 2 host ${TESTHOST_NAME[3]} " "$work/ddp.m2.out" ||
      { echo "FAIL: ddp: rank $r of generation $last_gen did not run as machine 2 on ${TESTHOST_NAME[3]}"; fail=1; }
  done
  [ $fail = 0 ] && echo "PASS (shrink): node02 lost mid-training -> 2 of 2:3 machines; ddp_resume ends with the uninterrupted run's weights"
  exit $fail
fi
# Machine 1's ranks (2, 3) of the last generation ran on the new machine 1.
m1_host=$([ "$mode" = spare ] && echo "${TESTHOST_NAME[4]}" || echo "${TESTHOST_NAME[2]}")
for r in 2 3; do
  grep -q "ddp_resume start gen $last_gen rank $r/6 machine 1 host $m1_host " "$(new_m1 ddp)" ||
    { echo "FAIL: ddp: rank $r of generation $last_gen did not run as machine 1 on $m1_host"; fail=1; }
done

[ $fail = 0 ] && echo "PASS ($mode): node02 lost mid-training -> machine 1 $([ "$mode" = spare ] && echo "taken by the spare" || echo "back"); demo and ddp_resume end with the uninterrupted run's weights"
exit $fail

#!/usr/bin/env bash
# trl-demo-train across two test hosts, on CPU through Gloo and the
# coordinator's store: 2 hosts x 2 workers x 8 per device, and 2 hosts x 4
# workers (8 processes) x 4 per device, both an effective batch of 32,
# must end with the weights of one process x 32 x 1 and of one process
# x 4 x 8 accumulation steps to 5e-8 (float summation order; README's
# promise: measured 4.5e-8 and 3.7e-8, the same on every run), and nothing
# may be left on either host.
#
# Usage: two_hosts_demo_train.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
source "$here/../lib/testhosts.sh"
testhosts_skip_unless_possible

work=$(mktemp -d)
cleanup() { testhosts_destroy; rm -rf "$work"; }
trap cleanup EXIT
testhosts_create "trldt$(( $$ % 10000 ))x" 2

master=${TESTHOST_ADDR[1]}
steps=50
fail=0

# run_two_hosts NAME PROCESSES_IN_ALL PER_DEVICE: one job over both hosts.
run_two_hosts() {
  local name=$1 processes=$2 per_device=$3 port=$((29400 + $2))
  local flags=(--num_machines 2 --num_processes "$processes"
               --main_process_ip "$master" --main_process_port "$port" --use_cpu)
  testhosts_exec 2 "$build/agent/trl-agent" --machine_rank 1 "${flags[@]}" \
    >"$work/$name.agent.out" 2>"$work/$name.agent.err" &
  local agent=$!
  testhosts_exec 1 "$build/coordinator/trl-coord" start "${flags[@]}" \
    "$build/worker/trl-demo-train" --per_device_train_batch_size "$per_device" \
    --max_steps $steps --logging_steps 10 --output_dir "$work/$name" \
    >"$work/$name.out" 2>"$work/$name.err"
  local coord_rc=$?
  wait $agent; local agent_rc=$?
  echo "== $name: trl-coord exit $coord_rc, trl-agent exit $agent_rc"
  cat "$work/$name.out"
  if [ $coord_rc != 0 ] || [ $agent_rc != 0 ]; then
    echo "FAIL: $name: non-zero exit"; cat "$work/$name.err" "$work/$name.agent.err"; fail=1
  fi
  grep -q "effective batch size 32 = $per_device per device x $processes processes" "$work/$name.err" \
    || { echo "FAIL: $name: the coordinator did not name the effective batch size"; fail=1; }
  grep -q "$processes rank(s) over Gloo (TCP)" "$work/$name.out" \
    || { echo "FAIL: $name: not $processes ranks over Gloo"; fail=1; }
  for i in 1 2; do
    local left; left=$(testhosts_pids $i)
    if [ -n "$left" ]; then
      echo "FAIL: $name: processes left on ${TESTHOST_NAME[$i]}: $left"; fail=1
    fi
  done
}

run_alone() {
  local name=$1; shift
  "$build/worker/trl-demo-train" --max_steps $steps --logging_steps $steps \
    --output_dir "$work/$name" "$@" >"$work/$name.out" 2>&1 \
    || { echo "FAIL: $name"; cat "$work/$name.out"; fail=1; }
  echo "== $name"; cat "$work/$name.out"
}

run_two_hosts hosts2x2x8 4 8
run_two_hosts hosts2x4x4 8 4
run_alone one32x1 --per_device_train_batch_size 32
run_alone one4x8 --per_device_train_batch_size 4 --gradient_accumulation_steps 8

# The loss fell in the two-host run.
first=$(grep -o "step 10/$steps loss [0-9.]*" "$work/hosts2x2x8.out" | awk '{print $4}')
last=$(grep -o "step $steps/$steps loss [0-9.]*" "$work/hosts2x2x8.out" | awk '{print $4}')
if [ -z "$first" ] || [ -z "$last" ] || [ "$(echo "$last < 0.7 * $first" | bc)" != 1 ]; then
  echo "FAIL: the loss did not fall (step 10: '$first', step $steps: '$last')"; fail=1
fi

# Same weights everywhere, up to the order of float additions.
for name in hosts2x2x8 hosts2x4x4 one4x8; do
  worst=$(paste "$work/one32x1/final_weights.txt" "$work/$name/final_weights.txt" |
    awk 'BEGIN { worst = 0; n = 0 }
         { n++; d = $1 - $2; if (d < 0) d = -d; if (d > worst) worst = d }
         END { if (n != 8705) print "count", n; else printf "%.3g\n", worst }')
  echo "max |w(one32x1) - w($name)| = $worst"
  case "$worst" in
    count*|"") echo "FAIL: $name: wrong number of weights"; fail=1 ;;
    *) [ "$(echo "$worst <= 0.00000005" | sed 's/e/*10^/' | bc -l)" = 1 ] \
         || { echo "FAIL: $name: weights differ by $worst"; fail=1; } ;;
  esac
done

[ $fail = 0 ] && echo "PASS: 2 hosts x 2 and x 4 workers train the same weights as one process with the same effective batch"
exit $fail

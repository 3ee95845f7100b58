#!/usr/bin/env bash
# Benchmark (not a test): restart latency, from a worker's failing exit to
# the start of the last rank of the next generation, on two test hosts x two
# workers, under trl-launch (--max_restarts 1) and under torchrun from
# Debian's python3-torch (--max_restarts 1, its default monitor interval),
# side by side in one run. Prints each run, the medians and the ratio.
#
# Usage: bench/restart_latency.sh [BUILD_DIR] [RUNS]     (root)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../tests/lib/testhosts.sh"  # at top level: its arrays are global
source "$here/lib.sh"
two_host_bench_setup trlbr "$@"

# The worker: in the first attempt rank 3 fails after 0.5 s (writing the
# time of its exit); every rank of a later attempt writes its start time. A
# later attempt is told by the failure mark (the hosts share the file
# system), not by TORCHELASTIC_RESTART_COUNT: torchrun's count is per node,
# and the node without the failure still says 0.
cat >"$work/worker.sh" <<'WORKER'
#!/bin/sh
marks=$1
if [ -f "$marks/fail" ]; then
  date +%s.%N >"$marks/start.$RANK"; exit 0
fi
if [ "$RANK" = 3 ]; then
  sleep 0.5; date +%s.%N >"$marks/fail"; exit 1
fi
exec sleep 60
WORKER
chmod +x "$work/worker.sh"

latency() {  # marks dir -> seconds from the failure to the last start
  local marks=$1
  [ -f "$marks/fail" ] && [ "$(ls "$marks"/start.* 2>/dev/null | wc -l)" = 4 ] || return 1
  echo "$(cat "$marks"/start.* | sort -g | tail -1) - $(cat "$marks/fail")" | bc
}

run_trl() {
  local port=$1 marks="$work/trl-$1"
  mkdir -p "$marks"
  local flags=(--num_machines 2 --num_processes 4 --main_process_ip "$master"
               --main_process_port "$port" --use_cpu --max_restarts 1 --no_python)
  testhosts_exec 2 "$build/agent/trl-agent" --machine_rank 1 "${flags[@]}" >/dev/null 2>&1 &
  local agent=$!
  testhosts_exec 1 "$build/coordinator/trl-coord" start "${flags[@]}" \
    --state_file "$work/state-$port" "$work/worker.sh" "$marks" >/dev/null 2>&1
  local rc=$?
  wait $agent || rc=$?
  [ $rc = 0 ] || { echo "trl-launch run failed ($rc)" >&2; return 1; }
  latency "$marks"
}

run_torchrun() {  # PORT [EXTRA TORCHRUN FLAGS...]
  local port=$1; shift
  local marks="$work/torch-$port"
  mkdir -p "$marks"
  local common=(--nnodes 2 --nproc_per_node 2 --rdzv_backend c10d
                --rdzv_endpoint "$master:$port" --max_restarts 1
                --redirects=1 --tee=1 --no_python "$@")
  testhosts_exec 2 "$torchrun" "${common[@]}" --log_dir "$work/tl-$port-2" \
    "$work/worker.sh" "$marks" >/dev/null 2>&1 &
  local other=$!
  testhosts_exec 1 "$torchrun" "${common[@]}" --rdzv_conf=is_host=1 \
    --log_dir "$work/tl-$port-1" "$work/worker.sh" "$marks" >/dev/null 2>&1
  local rc=$?
  wait $other || rc=$?
  [ $rc = 0 ] || { echo "torchrun run failed ($rc)" >&2; return 1; }
  latency "$marks"
}

: >"$work/trl"; : >"$work/torch"; : >"$work/tuned"
for i in $(seq 1 "$runs"); do
  t=$(run_trl $((33000 + i))) || exit 1; echo "$t" >>"$work/trl"
  u=$(run_torchrun $((34000 + i))) || exit 1; echo "$u" >>"$work/torch"
  v=$(run_torchrun $((36000 + i)) --monitor_interval 0.1) || exit 1
  echo "$v" >>"$work/tuned"
  printf 'run %d: trl-launch %.3f s, torchrun %.3f s, torchrun tuned %.3f s\n' \
    "$i" "$t" "$u" "$v"
done
summarize_against_torchrun "$work/trl" "$work/torch" 100 "$work/tuned" 30

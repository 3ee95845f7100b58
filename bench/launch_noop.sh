#!/usr/bin/env bash
# Benchmark (not a test): a no-op job, two test hosts x two workers
# (`--no_python /bin/true`), from start to every process exited, under
# trl-launch and under torchrun from Debian's python3-torch, side by side in
# one run. Prints each run, the medians and the ratio torchrun / trl-launch,
# then where trl-launch's time went, phase by phase (bench/launch_phases.py,
# from the daemons' own log lines: they run with TRL_LOG_LEVEL=debug, a
# dozen lines a run). With BENCH_RAW set, the phases go to
# BENCH_RAW's directory as launch_phases.json.
#
# Usage: bench/launch_noop.sh [BUILD_DIR] [RUNS]     (root: network namespaces)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../tests/lib/testhosts.sh"  # at top level: its arrays are global
source "$here/lib.sh"
two_host_bench_setup trlbn "$@"


run_trl() {
  local port=$1
  local flags=(--num_machines 2 --num_processes 4 --main_process_ip "$master"
               --main_process_port "$port" --use_cpu --no_python)
  local logs="$work/phases/$port"
  mkdir -p "$logs"
  local t0; t0=$(now)
  local clock0; clock0=$(date +%H:%M:%S.%N)
  TRL_LOG_LEVEL=debug testhosts_exec 2 "$build/agent/trl-agent" \
    --machine_rank 1 "${flags[@]}" >/dev/null 2>"$logs/agent.log" &
  local agent=$!
  TRL_LOG_LEVEL=debug testhosts_exec 1 "$build/coordinator/trl-coord" start \
    "${flags[@]}" /bin/true >/dev/null 2>"$logs/coord.log"
  local rc=$?
  wait $agent || rc=$?
  local t1; t1=$(now)
  printf 't0 %s\nt1 %s\n' "$clock0" "$(date +%H:%M:%S.%N)" >"$logs/times"
  [ $rc = 0 ] || { echo "trl-launch run failed ($rc)" >&2; return 1; }
  echo "$t1 - $t0" | bc
}

run_torchrun() {  # PORT [EXTRA TORCHRUN FLAGS...]
  local port=$1; shift
  local logs="$work/torchrun-$port"
  local common=(--nnodes 2 --nproc_per_node 2 --rdzv_backend c10d
                --rdzv_endpoint "$master:$port" --redirects=1 --tee=1 --no_python "$@")
  local t0; t0=$(now)
  testhosts_exec 2 "$torchrun" "${common[@]}" --log_dir "$logs-2" /bin/true >/dev/null 2>&1 &
  local other=$!
  testhosts_exec 1 "$torchrun" "${common[@]}" --rdzv_conf=is_host=1 --log_dir "$logs-1" /bin/true >/dev/null 2>&1
  local rc=$?
  wait $other || rc=$?
  local t1; t1=$(now)
  [ $rc = 0 ] || { echo "torchrun run failed ($rc)" >&2; return 1; }
  echo "$t1 - $t0" | bc
}


: >"$work/trl"; : >"$work/torch"; : >"$work/tuned"
for i in $(seq 1 "$runs"); do
  # Alternate, so that drift in machine load touches all alike. torchrun
  # twice: its defaults, and its best setting here (a 0.1 s monitor
  # interval instead of 5 s).
  t=$(run_trl $((31000 + i))) || exit 1; echo "$t" >>"$work/trl"
  u=$(run_torchrun $((32000 + i))) || exit 1; echo "$u" >>"$work/torch"
  v=$(run_torchrun $((35000 + i)) --monitor_interval 0.1) || exit 1
  echo "$v" >>"$work/tuned"
  printf 'run %d: trl-launch %.3f s, torchrun %.3f s, torchrun tuned %.3f s\n' \
    "$i" "$t" "$u" "$v"
done
summarize_against_torchrun "$work/trl" "$work/torch" 100 "$work/tuned" 30
phases_json=""
[ -n "${BENCH_RAW:-}" ] && phases_json="$(dirname "$BENCH_RAW")/launch_phases.json"
/usr/bin/python3 "$here/launch_phases.py" "$work/phases" $phases_json

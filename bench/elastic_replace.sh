#!/usr/bin/env bash
# Benchmark (not a test): a lost machine to the next generation running,
# on test hosts x two workers (bench/elastic_worker.py: a Gloo process
# group, timeout 10 s for every launcher, all-reducing every 0.05 s). Once
# every rank of the first generation runs, every process of node02 (its
# launcher and its workers) is killed with SIGKILL, as when the machine
# dies; each worker writes a marker with the time once its process group
# is up and a first all-reduce done. The figure is the time from the kill
# to the marker of the last rank of the next complete generation (all its
# ranks, one world size). Variants, side by side in one run:
#   trl_spare          trl-launch, 3 machines + `trl-agent --spare` on node04
#                      (fixed size; the spare becomes machine 1), --stop_grace 3
#   trl_elastic        trl-launch --num_machines 2:3, no spare, --stop_grace 3
#   torchrun           torchrun --nnodes 2:3, c10d rendezvous, --max_restarts 3,
#                      its defaults (Debian's torch 1.13)
#   torchrun_tuned     the same with --monitor_interval 0.1 and --rdzv_conf
#                      join_timeout=60,last_call_timeout=1,close_timeout=5
#                      (1.13 reads no other rendezvous timeout: its keep-alive
#                      is fixed at 5 s x 3 attempts)
#   trl_spare_tuned    trl-launch with a spare and its best settings here:
#   trl_elastic_tuned  --stop_grace 0.5 --heartbeat_interval 0.25
#                      --heartbeat_misses 3 --lease 1 --restart_backoff 0.01
#   trl_spare_default  trl-launch with a spare, every setting at its default
#                      (the stop grace of 30 s included)
#   trl_spare_frozen   the same, but node02's trl-agent alone is frozen
#                      (SIGSTOP) instead of the machine killed: its workers
#                      run on until its guardian's fence ends them. Also
#                      measured: the overlap, from the birth of the next
#                      generation's first worker (born.* markers, written
#                      before torch is imported) to the end of the last of
#                      node02's old workers; 0 when they ended first.
#   trl_spare_agent_killed  the same, but node02's trl-agent alone is killed
#                      (SIGKILL): its workers die with it (PR_SET_PDEATHSIG),
#                      the coordinator sees its stream end at once.
# The spare variants run only when trl-agent has --spare. Prints each run,
# then one JSON line per variant (median, min, max, runs, ratio to
# trl_spare or, without spares, to trl_elastic); with BENCH_RAW the JSON
# lines go to that file as well (for bench/report.py).
#
# Usage: bench/elastic_replace.sh [BUILD_DIR] [RUNS]     (root; RUNS default 3)
#   BENCH_VARIANTS="torchrun trl_elastic": only these; BENCH_KEEP=1: keep the logs
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../tests/lib/testhosts.sh"  # at top level: its arrays are global
source "$here/../tests/lib/generations.sh"
source "$here/lib.sh"
build=$(cd "${1:-$here/../build}" && pwd)
runs=${2:-3}
testhosts_skip_unless_possible
torchrun=${TORCHRUN:-/usr/bin/torchrun}
python=${TRL_TEST_PYTHON:-/usr/bin/python3}
[ -x "$torchrun" ] || { echo "torchrun not found (apt-get install python3-torch)"; exit 1; }
work=$(mktemp -d)
# BENCH_KEEP=1 keeps the scratch directory (the launchers' logs) and names it.
trap 'testhosts_destroy; if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "logs in $work"; else rm -rf "$work"; fi' EXIT
trap 'exit 143' TERM; trap 'exit 130' INT; trap 'exit 129' HUP  # through EXIT
testhosts_create "trlbe$(( $$ % 10000 ))x" 4
master=${TESTHOST_ADDR[1]}
pg_timeout=10
worker=(--pg_timeout "$pg_timeout")
have_spare=0
"$build/agent/trl-agent" --help 2>&1 | grep -q -- "--spare" && have_spare=1

host_empty() { [ -z "$(testhosts_pids "$1")" ]; }
kill_host() {  # every process of test host $1
  local pid
  for _ in 1 2 3 4 5; do
    for pid in $(testhosts_pids "$1"); do kill -9 "$pid" 2>/dev/null; done
    host_empty "$1" && return 0
    sleep 0.05
  done
  host_empty "$1"
}
clear_hosts() { local i; for i in 1 2 3 4; do kill_host $i; done; }
# freeze_agent_of HOST MARKS: freezes the trl-agent of test host HOST and
# prints its pid; a watcher writes MARKS/old_gone (the time) once every
# other process of that host but its guardian has ended.
freeze_agent_of() {
  local host=$1 marks=$2 p agent="" old=()
  for p in $(testhosts_pids "$host"); do
    case "$(cat /proc/$p/comm 2>/dev/null)" in
      trl-agent) agent=$p ;;
      trl-guardian) ;;
      *) old+=("$p") ;;
    esac
  done
  [ -n "$agent" ] || return 1
  kill -STOP "$agent"
  # A worker that has exited stays a zombie of the frozen agent: ended.
  ( while ! none_runs "${old[@]}"; do sleep 0.01; done; now >"$marks/old_gone" ) \
    >/dev/null 2>&1 &
  echo "$agent"
}
# kill_agent_of HOST: SIGKILL of the trl-agent of test host HOST alone.
kill_agent_of() {
  local p
  for p in $(testhosts_pids "$1"); do
    [ "$(cat /proc/$p/comm 2>/dev/null)" = trl-agent ] && { kill -9 "$p"; return 0; }
  done
  return 1
}
markers() { cat "$1"/start.* 2>/dev/null; }
count_markers() { [ "$(markers "$1" | awk -v t="$2" '$1 > t' | wc -l)" -ge "$3" ]; }
# The time of the last rank of the first complete generation after time
# $2 (world size $3) in marks dir $1: the first $3 markers after $2 must be
# ranks 0..$3-1 of world size $3.
complete_at() {
  markers "$1" | awk -v t="$2" '$1 > t' | sort -g | head -n "$3" |
    awk -v w="$3" '$4 == w { seen[$3] = 1; last = $1 }
                   END { n = 0; for (r in seen) n++; if (n == w) printf "%.6f\n", last; else exit 1 }'
}
all_gone() { local p; for p in "$@"; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
# Whether none of the pids runs (a zombie does not: it has ended).
none_runs() {
  local p state
  for p in "$@"; do
    state=$(awk '{ sub(/.*\) /, ""); print substr($0, 1, 1) }' "/proc/$p/stat" 2>/dev/null)
    [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ] && return 1
  done
  return 0
}

# measure NAME MARKS WORLD_BEFORE WORLD_AFTER PIDS...: kill node02 once
# generation 0 runs on every rank, print the seconds to the next complete
# generation; then end the job (MARKS/done) and clear the hosts.
measure() {
  local name=$1 marks=$2 before=$3 after=$4; shift 4
  local rc=0 killed_at figure frozen=""
  if ! wait_for 120 count_markers "$marks" 0 "$before"; then
    echo "$name: generation 0 did not start ($(markers "$marks" | wc -l) of $before ranks)" >&2
    rc=1
  else
    sleep 2
    killed_at=$(now)
    if [ "${LOSS:-kill}" = freeze_agent ]; then
      frozen=$(freeze_agent_of 2 "$marks") || { echo "$name: no agent on node02" >&2; rc=1; }
    elif [ "${LOSS:-kill}" = kill_agent ]; then
      kill_agent_of 2 || { echo "$name: no agent on node02" >&2; rc=1; }
    else
      kill_host 2 || { echo "$name: node02 not emptied" >&2; rc=1; }
    fi
    if wait_for 180 count_markers "$marks" "$killed_at" "$after" &&
       figure_at=$(complete_at "$marks" "$killed_at" "$after"); then
      figure=$(echo "$figure_at - $killed_at" | bc)
    else
      echo "$name: no complete generation of $after ranks after the kill" >&2
      markers "$marks" >&2; rc=1
    fi
  fi
  if [ -n "$frozen" ]; then
    # The overlap: the old workers' end against the first birth after the
    # freeze; then the agent is thawed.
    wait_for 60 test -s "$marks/old_gone" || echo "$name: node02's old workers outlived 60 s" >&2
    local first_born
    first_born=$(cat "$marks"/born.* 2>/dev/null | awk -v t="$killed_at" '$1 > t' | sort -g | head -1)
    if [ -s "$marks/old_gone" ] && [ -n "$first_born" ]; then
      echo "$(cat "$marks/old_gone") $first_born" |
        awk '{ d = $1 - $2; printf "%.3f\n", (d > 0 ? d : 0) }' >"$marks.overlap"
    fi
    kill -CONT "$frozen" 2>/dev/null
  fi
  touch "$marks/done"
  wait_for 60 all_gone "$@" || echo "$name: the job did not end within 60 s of done" >&2
  clear_hosts
  # The launchers' exit codes (node02's: killed); a job that did not end
  # well after the measurement is said so, and its figure still counts.
  local p codes=""
  for p in "$@"; do wait "$p"; codes="$codes $?"; done
  echo "$name: launchers exited with$codes (node01 last; node02's killed)" >>"$work/exit-codes"
  [ $rc = 0 ] && printf '%.3f\n' "$figure"
  return $rc
}

trl_tuned=(--heartbeat_interval 0.25 --heartbeat_misses 3 --lease 1
           --restart_backoff 0.01)
run_trl() {  # run_trl NAME PORT spare|elastic STOP_GRACE|default [FLAGS...]
  local name=$1 port=$2 kind=$3 grace=$4; shift 4
  local grace_flag=(--stop_grace "$grace")
  [ "$grace" = default ] && grace_flag=()
  local marks="$work/$name-$port"; mkdir -p "$marks"
  local machines=3 after=6
  [ "$kind" = elastic ] && { machines=2:3; after=4; }
  local flags=(--num_machines "$machines" --num_processes 6 --main_process_ip "$master"
               --main_process_port "$port" --use_cpu --max_restarts 3 --python "$python"
               "${grace_flag[@]}" "$@")
  local pids=()
  testhosts_exec 2 "$build/agent/trl-agent" --machine_rank 1 "${flags[@]}" \
    >"$marks.m1.log" 2>&1 & pids+=($!)
  testhosts_exec 3 "$build/agent/trl-agent" --machine_rank 2 "${flags[@]}" \
    >"$marks.m2.log" 2>&1 & pids+=($!)
  if [ "$kind" = spare ]; then
    testhosts_exec 4 "$build/agent/trl-agent" --spare "${flags[@]}" \
      >"$marks.spare.log" 2>&1 & pids+=($!)
  fi
  local extra=()
  [ "$kind" = elastic ] && extra=(--elastic_wait 30)
  testhosts_exec 1 "$build/coordinator/trl-coord" start "${flags[@]}" "${extra[@]}" \
    --state_file "$work/state-$port" "$here/elastic_worker.py" "$marks" "${worker[@]}" \
    >"$marks.coord.log" 2>&1 & pids+=($!)
  measure "$name" "$marks" 6 "$after" "${pids[@]}"
}

run_torchrun() {  # run_torchrun NAME PORT [TORCHRUN FLAGS...]
  local name=$1 port=$2; shift 2
  local marks="$work/$name-$port"; mkdir -p "$marks"
  local common=(--nnodes 2:3 --nproc_per_node 2 --rdzv_backend c10d
                --rdzv_endpoint "$master:$port" --max_restarts 3
                --redirects=1 --tee=1 "$@")
  # Gloo would take the address the hostname resolves to (127.0.1.1 on the
  # test hosts, as on Debian): each node names its interface, as trl-launch
  # does for its workers.
  local pids=() i
  for i in 3 2; do
    testhosts_exec $i env GLOO_SOCKET_IFNAME="${TESTHOST_IF[$i]}" "$torchrun" "${common[@]}" --log_dir "$marks.tl$i" \
      "$here/elastic_worker.py" "$marks" "${worker[@]}" >"$marks.n$i.log" 2>&1 & pids+=($!)
  done
  # is_host: node01 owns the endpoint (see /work/shared/TESTHOSTS.md); with
  # tuned flags the --rdzv_conf of node01 carries both.
  local conf="is_host=1" a rest=()
  for a in "${common[@]}"; do
    case "$a" in --rdzv_conf=*) conf="$conf,${a#--rdzv_conf=}" ;; *) rest+=("$a") ;; esac
  done
  testhosts_exec 1 env GLOO_SOCKET_IFNAME="${TESTHOST_IF[1]}" "$torchrun" "${rest[@]}" --rdzv_conf="$conf" --log_dir "$marks.tl1" \
    "$here/elastic_worker.py" "$marks" "${worker[@]}" >"$marks.n1.log" 2>&1 & pids+=($!)
  measure "$name" "$marks" 6 4 "${pids[@]}"
}

variants=()
[ $have_spare = 1 ] && variants+=(trl_spare)
variants+=(trl_elastic torchrun torchrun_tuned)
[ $have_spare = 1 ] && variants+=(trl_spare_tuned)
variants+=(trl_elastic_tuned)
[ $have_spare = 1 ] && variants+=(trl_spare_default trl_spare_frozen trl_spare_agent_killed)
[ $have_spare = 1 ] || echo "trl-agent has no --spare: the spare variants are not run"
# BENCH_VARIANTS="a b": only these.
[ -n "${BENCH_VARIANTS:-}" ] && read -r -a variants <<<"$BENCH_VARIANTS"
for v in "${variants[@]}"; do : >"$work/$v"; done
port=37000
for i in $(seq 1 "$runs"); do
  line="run $i:"
  for v in "${variants[@]}"; do
    port=$((port + 10))
    case $v in
      trl_spare) t=$(run_trl "$v" $port spare 3) ;;
      trl_elastic) t=$(run_trl "$v" $port elastic 3) ;;
      trl_spare_tuned) t=$(run_trl "$v" $port spare 0.5 "${trl_tuned[@]}") ;;
      trl_elastic_tuned) t=$(run_trl "$v" $port elastic 0.5 "${trl_tuned[@]}") ;;
      trl_spare_default) t=$(run_trl "$v" $port spare default) ;;
      trl_spare_frozen) t=$(LOSS=freeze_agent run_trl "$v" $port spare default) ;;
      trl_spare_agent_killed) t=$(LOSS=kill_agent run_trl "$v" $port spare default) ;;
      torchrun) t=$(run_torchrun "$v" $port) ;;
      torchrun_tuned) t=$(run_torchrun "$v" $port --monitor_interval 0.1 \
        --rdzv_conf=join_timeout=60,last_call_timeout=1,close_timeout=5) ;;
    esac
    if [ -n "$t" ]; then echo "$t" >>"$work/$v"; line="$line $v $t s,"
    else line="$line $v failed,"; fi
    if [ -s "$work/$v-$port.overlap" ]; then
      cat "$work/$v-$port.overlap" >>"$work/$v.overlaps"
      line="$line overlap $(cat "$work/$v-$port.overlap") s,"
    fi
  done
  echo "${line%,}"
done

base=trl_spare
[ $have_spare = 1 ] || base=trl_elastic
base_median=""
[ -s "$work/$base" ] && base_median=$(median <"$work/$base")
: >"$work/json"
for v in "${variants[@]}"; do
  if [ ! -s "$work/$v" ]; then
    printf '{"bench": "elastic_replace", "variant": "%s", "runs": 0}\n' "$v" >>"$work/json"
    continue
  fi
  m=$(median <"$work/$v")
  overlap=""
  [ -s "$work/$v.overlaps" ] &&
    overlap=$(printf ', "overlap_max_s": %.3f, "overlaps_s": [%s]' \
      "$(sort -g "$work/$v.overlaps" | tail -1)" "$(paste -sd, "$work/$v.overlaps")")
  printf '{"bench": "elastic_replace", "variant": "%s", "median_s": %.3f, "min_s": %.3f, "max_s": %.3f, "runs_s": [%s], "ratio_to_%s": %s%s}\n' \
    "$v" "$m" "$(sort -g "$work/$v" | head -1)" "$(sort -g "$work/$v" | tail -1)" \
    "$(paste -sd, "$work/$v")" "$base" \
    "$([ -n "$base_median" ] && printf '%.2f' "$(echo "$m / $base_median" | bc -l)" || echo null)" "$overlap" >>"$work/json"
done
cat "$work/exit-codes"
cat "$work/json"
[ -n "${BENCH_RAW:-}" ] && cp "$work/json" "$BENCH_RAW"
exit 0

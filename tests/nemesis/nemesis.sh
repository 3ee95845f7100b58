#!/usr/bin/env bash
# The nemesis suite (issue 17): real jobs on three test hosts (node01 runs
# trl-coord start and its local agent, node02 and node03 a trl-agent; two
# workers each), one after another for --seconds, while faults drawn from a
# seeded PRNG hit them:
#   stop_agent_short / stop_agent_long   SIGSTOP, then SIGCONT, of an agent,
#                                        for less / more than the heartbeat
#                                        timeout (0.3 s x 3) and the lease
#   stop_coord_short / stop_coord_long   the same for the coordinator
#   kill_agent                           SIGKILL of an agent, a new one on
#                                        the same host 0.1-4 s later
#   freeze_kill_agent                    the same, of an agent frozen
#                                        (SIGSTOP) 0.1-3 s before
#   kill_coord                           SIGKILL of the coordinator, started
#                                        again with the same --state_file
#                                        0.1-4 s later
#   partition                            a host's link down, then up
#   worker_crash                         a worker exits 1
#   worker_flood                         a worker prints a 5 MiB line without
#                                        a newline, then 100000 lines
# Workers (tests/nemesis/worker.sh) write start/end records; a watcher
# notes when each worker pid was last seen alive; after each job nemesis.sh
# records what is left on the hosts, and check.py checks invariants I1-I6
# (see there). Freezes and partitions heal in the background, so faults
# overlap. Every other job (drawn) gets one more fault in its last second,
# when a worker of its final generation has exited 0. The fault sequence depends only on the seed: a failing run is
# repeated with the same --seed and --seconds.
#
# Usage: nemesis.sh BUILD_DIR [--seed N] [--seconds S] [--window S] [--gap S] [--work S]
#   --seconds  run jobs for about this long (default 180)
#   --window   inject faults during the first S seconds of each job (15)
#   --gap      at most S seconds (a whole number) between two faults (3)
#   --work     each generation's workers run S seconds, then exit 0 (8)
# Exit: 0 all invariants held, 1 a violation, 77 skipped (no root/netns).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR [--seed N] [--seconds S] [--window S] [--gap S] [--work S]}" && pwd)
shift
seed=1 seconds=180 window=15 gap=3 worker_seconds=8
while [ $# -gt 0 ]; do
  case $1 in
    --seed) seed=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --gap) gap=$2; shift 2 ;;
    --work) worker_seconds=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
source "$here/../lib/testhosts.sh"
source "$here/../lib/generations.sh"
testhosts_skip_unless_possible

work=$(mktemp -d /tmp/trl-nemesis.XXXXXX)
port=29400
job_limit=$(( window + 60 ))  # I6: a job ends within its fault window + 60 s
declare -a daemon_pids=()
watcher=""
verdict=FAIL
cleanup() {
  [ -n "$watcher" ] && kill "$watcher" 2>/dev/null
  for pid in "${heals[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${daemon_pids[@]}"; do kill -CONT "$pid" 2>/dev/null; kill -9 "$pid" 2>/dev/null; done
  testhosts_destroy
  if [ "$verdict" = PASS ]; then rm -rf "$work"; else echo "records kept in $work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
testhosts_create "trlnm$(( $$ % 10000 ))x" 3

flags=(--num_machines 3 --num_processes 6 --main_process_ip "${TESTHOST_ADDR[1]}"
       --main_process_port $port --use_cpu --max_restarts 50 --stop_grace 2
       --heartbeat_interval 0.3 --lease 1.5 --rejoin_timeout 30 --reconnect_timeout 30
       --restart_backoff_max 1)

RANDOM=$seed
R=0
rand() { R=$(( RANDOM % $1 )); }  # never in a subshell: that would not advance $RANDOM
t0=$EPOCHREALTIME
now() { printf '%.1f' "$(echo "$EPOCHREALTIME - $t0" | bc)"; }

# start_daemon NAME ROLE HOST CMD...: runs CMD on test host HOST; records
# "daemon" and, once it ended, "exit" lines in $job/daemons. Sets DPID.
start_daemon() {
  local name=$1 role=$2 i=$3; shift 3
  (
    # Not testhosts_exec (a function: $! would be a subshell): this chain
    # execs, so $! is the daemon itself.
    ip netns exec "${TESTHOST_PREFIX}$i" unshare --uts sh -c 'hostname "$0"; exec "$@"' \
      "${TESTHOST_NAME[$i]}" "$@" >"$job/$name.out" 2>"$job/$name.err" &
    pid=$!
    echo "daemon $name $role ${TESTHOST_NAME[$i]} $pid $EPOCHREALTIME" >>"$job/daemons"
    echo "$pid" >"$job/$name.pid"
    wait "$pid"; rc=$?
    echo "exit $name $pid $rc $EPOCHREALTIME" >>"$job/daemons"
  ) 2>/dev/null &
  wait_for 5 test -s "$job/$name.pid"
  DPID=$(<"$job/$name.pid")
  is_daemon() { grep -q '^trl-' "/proc/$DPID/comm" 2>/dev/null || ended "$name"; }
  wait_for 5 is_daemon || echo "    $name (pid $DPID) is not a trl daemon after 5 s"
  daemon_pids+=("$DPID")
}
ended() { grep -q "^exit $1 " "$job/daemons"; }
exit_code() { awk -v n="$1" '$1 == "exit" && $2 == n {print $4}' "$job/daemons"; }

declare -A cur_name=() cur_pid=() instances=()
start_agent() {  # HOST (2 or 3)
  local i=$1
  instances[a$i]=$(( ${instances[a$i]:-0} + 1 ))
  local name="agent$i.${instances[a$i]}"
  start_daemon "$name" agent "$i" "$build/agent/trl-agent" --machine_rank $(( i - 1 )) "${flags[@]}"
  cur_name[$i]=$name cur_pid[$i]=$DPID
}
start_coord() {
  instances[c]=$(( ${instances[c]:-0} + 1 ))
  local name="coord${instances[c]}"
  start_daemon "$name" coord 1 "$build/coordinator/trl-coord" start "${flags[@]}" \
    --state_file "$job/state" "$here/worker.sh" "$job" "$worker_seconds"
  cur_name[1]=$name cur_pid[1]=$DPID
}
note_kill() { echo "killed ${cur_name[$1]} ${cur_pid[$1]} $EPOCHREALTIME" >>"$job/daemons"; }

# The watcher: for every worker that wrote a start record, the last time its
# pid (same start time, not a zombie) was seen alive, written as
# "gone PID LAST_ALIVE FIRST_GONE" once it is gone.
watch_workers() {
  local d=$1 n=0 l kind pid t stat stop
  local -a new f
  local -A last=() born=()
  while :; do
    stop=0; [ -e "$d/watch.stop" ] && stop=1
    mapfile -s $n -t new <"$d/records"
    n=$(( n + ${#new[@]} ))
    for l in "${new[@]}"; do
      read -r kind _ _ pid _ t _ <<<"$l"
      [ "$kind" = start ] || continue
      last[$pid]=$t born[$pid]=""
    done
    for pid in "${!last[@]}"; do
      t=$EPOCHREALTIME
      if read -r stat 2>/dev/null <"/proc/$pid/stat"; then
        read -r -a f <<<"${stat##*) }"
        [ -z "${born[$pid]}" ] && born[$pid]=${f[19]}
        if [ "${f[0]}" != Z ] && [ "${f[19]}" = "${born[$pid]}" ]; then
          last[$pid]=$t; continue
        fi
      fi
      echo "gone $pid ${last[$pid]} $t" >>"$d/gone"
      unset "last[$pid]" "born[$pid]"
    done
    [ $stop = 1 ] && return 0
    sleep 0.1
  done
}

declare -A fault_count=()
nfaults=0
fault() {  # KIND TARGET DETAIL...
  nfaults=$(( nfaults + 1 ))
  fault_count[$1]=$(( ${fault_count[$1]:-0} + 1 ))
  echo "[+$(now) s] job $jobno fault $nfaults: $*" | tee -a "$job/faults"
}

# Heals (SIGCONT, link up) run in the background, so that faults overlap: a
# kill or a partition may come while another process is frozen.
declare -a heals=()
background() { "$@" & heals+=($!); }
wait_heals() {
  local p
  for p in "${heals[@]}"; do wait "$p"; done
  heals=()
}

# One fault, drawn from $RANDOM. Freezes and partitions heal in the
# background; a killed daemon is replaced before it returns.
inject() {  # [KIND]: else drawn
  local kind i pid d
  if [ $# -gt 0 ]; then kind=$1; else rand 10; kind=$R; fi
  case $kind in
    0|1)  # freeze an agent
      rand 2; i=$(( R + 2 )); pid=${cur_pid[$i]}
      if [ $kind = 0 ]; then rand 4; d=0.$(( R + 2 )); k=stop_agent_short; else rand 4; d=$(( R + 2 )); k=stop_agent_long; fi
      ended "${cur_name[$i]}" && { fault "$k" "${TESTHOST_NAME[$i]}" "(skipped: ${cur_name[$i]} already ended)"; return; }
      fault "$k" "${TESTHOST_NAME[$i]}" "SIGSTOP ${cur_name[$i]} pid $pid for $d s"
      kill -STOP "$pid" 2>/dev/null; background sh -c 'sleep "$1"; kill -CONT "$2" 2>/dev/null' - "$d" "$pid" ;;
    2|3)  # freeze the coordinator
      pid=${cur_pid[1]}
      if [ $kind = 2 ]; then rand 4; d=0.$(( R + 2 )); k=stop_coord_short; else rand 3; d=$(( R + 2 )); k=stop_coord_long; fi
      ended "${cur_name[1]}" && { fault "$k" node01 "(skipped: ${cur_name[1]} already ended)"; return; }
      fault "$k" node01 "SIGSTOP ${cur_name[1]} pid $pid for $d s"
      kill -STOP "$pid" 2>/dev/null; background sh -c 'sleep "$1"; kill -CONT "$2" 2>/dev/null' - "$d" "$pid" ;;
    4|9)  # kill an agent (9: frozen first), start a new one on the same host
      rand 2; i=$(( R + 2 )); rand 40; d=$(( R / 10 )).$(( R % 10 + 1 ))
      k=kill_agent; [ $kind = 9 ] && k=freeze_kill_agent
      ended "${cur_name[$i]}" && { fault $k "${TESTHOST_NAME[$i]}" "(skipped: ${cur_name[$i]} already ended)"; return; }
      if [ $kind = 9 ]; then
        rand 30; local f=$(( R / 10 )).$(( R % 10 + 1 ))
        fault $k "${TESTHOST_NAME[$i]}" "SIGSTOP ${cur_name[$i]} pid ${cur_pid[$i]}, SIGKILL after $f s, a new agent $d s later"
        kill -STOP "${cur_pid[$i]}" 2>/dev/null; sleep "$f"
      else
        fault $k "${TESTHOST_NAME[$i]}" "SIGKILL ${cur_name[$i]} pid ${cur_pid[$i]}, a new agent after $d s"
      fi
      kill -9 "${cur_pid[$i]}" 2>/dev/null; note_kill "$i"
      wait_for 5 ended "${cur_name[$i]}"
      sleep "$d"
      if ended "${cur_name[1]}"; then
        echo "    the job had ended: no new agent"
      else
        start_agent "$i"
      fi ;;
    5)  # kill the coordinator, start it again on the same state file
      rand 40; d=$(( R / 10 )).$(( R % 10 + 1))
      ended "${cur_name[1]}" && { fault kill_coord node01 "(skipped: ${cur_name[1]} already ended)"; return; }
      fault kill_coord node01 "SIGKILL ${cur_name[1]} pid ${cur_pid[1]}, again after $d s"
      kill -9 "${cur_pid[1]}" 2>/dev/null; note_kill 1
      wait_for 5 ended "${cur_name[1]}"
      sleep "$d"
      if [ "$(exit_code "${cur_name[1]}")" != 137 ]; then
        echo "    ${cur_name[1]} had exited by itself ($(exit_code "${cur_name[1]}")): not started again"
      else
        start_coord
      fi ;;
    6)  # partition a host
      rand 3; i=$(( R + 1 )); rand 46; d=$(( R / 10 + 0 )).$(( R % 10 ))
      [ "$d" = 0.0 ] && d=0.5
      fault partition "${TESTHOST_NAME[$i]}" "link ${TESTHOST_IF[$i]} down for $d s"
      ip -n "${TESTHOST_PREFIX}$i" link set "${TESTHOST_IF[$i]}" down
      background sh -c 'sleep "$1"; ip -n "$2" link set "$3" up' - "$d" "${TESTHOST_PREFIX}$i" "${TESTHOST_IF[$i]}" ;;
    7)  # a worker crashes
      rand 6
      fault worker_crash "rank $R" "the next worker of rank $R exits 1"
      touch "$job/ctl/crash.$R" ;;
    8)  # a worker floods its output
      rand 6
      fault worker_flood "rank $R" "a 5 MiB line without newline, then 100000 lines"
      touch "$job/ctl/flood.$R" ;;
  esac
}

all_daemons_ended() {
  local n
  for n in $(awk '$1 == "daemon" {print $2}' "$job/daemons"); do ended "$n" || return 1; done
}
hosts_empty() {
  local i
  for i in 1 2 3; do [ -z "$(testhosts_pids $i)" ] || return 1; done
}

# After the job: what is left (I3), then a clean slate for the next job.
record_leftovers() {
  local i pid
  : >"$job/after"
  wait_for 3 hosts_empty
  for i in 1 2 3; do
    for pid in $(testhosts_pids $i); do
      echo "proc ${TESTHOST_NAME[$i]} $pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-200)" >>"$job/after"
    done
  done
  for pid in $(awk '$1 == "start" {print $4}' "$job/records"); do
    if grep -qa nemesis/worker.sh "/proc/$pid/cmdline" 2>/dev/null &&
       ! grep -q ') Z ' "/proc/$pid/stat" 2>/dev/null; then
      echo "worker $pid $(tr '\0' ' ' <"/proc/$pid/cmdline")" >>"$job/after"
    fi
  done
  for proto in t u; do
    if ip netns exec "${TESTHOST_PREFIX}1" ss -Hl${proto}n "sport = :$port" | grep -q .; then
      echo "port node01 $([ $proto = t ] && echo tcp || echo udp) $port" >>"$job/after"
    fi
  done
  for i in 1 2 3; do
    for pid in $(testhosts_pids $i); do kill -CONT "$pid"; kill -9 "$pid"; done 2>/dev/null
  done
}

run_job() {
  job="$work/job$jobno"
  mkdir -p "$job/ctl"
  : >"$job/records"; : >"$job/daemons"; : >"$job/gone"
  cur_name=() cur_pid=() instances=()
  local start=$EPOCHREALTIME startS=${EPOCHREALTIME%.*}
  echo "== job $jobno at +$(now) s"
  watch_workers "$job" &
  watcher=$!
  start_agent 2
  start_agent 3
  start_coord
  gen0_up() { [ "$(grep -c '^start 0 ' "$job/records")" -ge 6 ]; }
  wait_for 30 gen0_up || echo "    generation 0 did not start within 30 s"
  while [ "${EPOCHREALTIME%.*}" -lt $(( startS + window )) ] && ! ended "${cur_name[1]}"; do
    rand $(( gap * 10 )); sleep "$(( R / 10 )).$(( R % 10 ))5"
    ended "${cur_name[1]}" && break
    inject
  done
  wait_heals
  # Every other job (drawn), one more fault in the last second: as soon as a
  # worker of the final generation exits 0, the others about to.
  rand 2
  if [ $R = 1 ] && ! ended "${cur_name[1]}"; then
    local zeros; zeros=$(grep -c '^end .* 0$' "$job/records")
    more_zeros() { [ "$(grep -c '^end .* 0$' "$job/records")" -gt "$zeros" ] || ended "${cur_name[1]}"; }
    local -a late=(1 3 4 5 6 9)
    rand 6
    if wait_for $(( worker_seconds + 20 )) more_zeros && ! ended "${cur_name[1]}"; then
      echo "    a worker exited 0: a fault in the job's last second"
      inject "${late[$R]}"
      wait_heals
    fi
  fi
  echo "    faults over (and healed) at +$(now) s; waiting for the job to end"
  local deadline=$(( startS + job_limit ))
  until all_daemons_ended; do
    if [ "${EPOCHREALTIME%.*}" -ge $deadline ]; then
      for n in $(awk '$1 == "daemon" {print $2}' "$job/daemons"); do
        ended "$n" && continue
        pid=$(<"$job/$n.pid")
        echo "hung $n $pid $EPOCHREALTIME" >>"$job/daemons"
        echo "    $n (pid $pid) hung: killed"
        kill -CONT "$pid"; kill -9 "$pid"
      done
      wait_for 5 all_daemons_ended
      break
    fi
    sleep 0.2
  done
  local end=$EPOCHREALTIME
  record_leftovers
  touch "$job/watch.stop"; wait "$watcher"; watcher=""
  echo "job $start $end $job_limit 6" >"$job/job"
  echo "    job exit $(exit_code "${cur_name[1]}"), $(grep -c '^start ' "$job/records") worker starts, $(awk '$1 == "start" {print $2}' "$job/records" | sort -un | wc -l) generation(s), $(printf '%.1f' "$(echo "$end - $start" | bc)") s"
  python3 "$here/check.py" "$job" | tee "$job/check"
  return "${PIPESTATUS[0]}"
}

echo "nemesis: seed $seed, ${seconds} s, fault window $window s per job, gap up to $gap s, workers run $worker_seconds s, job limit $job_limit s, work dir $work"
jobno=0 failed=0 first=""
while :; do
  jobno=$(( jobno + 1 ))
  run_job || { failed=1; first=$(grep -m1 VIOLATION "$job/check"); break; }
  [ $(( ${EPOCHREALTIME%.*} + window + 10 )) -lt $(( ${t0%.*} + seconds )) ] || break
done

echo "== summary (seed $seed, --seconds $seconds, --window $window, --gap $gap, --work $worker_seconds)"
echo "jobs run: $jobno in $(now) s"
echo -n "faults injected: $nfaults:"
for k in $(printf '%s\n' "${!fault_count[@]}" | sort); do echo -n " $k=${fault_count[$k]}"; done
echo
echo "invariants checked after each job: I1 one generation at a time, I2 ranks 0..5 once with one WORLD_SIZE,"
echo "  I3 nothing left (processes, worker pids, port $port), I4 generations only increase per host,"
echo "  I5 exit code matches the workers, I6 job and daemons ended within $job_limit s"
if [ $failed = 0 ]; then
  verdict=PASS
  echo "PASS"
else
  echo "FAIL (job $jobno): $first"
  echo "reproduce: $0 $build --seed $seed --seconds $seconds --window $window --gap $gap --work $worker_seconds"
fi
exit $failed

#!/usr/bin/env bash
# The nemesis suite (issue 17): real jobs on three test hosts (node01 runs
# trl-coord start and its local agent, machine ranks 1 and 2 a trl-agent
# each, on node02 and node03 at first; node04 is free; two workers each),
# one after another for --seconds, while faults drawn from a seeded PRNG hit
# them. Jobs take turns in four shapes (issue 34), by their number: fixed
# size (--num_machines 3); fixed size with a hot spare (trl-agent --spare on
# node04, which may take a lost machine's place; its replacements are spares
# too, and a machine's own agent started again while the spare holds its
# place is made a spare); elastic (--num_machines 2:3: a generation runs on
# 2 or 3 machines, world size 4 or 6); these three with --max_restarts 50;
# and the default budget, --max_restarts 0, with a spare, whose one fault
# comes in its last second. Each test host has a PID namespace of its own,
# as a machine has. Every other job has mixed leases:
# one machine's agent --lease 4, the other daemons 1.5 (a handover must wait
# for the lost machine's own lease). node02-node04 reach the coordinator through a userspace relay
# (tests/lib/tap_relay.py: a TAP device in node01 and one in the host, a /29
# of their own, a host route to the coordinator's address through it), so
# that links can lose and delay frames while they stay up. Every daemon runs
# under an LD_PRELOAD shim (tests/lib/clock_shift.c) that can shift its wall
# clock; the coordinator's --state_file is on a 64 KiB tmpfs and every
# daemon's --log_dir on a 256 KiB one. The faults:
#   stop_agent_short / stop_agent_long   SIGSTOP, then SIGCONT, of an agent,
#                                        for less / more than the heartbeat
#                                        timeout (0.3 s x 3) and the lease
#   freeze_past_lease                    SIGSTOP of an agent for its own
#                                        lease + the stop grace (2 s) + 2 s
#                                        + 0.5-2.5 s (6-7.5 s, or 8.5-10.5 s
#                                        at --lease 4), then SIGCONT: its
#                                        workers must be gone (its guardian
#                                        fences them) before another agent
#                                        runs their ranks (I1)
#   stop_coord_short / stop_coord_long   the same for the coordinator
#   kill_agent                           SIGKILL of an agent, a new one on
#                                        the same host 0.1-4 s later
#   freeze_kill_agent                    the same, of an agent frozen
#                                        (SIGSTOP) 0.1-3 s before
#   kill_coord                           SIGKILL of the coordinator, started
#                                        again with the same --state_file
#                                        0.1-4 s later
#   partition                            a host's links down, then up
#   silent_partition                     the relay drops every frame between
#                                        node01 and a host for 0.5-6 s (the
#                                        links stay up; nothing errors)
#   lossy                                the relay drops 20-50 % of the frames
#                                        to, from or both ways for 1-5 s
#   delay                                the relay holds every frame 0.2-0.8 s
#                                        (one way or both) for 1-5 s
#   disk_full                            the state file's and the logs' tmpfs
#                                        filled for 0.5-5 s, then freed (a
#                                        generation that cannot be kept must
#                                        not start: the coordinator exits 1
#                                        naming the file)
#   clock_shift                          one daemon's wall clock (the
#                                        coordinator's or a machine's agent's)
#                                        +-30 s or +-1 h for 2-10 s, then back
#   cross_host_takeover                  machine rank r moves to the free
#                                        host: its agent is SIGKILLed (or
#                                        frozen, a replacement started on the
#                                        other host once the coordinator holds
#                                        it lost, and SIGKILLed 0.3-2.5 s
#                                        after); the coordinator may hand the
#                                        ranks over only after the old
#                                        agent's lease and stop grace. In a
#                                        job with a spare (no free host): the
#                                        agent SIGKILLed, then the spare
#                                        0.3-2.5 s later, before the
#                                        handover; a new agent for each on
#                                        its host
#   worker_crash                         a worker exits 1
#   worker_flood                         a worker prints a 5 MiB line without
#                                        a newline, then 100000 lines
#   unhealthy                            an agent's host fails its health
#                                        check (every daemon runs
#                                        --health_check, a file per host,
#                                        every 0.5 s) for 1-6 s: the host is
#                                        cordoned, a spare takes its place,
#                                        an elastic job runs without it, a
#                                        fixed-size one waits; then it
#                                        passes and the cordon ends by itself
# Kinds are drawn from a bag (a seeded shuffle of every kind, refilled when
# empty), so each kind comes once in every 18 faults. The agent a fault hits
# is drawn among machine ranks 1 and 2 and, in a job with a spare, the
# spare's.
# Workers (tests/nemesis/worker.sh) write start/end records and, told to
# stop, save a checkpoint for 0.3-1.0 s first (a stop record); a watcher
# notes when each worker pid was last seen alive; after each job nemesis.sh
# records what is left on the hosts, and check.py checks invariants I1-I8
# (see there). Freezes, partitions, relay faults, full disks and shifted
# clocks heal in the background, so faults overlap. Every other job (drawn)
# gets one more fault in its last second, when a worker of its final
# generation has exited 0. The fault sequence depends only on the seed: a
# failing run is repeated with the same --seed and --seconds.
#
# Usage: nemesis.sh BUILD_DIR [--seed N] [--seconds S] [--window S] [--gap S] [--work S] [--only K,...] [--shapes S,...] [--lease S]
#   --seconds  run jobs for about this long (default 180)
#   --window   inject faults during the first S seconds of each job (15)
#   --gap      at most S seconds (a whole number) between two faults (3)
#   --work     each generation's workers run S seconds, then exit 0 (8)
#   --only     draw only these fault kinds (comma-separated)
#   --shapes   jobs take turns in these shapes only (comma-separated, of
#              fixed, spare, elastic, budget0; default all four)
#   --lease    every agent's --lease, in every job (default 1.5 s, and 4 s
#              for one machine's agent in every other job)
# NEMESIS_KEEP=1 keeps the records of a run that passed too.
# Exit: 0 all invariants held, 1 a violation (or the nemesis itself broke),
# 77 skipped (no root/netns).
#
# Teeth (scripts/mutants.sh runs the "nemesis" mutants it lists):
#  - CAUGHT: "if (live_ranks_ > 0) return;" in MaybeFinish
#    (coordinator/job/state_machine.cc) weakened to "... && phase_ ==
#    JobPhase::kRunning" (the next generation starts before the old one's
#    workers have exited), mutant restart-before-old-generation-ended-nemesis:
#      nemesis.sh BUILD --seed 1 --seconds 20 --window 4 --only worker_crash
#    fails 5 of 5 runs (about 16 s each; the unchanged build passes 4 of 4;
#    scripts/mutants.sh restart-before-old-generation-ended-nemesis: 33 s
#    with the rebuild, after a 16 s baseline), check.py printing 15 times,
#    first
#      VIOLATION I7: generation 0 rank 2 (pid 6818 on node02) was told to
#      stop at 1796307177.701 and asked 0.9 s to save its checkpoint, but
#      was gone by 1796307177.804 without an end record; no daemon of its
#      machine (agent1.1) started, was killed, exited or hung meanwhile
#    Before, workers ended on SIGTERM within milliseconds, so the early
#    restart found them gone. Now they take 0.3-1.0 s (a checkpoint), the
#    coordinator restarted 0.1 s (then the first backoff; the first restart
#    has none since 2026-12-06) after the crash, and
#    each agent, handed the new generation, SIGKILLs what is left of the old
#    one before it starts the new workers: the checkpoints are lost. I1 does
#    not see it (the old workers are gone before the new ones start on each
#    host; across hosts a few ms apart, under the watcher's 0.1 s); I7 does.
#  - CAUGHT since each test host has its own PID namespace (was NOT
#    CAUGHT before): JobMembership::ReadyToStart ending in "return true;"
#    (a spare gets a lost machine's ranks at once), mutant
#    replacement-before-old-lease-nemesis:
#      nemesis.sh BUILD --seed 1 --seconds 25 --window 8 --shapes spare
#        --lease 4 --only freeze_past_lease
#    fails 3 of 3 runs (the unchanged build passes 2 of 2), with
#      VIOLATION I1: generation 0 rank 2 (pid 4664 on node02) alive at
#      1796659213.265 (last seen alive by the watcher), after generation 1
#      started at 1796659211.076
#    (the frozen agent's guardian fences its workers 0.5 s after its 4 s
#    lease; the mutant hands its ranks to the spare about 2 s before). With
#    the default 1.5 s leases the overlap is within the other ranks'
#    checkpoint time, and --only cross_host_takeover or --lease 1.5 caught
#    it in 1 of 2 runs (CI missed it once). While the hosts shared one PID
#    namespace, the replacement agent's sweep of stale workers
#    (agent/cleanup/stale_workers.cc: processes with the same
#    TRL_LAUNCH_COORDINATOR and TRL_MACHINE_RANK), which on a real cluster
#    sees only its own host, killed the frozen old agent's workers on the
#    other test host before it took the ranks, and hid it.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR [--seed N] [--seconds S] [--window S] [--gap S] [--work S] [--only K,...] [--shapes S,...] [--lease S]}" && pwd)
shift
seed=1 seconds=180 window=15 gap=3 worker_seconds=8 only="" shapes=fixed,spare,elastic,budget0
agent_lease=""
while [ $# -gt 0 ]; do
  case $1 in
    --seed) seed=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --gap) gap=$2; shift 2 ;;
    --work) worker_seconds=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --lease) agent_lease=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
all_kinds=(stop_agent_short stop_agent_long stop_coord_short stop_coord_long kill_agent
           freeze_kill_agent kill_coord partition silent_partition lossy delay disk_full
           clock_shift cross_host_takeover worker_crash worker_flood freeze_past_lease unhealthy)
# Faults in a job's last second (see run_job).
late_kinds=(stop_agent_long stop_coord_long kill_agent kill_coord partition freeze_kill_agent
            silent_partition disk_full cross_host_takeover freeze_past_lease)
if [ -n "$only" ]; then
  kinds=() late=()
  for k in ${only//,/ }; do
    printf '%s\n' "${all_kinds[@]}" | grep -qxF "$k" || { echo "unknown fault kind: $k" >&2; exit 2; }
    kinds+=("$k")
    printf '%s\n' "${late_kinds[@]}" | grep -qxF "$k" && late+=("$k")
  done
  late_kinds=("${late[@]}")
else
  kinds=("${all_kinds[@]}")
fi
source "$here/../lib/testhosts.sh"
source "$here/../lib/generations.sh"
testhosts_skip_unless_possible

work=$(mktemp -d /tmp/trl-nemesis.XXXXXX)
port=29400
job_limit=$(( window + 60 ))  # I6: a job ends within its fault window + 60 s
stop_grace=2
declare -a daemon_pids=() heals=()
watcher="" poller="" relay_pid="" killer="" verdict=FAIL
cleanup() {
  [ -n "$watcher" ] && kill "$watcher" 2>/dev/null
  [ -n "$poller" ] && kill "$poller" 2>/dev/null
  for pid in "${heals[@]}"; do kill "$pid" 2>/dev/null; done
  [ -n "${killer:-}" ] && kill "$killer" 2>/dev/null
  for pid in "${daemon_pids[@]}"; do kill -CONT "$pid" 2>/dev/null; kill -9 "$pid" 2>/dev/null; done
  if [ -n "$relay_pid" ]; then kill "$relay_pid" 2>/dev/null; wait "$relay_pid" 2>/dev/null; fi
  testhosts_destroy
  for fs in "$work/statefs" "$work/logfs"; do mountpoint -q "$fs" && umount -l "$fs"; done
  if [ "$verdict" = PASS ] && [ -z "${NEMESIS_KEEP:-}" ]; then rm -rf "$work"; else echo "records kept in $work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
die() { echo "NEMESIS BROKEN: $*"; exit 1; }  # the suite itself, not a daemon
testhosts_create "trlnm$(( $$ % 10000 ))x" 4

# The relay: node02-node04 each reach node01 (the coordinator's address)
# through a pair of TAP devices, node01's side .8i+1, the host's .8i+2 of
# 10.232.N.8i/29, and a host route to node01's address via node01's side.
relay_net="10.232.$(( ($$ % 200) + 20 ))"
declare -A relay_a=() relay_b=() relay_gw=()
links=()
for i in 2 3 4; do
  relay_a[$i]="${TESTHOST_PREFIX}r${i}a" relay_b[$i]="${TESTHOST_PREFIX}r${i}b"
  relay_gw[$i]="$relay_net.$(( 8 * i + 1 ))"
  links+=("${TESTHOST_NAME[$i]}=${relay_a[$i]},${relay_b[$i]}")
done
mkdir -p "$work/relay" "$work/clock" "$work/rootproc" "$work/unhealthy"
python3 "$here/../lib/tap_relay.py" --control "$work/relay" --ready "$work/relay.ready" \
  --stats "$work/relay.stats" --parent $$ "${links[@]}" 2>"$work/relay.err" &
relay_pid=$!
wait_for 10 test -s "$work/relay.ready" || die "the relay did not start: $(cat "$work/relay.err")"
relay_route() {  # I: node0I's route to node01 through the relay
  ip -n "${TESTHOST_PREFIX}$1" route replace "${TESTHOST_ADDR[1]}/32" via "${relay_gw[$1]}" dev "${relay_b[$1]}"
}
for i in 2 3 4; do
  ip link set "${relay_a[$i]}" netns "${TESTHOST_PREFIX}1"
  ip link set "${relay_b[$i]}" netns "${TESTHOST_PREFIX}$i"
  ip -n "${TESTHOST_PREFIX}1" addr add "${relay_gw[$i]}/29" dev "${relay_a[$i]}"
  ip -n "${TESTHOST_PREFIX}$i" addr add "$relay_net.$(( 8 * i + 2 ))/29" dev "${relay_b[$i]}"
  ip -n "${TESTHOST_PREFIX}1" link set "${relay_a[$i]}" up
  ip -n "${TESTHOST_PREFIX}$i" link set "${relay_b[$i]}" up
  relay_route $i || die "no route through the relay on ${TESTHOST_NAME[$i]}"
done
# Each host's links, for partitions: node01 has its own and the relay's
# node01 sides.
declare -A host_links=([1]="${TESTHOST_IF[1]} ${relay_a[2]} ${relay_a[3]} ${relay_a[4]}")
for i in 2 3 4; do host_links[$i]="${TESTHOST_IF[$i]} ${relay_b[$i]}"; done

# Small disks: the state file's and the logs'.
mkdir -p "$work/statefs" "$work/logfs"
mount -t tmpfs -o size=64k,mode=0700 nemesis-state "$work/statefs" || die "cannot mount a tmpfs"
mount -t tmpfs -o size=256k,mode=0700 nemesis-logs "$work/logfs" || die "cannot mount a tmpfs"

# The clock shim, and proof that it shifts (and only the process it is in).
shim="$work/clock_shift.so"
cc -shared -fPIC -O2 -o "$shim" "$here/../lib/clock_shift.c" -ldl || die "cannot build the clock shim"
echo 3600 >"$work/clock/probe"
shifted=$(env LD_PRELOAD="$shim" TRL_CLOCK_SHIFT_FILE="$work/clock/probe" date +%s)
[ $(( shifted - $(date +%s) )) -ge 3590 ] || die "the clock shim does not shift date (+3600 s): $shifted"
child=$(env LD_PRELOAD="$shim" TRL_CLOCK_SHIFT_FILE="$work/clock/probe" sh -c 'date +%s')
[ $(( child - $(date +%s) )) -lt 10 ] || die "the clock shim shifts the programs its process starts"
for k in coord m1 m2 m3; do echo 0 >"$work/clock/$k"; done

flags=(--num_processes 6 --main_process_ip "${TESTHOST_ADDR[1]}"
       --main_process_port $port --use_cpu --stop_grace $stop_grace
       --heartbeat_interval 0.3 --rejoin_timeout 30 --reconnect_timeout 30
       --restart_backoff_max 1 --log_dir "$work/logfs"
       # The unhealthy fault: a host is unhealthy while its file exists.
       --health_check "test ! -e $work/unhealthy/\$(hostname)" --health_check_interval 0.5
       --health_check_timeout 5
       # No disk check: the log file system is 256 KiB, which the job's own
       # logs fill for good (a worker_flood), and every machine would then be
       # unhealthy and the job wait for an operator (as it should: the check
       # itself is HealthCheckTest's). The disk_full fault here is about
       # what a full disk does to the logs and the state file.
       --min_free_disk_mb 0)

# Per job (run_job): its flags (--num_machines N or MIN:MAX first) and how
# many agents the nemesis runs besides the coordinator (3 with a spare).
jflags=() nagents=2

RANDOM=$seed
R=0
rand() { R=$(( RANDOM % $1 )); }  # never in a subshell: that would not advance $RANDOM
t0=$EPOCHREALTIME
now() { printf '%.1f' "$(echo "$EPOCHREALTIME - $t0" | bc)"; }

# Each test host has a PID namespace of its own for the length of a job
# (started by start_host_inits, ended with everything else on the host by
# record_leftovers), as a real machine has: an agent's sweep of stale
# workers sees only its own host's processes, so a frozen agent's workers on
# another host are not ended for it. Its pid 1 (tests/nemesis/host_init.py)
# reaps orphans; $work/rootproc in each host is the machine's /proc, through
# which in_host.sh and the workers learn the pids the nemesis sees.
# The hosts still share the machine's cgroup tree, unlike real machines,
# and their daemons now have the same small pids (the first is 3 on every
# host): agents name their workers' cgroups trl-agent-PID-genG, and one
# sweeps those whose owner pid is gone in its own PID namespace. That is
# inert here only because `ip netns exec` mounts a /sys of its own without
# /sys/fs/cgroup (the agents find no cgroup2 and use none); a nemesis that
# mounts cgroup2 in the hosts must give each host a cgroup of its own.
declare -A host_init=() host_init_parent=()
start_host_inits() {
  local i
  for i in 1 2 3 4; do
    rm -f "$work/init$i.pid"
    ip netns exec "${TESTHOST_PREFIX}$i" unshare --pid --fork --mount --propagation slave --uts \
      sh -c 'hostname "$0" && mount --bind /proc "$1" && mount -t proc proc /proc && exec python3 "$2" "$1" "$3"' \
      "${TESTHOST_NAME[$i]}" "$work/rootproc" "$here/host_init.py" "$work/init$i.pid" >"$work/init$i.err" 2>&1 &
    host_init_parent[$i]=$!
    wait_for 5 test -s "$work/init$i.pid" ||
      die "test host ${TESTHOST_NAME[$i]} got no PID namespace of its own: $(cat "$work/init$i.err")"
    host_init[$i]=$(<"$work/init$i.pid")
  done
}
# The pids on host I but its namespace's pid 1 and the unshare above it.
host_pids() {
  local pid
  for pid in $(testhosts_pids "$1"); do
    [ "$pid" = "${host_init[$1]:-}" ] || [ "$pid" = "${host_init_parent[$1]:-}" ] || echo "$pid"
  done
}

# start_daemon NAME ROLE HOST CLOCK MACHINE_RANK CMD...: runs CMD on test
# host HOST (in its PID namespace, under its hostname), its wall clock
# shifted by the file clock/CLOCK; records "daemon" and, once it ended,
# "exit" lines in $job/daemons. Sets DPID, the pid outside the host.
start_daemon() {
  local name=$1 role=$2 i=$3 clock=$4 m=$5 started=$EPOCHREALTIME; shift 5
  (
    # env sets the shim last: the shim takes it out of the environment of
    # the process it is loaded in.
    nsenter --target "${host_init[$i]}" --pid --mount --uts --net -- \
      "$here/in_host.sh" "$work/rootproc" "$job/$name.pid" "$job/$name.rc" "$job/$name.out" "$job/$name.err" \
      env LD_PRELOAD="$shim" TRL_CLOCK_SHIFT_FILE="$work/clock/$clock" "$@"
    rc=$?
    [ -s "$job/$name.rc" ] && rc=$(<"$job/$name.rc")
    pid=$(cat "$job/$name.pid" 2>/dev/null)
    echo "exit $name ${pid:-0} $rc $EPOCHREALTIME" >>"$job/daemons"
  ) 2>/dev/null &
  wait_for 5 test -s "$job/$name.pid" || die "$name did not start on ${TESTHOST_NAME[$i]}"
  DPID=$(<"$job/$name.pid")
  echo "daemon $name $role ${TESTHOST_NAME[$i]} $DPID $started $m" >>"$job/daemons"
  is_daemon() { grep -q '^trl-' "/proc/$DPID/comm" 2>/dev/null || ended "$name"; }
  wait_for 5 is_daemon || echo "    $name (pid $DPID) is not a trl daemon after 5 s"
  daemon_pids+=("$DPID")
}
ended() { grep -q "^exit $1 " "$job/daemons"; }
# Whether coordinator NAME (or its machine-0 agent) said the job's end.
job_end_said() {
  grep -qE "\[(coord|agent)\] job (trl-[0-9a-f]+ )?(succeeded|failed|stopped)" "$job/$1.err" 2>/dev/null
}
exit_code() { awk -v n="$1" '$1 == "exit" && $2 == n {print $4}' "$job/daemons"; }

# Daemons by key: c the coordinator (node01), 1 and 2 the agents of machine
# ranks 1 and 2, on host mhost[1] and mhost[2] (2, 3 or 4); in a job with a
# spare, 3 the spare's agent (trl-agent --spare, always on node04: its
# replacements are spares too). Keys name how a daemon was started, not the
# role it has now: once the spare took machine 1's place, agent 1's
# replacement on node02 is told to be a spare.
declare -A cur_name=() cur_pid=() instances=() mhost=() lease=()
start_agent() {  # MACHINE_RANK (3: the spare)
  local m=$1
  instances[a$m]=$(( ${instances[a$m]:-0} + 1 ))
  if [ "$m" = 3 ]; then
    local name="spare.${instances[a$m]}"
    start_daemon "$name" agent "${mhost[$m]}" "m$m" spare "$build/agent/trl-agent" --spare \
      "${jflags[@]}" --lease "${lease[$m]}"
  else
    local name="agent$m.${instances[a$m]}"
    start_daemon "$name" agent "${mhost[$m]}" "m$m" "$m" "$build/agent/trl-agent" --machine_rank "$m" \
      "${jflags[@]}" --lease "${lease[$m]}"
  fi
  cur_name[$m]=$name cur_pid[$m]=$DPID
}
start_coord() {
  instances[c]=$(( ${instances[c]:-0} + 1 ))
  local name="coord${instances[c]}"
  start_daemon "$name" coord 1 coord 0 "$build/coordinator/trl-coord" start "${jflags[@]}" --lease "${lease[c]}" \
    --state_file "$work/statefs/job$jobno.state" "$here/worker.sh" "$job" "$worker_seconds"
  cur_name[c]=$name cur_pid[c]=$DPID
}
note_kill() { echo "killed ${cur_name[$1]} ${cur_pid[$1]} $EPOCHREALTIME" >>"$job/daemons"; }
host_of() { if [ "$1" = c ]; then echo node01; else echo "${TESTHOST_NAME[${mhost[$1]}]}"; fi; }
free_host() { local i; for i in 2 3 4; do [ "$i" != "${mhost[1]}" ] && [ "$i" != "${mhost[2]}" ] && [ "$i" != "${mhost[3]:-}" ] && echo $i; done; }

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

# What the coordinator says while the job runs: its ps --json about every
# second, as $job/ps/TIME.json (TIME: when it was asked). I6 compares each
# with the workers' own records. An answer that does not come (the
# coordinator killed, frozen or cut off) is skipped. Stopped (ps.stop, and
# waited for) before the hosts are searched for leftovers: a ps under way
# runs on node01.
poll_ps() {
  local d=$1 t
  mkdir -p "$d/ps"
  while [ ! -e "$d/ps.stop" ]; do
    t=$EPOCHREALTIME
    if ip netns exec "${TESTHOST_PREFIX}1" timeout 3 "$build/coordinator/trl-coord" ps --json \
         --address "${TESTHOST_ADDR[1]}:$port" --timeout 2 >"$d/ps/next" 2>/dev/null; then
      mv "$d/ps/next" "$d/ps/$t.json"
    fi
    sleep 1
  done
  rm -f "$d/ps/next"
}

declare -A fault_count=()
nfaults=0
fault() {  # KIND TARGET DETAIL...
  nfaults=$(( nfaults + 1 ))
  fault_count[$1]=$(( ${fault_count[$1]:-0} + 1 ))
  echo "[+$(now) s] job $jobno fault $nfaults: $*" | tee -a "$job/faults"
}

# Heals (SIGCONT, links up, the relay clear, disks freed, clocks back) run in
# the background, so that faults overlap: a kill or a partition may come
# while another process is frozen.
background() { "$@" & heals+=($!); }
wait_heals() {
  local p
  for p in "${heals[@]}"; do wait "$p"; done
  heals=()
}
links_down() {  # HOST
  local l
  for l in ${host_links[$1]}; do ip -n "${TESTHOST_PREFIX}$1" link set "$l" down; done
}
links_up_after() {  # SECONDS HOST: a down link lost its routes; they come back
  local l i
  sleep "$1"
  for l in ${host_links[$2]}; do ip -n "${TESTHOST_PREFIX}$2" link set "$l" up; done
  if [ "$2" = 1 ]; then
    for i in 2 3 4; do relay_route $i; done
  else
    relay_route "$2"
  fi
}
# The relay's setting for the link of host I, written whole with a token; a
# heal clears it only if no later fault has set it since.
relay_set() {  # I TOKEN AB_LOSS AB_DELAY BA_LOSS BA_DELAY
  local f="$work/relay/${TESTHOST_NAME[$1]}"
  printf '# %s\nab loss %s delay %s\nba loss %s delay %s\n' "$2" "$3" "$4" "$5" "$6" >"$f.tmp"
  mv "$f.tmp" "$f"
}
relay_clear_after() {  # SECONDS I TOKEN
  sleep "$1"
  grep -qxF "# $3" "$work/relay/${TESTHOST_NAME[$2]}" && relay_set "$2" "healed $3" 0 0 0 0
  return 0
}
disks_free_after() {  # SECONDS TOKEN
  sleep "$1"
  rm -f "$work/statefs/fill.$2" "$work/logfs/fill.$2"
}
kill_after() {  # SECONDS PID NAME
  sleep "$1"
  kill -9 "$2" 2>/dev/null
  echo "killed $3 $2 $EPOCHREALTIME" >>"$job/daemons"
}
clock_back_after() {  # SECONDS CLOCK VALUE
  sleep "$1"
  [ "$(cat "$work/clock/$2")" = "$3" ] && echo 0 >"$work/clock/$2"
  return 0
}

# The next kind from the bag: a seeded shuffle of every kind, refilled when
# empty, so that every kind comes once in every ${#kinds[@]} faults.
bag=()
draw_kind() {
  local j t n
  if [ ${#bag[@]} = 0 ]; then
    bag=("${kinds[@]}")
    for (( n = ${#bag[@]} - 1; n > 0; n-- )); do
      rand $(( n + 1 )); j=$R
      t=${bag[$n]}; bag[$n]=${bag[$j]}; bag[$j]=$t
    done
  fi
  KIND=${bag[0]}
  bag=("${bag[@]:1}")
}

# A relayed host (2-4) that runs an agent now, in AH. Not $(agent_host): a
# subshell reseeds $RANDOM (bash 5.1 and later), so the host drawn there was
# not the seed's, and the parent's sequence did not advance.
agent_host() { rand $nagents; AH=${mhost[$(( R + 1 ))]}; }

# One fault (the bag's next, or KIND). Freezes, partitions, relay faults,
# full disks and shifted clocks heal in the background; a killed daemon is
# replaced before it returns.
inject() {  # [KIND]
  local kind m i pid d d2 k f loss dir token
  if [ $# -gt 0 ]; then kind=$1; else draw_kind; kind=$KIND; fi
  case $kind in
    stop_agent_short|stop_agent_long)
      rand $nagents; m=$(( R + 1 )); pid=${cur_pid[$m]}
      if [ $kind = stop_agent_short ]; then rand 4; d=0.$(( R + 2 )); else rand 4; d=$(( R + 2 )); fi
      ended "${cur_name[$m]}" && { fault $kind "$(host_of $m)" "(skipped: ${cur_name[$m]} already ended)"; return; }
      fault $kind "$(host_of $m)" "SIGSTOP ${cur_name[$m]} pid $pid for $d s"
      kill -STOP "$pid" 2>/dev/null; background sh -c 'sleep "$1"; kill -CONT "$2" 2>/dev/null' - "$d" "$pid" ;;
    freeze_past_lease)  # longer than its lease + the stop grace + 2 s, then thawed
      rand $nagents; m=$(( R + 1 )); pid=${cur_pid[$m]}
      rand 21; d=$(echo "${lease[$m]} + $stop_grace + 2 + 0.5 + $R / 10" | bc)
      ended "${cur_name[$m]}" && { fault $kind "$(host_of $m)" "(skipped: ${cur_name[$m]} already ended)"; return; }
      fault $kind "$(host_of $m)" "SIGSTOP ${cur_name[$m]} pid $pid (--lease ${lease[$m]}) for $d s, then SIGCONT"
      kill -STOP "$pid" 2>/dev/null; background sh -c 'sleep "$1"; kill -CONT "$2" 2>/dev/null' - "$d" "$pid" ;;
    stop_coord_short|stop_coord_long)
      pid=${cur_pid[c]}
      if [ $kind = stop_coord_short ]; then rand 4; d=0.$(( R + 2 )); else rand 3; d=$(( R + 2 )); fi
      ended "${cur_name[c]}" && { fault $kind node01 "(skipped: ${cur_name[c]} already ended)"; return; }
      fault $kind node01 "SIGSTOP ${cur_name[c]} pid $pid for $d s"
      kill -STOP "$pid" 2>/dev/null; background sh -c 'sleep "$1"; kill -CONT "$2" 2>/dev/null' - "$d" "$pid" ;;
    kill_agent|freeze_kill_agent)  # a new agent on the same host
      rand $nagents; m=$(( R + 1 )); rand 40; d=$(( R / 10 )).$(( R % 10 + 1 ))
      ended "${cur_name[$m]}" && { fault $kind "$(host_of $m)" "(skipped: ${cur_name[$m]} already ended)"; return; }
      if [ $kind = freeze_kill_agent ]; then
        rand 30; f=$(( R / 10 )).$(( R % 10 + 1 ))
        fault $kind "$(host_of $m)" "SIGSTOP ${cur_name[$m]} pid ${cur_pid[$m]}, SIGKILL after $f s, a new agent $d s later"
        kill -STOP "${cur_pid[$m]}" 2>/dev/null; sleep "$f"
      else
        fault $kind "$(host_of $m)" "SIGKILL ${cur_name[$m]} pid ${cur_pid[$m]}, a new agent after $d s"
      fi
      kill -9 "${cur_pid[$m]}" 2>/dev/null; note_kill "$m"
      wait_for 5 ended "${cur_name[$m]}"
      sleep "$d"
      if ended "${cur_name[c]}"; then
        echo "    the job had ended: no new agent"
      else
        start_agent "$m"
      fi ;;
    cross_host_takeover)  # machine rank m moves to the free host
      if [ $nagents = 3 ]; then
        # No free host (node04 runs the spare): the spare itself is SIGKILLed
        # between the loss of machine rank m and its handover (the lost
        # agent's lease + fence), then each gets a new agent on its host.
        rand 2; m=$(( R + 1 )); rand 23; f=$(( (R + 3) / 10 )).$(( (R + 3) % 10 ))
        ended "${cur_name[$m]}" && { fault $kind "$(host_of $m)" "(skipped: ${cur_name[$m]} already ended)"; return; }
        fault $kind "$(host_of $m)" "SIGKILL ${cur_name[$m]} pid ${cur_pid[$m]}, then the spare's agent ${cur_name[3]} pid ${cur_pid[3]} $f s later (before the handover), a new agent for each on its host"
        kill -9 "${cur_pid[$m]}" 2>/dev/null; note_kill "$m"
        wait_for 5 ended "${cur_name[$m]}"
        sleep "$f"
        if ! ended "${cur_name[3]}"; then
          kill -9 "${cur_pid[3]}" 2>/dev/null; note_kill 3
          wait_for 5 ended "${cur_name[3]}"
        fi
        if ended "${cur_name[c]}"; then
          echo "    the job had ended: no new agents"
        else
          start_agent "$m"; start_agent 3
        fi
        return
      fi
      rand 2; m=$(( R + 1 )); i=$(free_host); rand 23; f=$(( (R + 3) / 10 )).$(( (R + 3) % 10 ))
      rand 2; k=$R
      ended "${cur_name[$m]}" && { fault $kind "$(host_of $m)" "(skipped: ${cur_name[$m]} already ended)"; return; }
      local old_name=${cur_name[$m]} old_pid=${cur_pid[$m]} old_host
      old_host=$(host_of $m)
      if [ $k = 0 ]; then
        fault $kind "$old_host" "machine rank $m to ${TESTHOST_NAME[$i]}: SIGKILL $old_name pid $old_pid, a new agent there"
        kill -9 "$old_pid" 2>/dev/null; note_kill "$m"
        wait_for 5 ended "$old_name"
      else
        fault $kind "$old_host" "machine rank $m to ${TESTHOST_NAME[$i]}: SIGSTOP $old_name pid $old_pid, a new agent there once the coordinator holds it lost, SIGKILL $f s later"
        kill -STOP "$old_pid" 2>/dev/null
        # SIGKILLed 1.5 + f s after the freeze, whatever happens meanwhile:
        # a frozen agent cannot end its workers, so it must not stay frozen
        # past its lease and stop grace (the coordinator hands the ranks
        # over 0.9 + 1.5 + 2 + 2 s after its last heartbeat).
        kill_after "$(echo "1.5 + $f" | bc)" "$old_pid" "$old_name" &
        killer=$!
        # Lost after the heartbeat timeout (0.9 s); a replacement before
        # that is refused as a second agent of a registered machine.
        sleep 1.5
      fi
      mhost[$m]=$i
      local tries=0
      while ! ended "${cur_name[c]}" && [ $tries -lt 5 ]; do
        tries=$(( tries + 1 ))
        start_agent "$m"
        # Refused (exit 2) while the old agent still counts: again, as an
        # operator would.
        refused() { ended "${cur_name[$m]}" && [ "$(exit_code "${cur_name[$m]}")" = 2 ]; }
        wait_for 2 refused || break
        echo "    ${cur_name[$m]} was refused: $(grep -m1 -o 'refused this agent.*' "$job/${cur_name[$m]}.err")"
        sleep 0.5
      done
      if [ $k = 1 ]; then wait "$killer"; killer=""; wait_for 5 ended "$old_name"; fi ;;
    kill_coord)  # start it again on the same state file
      rand 40; d=$(( R / 10 )).$(( R % 10 + 1))
      ended "${cur_name[c]}" && { fault kill_coord node01 "(skipped: ${cur_name[c]} already ended)"; return; }
      fault kill_coord node01 "SIGKILL ${cur_name[c]} pid ${cur_pid[c]}, again after $d s"
      kill -9 "${cur_pid[c]}" 2>/dev/null; note_kill c
      wait_for 5 ended "${cur_name[c]}"
      sleep "$d"
      if [ "$(exit_code "${cur_name[c]}")" != 137 ]; then
        echo "    ${cur_name[c]} had exited by itself ($(exit_code "${cur_name[c]}")): not started again"
      elif job_end_said "${cur_name[c]}"; then
        # Killed on its way out (telling the agents the job's end): its job
        # is over and its state file gone, so a coordinator started now
        # would run a new job, generation 0 again.
        echo "    ${cur_name[c]} had ended the job before the kill: not started again"
      else
        start_coord
      fi ;;
    partition)  # a host's links down
      rand $(( nagents + 1 )); i=1; [ $R -gt 0 ] && i=${mhost[$R]}
      rand 46; d=$(( R / 10 + 0 )).$(( R % 10 ))
      [ "$d" = 0.0 ] && d=0.5
      fault partition "${TESTHOST_NAME[$i]}" "links ${host_links[$i]} down for $d s"
      links_down $i
      background links_up_after "$d" $i ;;
    silent_partition)
      agent_host; i=$AH; rand 56; d=$(( (R + 5) / 10 )).$(( (R + 5) % 10 ))
      token="fault $(( nfaults + 1 ))"
      fault silent_partition "${TESTHOST_NAME[$i]}" "the relay drops every frame between node01 and ${TESTHOST_NAME[$i]} for $d s (links up)"
      relay_set $i "$token" 1 0 1 0
      background relay_clear_after "$d" $i "$token" ;;
    lossy)
      agent_host; i=$AH; rand 31; loss=0.$(( R + 20 )); rand 41; d=$(( R / 10 + 1 )).$(( R % 10 ))
      rand 3; dir=$R; token="fault $(( nfaults + 1 ))"
      case $dir in
        0) fault lossy "${TESTHOST_NAME[$i]}" "the relay drops $loss of the frames to ${TESTHOST_NAME[$i]} for $d s"
           relay_set $i "$token" "$loss" 0 0 0 ;;
        1) fault lossy "${TESTHOST_NAME[$i]}" "the relay drops $loss of the frames from ${TESTHOST_NAME[$i]} for $d s"
           relay_set $i "$token" 0 0 "$loss" 0 ;;
        2) fault lossy "${TESTHOST_NAME[$i]}" "the relay drops $loss of the frames both ways for $d s"
           relay_set $i "$token" "$loss" 0 "$loss" 0 ;;
      esac
      background relay_clear_after "$d" $i "$token" ;;
    delay)
      agent_host; i=$AH; rand 61; d2=0.$(( R / 10 + 2 ))$(( R % 10 )); rand 41; d=$(( R / 10 + 1 )).$(( R % 10 ))
      rand 3; dir=$R; token="fault $(( nfaults + 1 ))"
      case $dir in
        0) fault delay "${TESTHOST_NAME[$i]}" "the relay holds every frame to ${TESTHOST_NAME[$i]} $d2 s, for $d s"
           relay_set $i "$token" 0 "$d2" 0 0 ;;
        1) fault delay "${TESTHOST_NAME[$i]}" "the relay holds every frame from ${TESTHOST_NAME[$i]} $d2 s, for $d s"
           relay_set $i "$token" 0 0 0 "$d2" ;;
        2) fault delay "${TESTHOST_NAME[$i]}" "the relay holds every frame both ways $d2 s, for $d s"
           relay_set $i "$token" 0 "$d2" 0 "$d2" ;;
      esac
      background relay_clear_after "$d" $i "$token" ;;
    disk_full)
      rand 46; d=$(( (R + 5) / 10 )).$(( (R + 5) % 10 )); token=$(( nfaults + 1 ))
      fault disk_full node01 "the state file's and the logs' tmpfs full for $d s"
      local fs
      for fs in "$work/statefs" "$work/logfs"; do
        head -c 1M /dev/zero >"$fs/fill.$token" 2>/dev/null
        [ "$(stat -f -c %a "$fs")" = 0 ] || die "$fs is not full after the fill ($(stat -f -c %a "$fs") blocks free)"
      done
      background disks_free_after "$d" "$token" ;;
    clock_shift)
      local -a offsets=(30 -30 3600 -3600)
      rand $(( nagents + 1 )); k=$R; rand 4; f=${offsets[$R]}; rand 9; d=$(( R + 2 ))
      local clock=coord who=c
      [ $k -gt 0 ] && clock=m$k who=$k
      fault clock_shift "$(host_of $who)" "the wall clock of ${cur_name[$who]} (and its successors) ${f} s for $d s"
      echo "$f" >"$work/clock/$clock.tmp"; mv "$work/clock/$clock.tmp" "$work/clock/$clock"
      background clock_back_after "$d" "$clock" "$f" ;;
    unhealthy)
      agent_host; i=$AH; rand 50; d=$(( R / 10 + 1 )).$(( R % 10 ))
      fault unhealthy "${TESTHOST_NAME[$i]}" "its health check fails for $d s (cordoned), then passes"
      touch "$work/unhealthy/${TESTHOST_NAME[$i]}"
      background sh -c 'sleep "$1"; rm -f "$2"' - "$d" "$work/unhealthy/${TESTHOST_NAME[$i]}" ;;
    worker_crash)
      rand 6
      fault worker_crash "rank $R" "the next worker of rank $R exits 1"
      touch "$job/ctl/crash.$R" ;;
    worker_flood)
      rand 6
      fault worker_flood "rank $R" "a 5 MiB line without newline, then 100000 lines"
      touch "$job/ctl/flood.$R" ;;
    *) die "unknown fault kind $kind" ;;
  esac
}

# An agent started just as the job ended (a replacement after a kill) never
# registers, and waits for a coordinator up to --rdzv_timeout, by design: 2 s
# after the coordinator's end the nemesis kills it, as an operator would, and
# the checker does not judge it. One that registered is left alone.
kill_strays() {
  local n pid coord_end
  coord_end=$(awk -v n="${cur_name[c]}" '$1 == "exit" && $2 == n {print int($5)}' "$job/daemons")
  [ -n "$coord_end" ] && [ "${EPOCHREALTIME%.*}" -ge $(( coord_end + 2 )) ] || return 0
  for n in $(awk '$1 == "daemon" && $3 == "agent" {print $2}' "$job/daemons"); do
    ended "$n" && continue
    grep -q "registered with job" "$job/$n.err" && continue
    pid=$(<"$job/$n.pid")
    echo "    $n (pid $pid) never registered before the job ended: killed"
    kill -9 "$pid"; echo "killed $n $pid $EPOCHREALTIME stray" >>"$job/daemons"
  done
}
all_daemons_ended() {
  local n
  for n in $(awk '$1 == "daemon" {print $2}' "$job/daemons"); do ended "$n" || return 1; done
}
hosts_empty() {
  local i
  for i in 1 2 3 4; do [ -z "$(host_pids $i)" ] || return 1; done
}

# After the job: what is left (I3), then a clean slate for the next job.
record_leftovers() {
  local i pid
  : >"$job/after"
  wait_for 3 hosts_empty
  for i in 1 2 3 4; do
    for pid in $(host_pids $i); do
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
  # Everything on the hosts, their namespaces' pid 1 with it.
  for i in 1 2 3 4; do
    for pid in $(testhosts_pids $i); do kill -CONT "$pid"; kill -9 "$pid"; done 2>/dev/null
  done
  for i in 1 2 3 4; do wait "${host_init_parent[$i]}" 2>/dev/null; done
  host_init=() host_init_parent=()
}

run_job() {
  job="$work/job$jobno"
  mkdir -p "$job/ctl"
  : >"$job/records"; : >"$job/daemons"; : >"$job/gone"
  cur_name=() cur_pid=() instances=() mhost=([1]=2 [2]=3)
  rm -rf "${work:?}/logfs/"*
  # The job's shape, by its number (so that every run of four jobs or more
  # has each): fixed size, with a spare on node04, elastic (2:3), each with
  # 50 restarts; and the default restart budget, 0, with a spare, whose only
  # fault comes in its last second (a job whose every rank exited 0 must
  # succeed, and a spare take a lost machine's place without a restart).
  # Every other job has mixed leases: one machine's agent 4 s, the others
  # 1.5 s (the handover must wait for the lost machine's own lease).
  local shape sizes=6 mixed="" restarts=(--max_restarts 50)
  local -a turns=(${shapes//,/ })
  shape=${turns[$(( (jobno - 1) % ${#turns[@]} ))]}
  case $shape in
    fixed) nagents=2 jflags=(--num_machines 3 "${flags[@]}" "${restarts[@]}") ;;
    spare) nagents=3 jflags=(--num_machines 3 "${flags[@]}" "${restarts[@]}"); mhost[3]=4 ;;
    elastic) nagents=2 jflags=(--num_machines 2:3 "${flags[@]}" "${restarts[@]}"); sizes=4,6 ;;
    budget0) nagents=3 jflags=(--num_machines 3 "${flags[@]}" --max_restarts 0); mhost[3]=4 ;;
    *) die "unknown job shape: $shape (--shapes takes fixed, spare, elastic, budget0)" ;;
  esac
  lease=([c]=1.5 [1]=1.5 [2]=1.5 [3]=1.5)
  if [ -n "$agent_lease" ]; then
    lease=([c]=1.5 [1]=$agent_lease [2]=$agent_lease [3]=$agent_lease)
  elif [ $(( jobno % 2 )) = 0 ]; then
    rand 2; lease[$(( R + 1 ))]=4; mixed=", mixed leases"
  fi
  local start=$EPOCHREALTIME startS=${EPOCHREALTIME%.*}
  echo "== job $jobno at +$(now) s: $shape$([ $nagents = 3 ] && echo " (trl-agent --spare on node04)")$([ $shape = elastic ] && echo " (--num_machines 2:3)")$([ $shape = budget0 ] && echo " (--max_restarts 0, a fault in the last second only)")$mixed (--lease: coordinator ${lease[c]}, agent 1 ${lease[1]}, agent 2 ${lease[2]}$([ $nagents = 3 ] && echo ", spare ${lease[3]}"))"
  echo "shape $shape sizes $sizes lease c ${lease[c]} 1 ${lease[1]} 2 ${lease[2]} 3 ${lease[3]}" >"$job/shape"
  start_host_inits
  watch_workers "$job" &
  watcher=$!
  poll_ps "$job" &
  poller=$!
  start_agent 1
  start_agent 2
  [ $nagents = 3 ] && start_agent 3
  start_coord
  gen0_up() { [ "$(grep -c '^start 0 ' "$job/records")" -ge 6 ]; }
  wait_for 30 gen0_up || echo "    generation 0 did not start within 30 s"
  while [ $shape != budget0 ] && [ "${EPOCHREALTIME%.*}" -lt $(( startS + window )) ] &&
        ! ended "${cur_name[c]}"; do
    rand $(( gap * 10 )); sleep "$(( R / 10 )).$(( R % 10 ))5"
    ended "${cur_name[c]}" && break
    inject
  done
  wait_heals
  # Every other job (drawn) and every budget0 job, one more fault in the
  # last second: as soon as a worker of the final generation exits 0, the
  # others about to.
  rand 2
  [ $shape = budget0 ] && R=1
  if [ $R = 1 ] && [ ${#late_kinds[@]} -gt 0 ] && ! ended "${cur_name[c]}"; then
    local zeros; zeros=$(grep -c '^end .* 0$' "$job/records")
    more_zeros() { [ "$(grep -c '^end .* 0$' "$job/records")" -gt "$zeros" ] || ended "${cur_name[c]}"; }
    rand ${#late_kinds[@]}
    if wait_for $(( worker_seconds + 20 )) more_zeros && ! ended "${cur_name[c]}"; then
      echo "    a worker exited 0: a fault in the job's last second"
      inject "${late_kinds[$R]}"
      wait_heals
    fi
  fi
  echo "    faults over (and healed) at +$(now) s; waiting for the job to end"
  local deadline=$(( startS + job_limit ))
  until all_daemons_ended; do
    kill_strays
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
  touch "$job/ps.stop"; wait "$poller"; poller=""
  record_leftovers
  # The job's history as the coordinator kept it (I6 compares it with the
  # workers' records), then off the small state disk: each job's events
  # file would stay there and fill it for the jobs after it.
  local ev="$work/statefs/job$jobno.state"
  timeout 10 "$build/coordinator/trl-coord" events --state_file "$ev" --json >"$job/events.json" 2>"$job/events.err"
  [ -e "$ev.events" ] && mv "$ev.events" "$job/state.events"
  touch "$job/watch.stop"; wait "$watcher"; watcher=""
  echo "job $start $end $job_limit 6 $sizes" >"$job/job"
  echo "    job exit $(exit_code "${cur_name[c]}"), $(grep -c '^start ' "$job/records") worker starts, $(awk '$1 == "start" {print $2}' "$job/records" | sort -un | wc -l) generation(s), $(printf '%.1f' "$(echo "$end - $start" | bc)") s"
  python3 "$here/check.py" "$job" | tee "$job/check"
  return "${PIPESTATUS[0]}"
}

echo "nemesis: seed $seed, ${seconds} s, fault window $window s per job, gap up to $gap s, workers run $worker_seconds s, job limit $job_limit s, faults ${kinds[*]}, work dir $work"
jobno=0 failed=0 first=""
while :; do
  jobno=$(( jobno + 1 ))
  run_job || { failed=1; first=$(grep -m1 VIOLATION "$job/check"); break; }
  [ $(( ${EPOCHREALTIME%.*} + window + 10 )) -lt $(( ${t0%.*} + seconds )) ] || break
done
kill "$relay_pid"; wait "$relay_pid"; relay_pid=""

echo "== summary (seed $seed, --seconds $seconds, --window $window, --gap $gap, --work $worker_seconds${only:+, --only $only})"
echo "jobs run: $jobno in $(now) s"
echo "faults injected: $nfaults, by kind:"
for k in "${kinds[@]}"; do printf '  %-20s %d\n' "$k" "${fault_count[$k]:-0}"; done
echo "relay (frames per link and direction; ab: from node01, ba: to node01):"
sed 's/^/  /' "$work/relay.stats"
for i in 2 3; do
  n=$(awk -v l="${TESTHOST_NAME[$i]}" '$1 == l && $2 == "ba" {print $4}' "$work/relay.stats")
  [ "${n:-0}" -gt 0 ] || die "the relay forwarded nothing from ${TESTHOST_NAME[$i]}: its agents did not talk through it"
done
echo "invariants checked after each job: I1 one generation at a time, I2 ranks 0..WORLD_SIZE-1 once, one WORLD_SIZE (6; 4 or 6 elastic),"
echo "  I3 nothing left (processes, worker pids, port $port), I4 generations only increase per host and"
echo "  a generation the coordinator could not keep does not start, I5 exit code matches the workers"
echo "  (or the coordinator's stated full disk), I6 job and daemons ended within $job_limit s"
echo "  and the events' world sizes are the workers',"
echo "  I7 a worker told to stop is not killed before it saved its checkpoint,"
echo "  I8 a cordoned host gets no ranks"
if [ $failed = 0 ]; then
  verdict=PASS
  echo "PASS"
else
  echo "FAIL (job $jobno): $first"
  echo "reproduce: $0 $build --seed $seed --seconds $seconds --window $window --gap $gap --work $worker_seconds${only:+ --only $only} --shapes $shapes${agent_lease:+ --lease $agent_lease}"
fi
exit $failed

#!/usr/bin/env bash
# A real two-node Slurm on test hosts (slurmctld on node01, a slurmd on
# each of node01 and node02, munge for authentication) runs
# deploy/slurm/trl-launch.sbatch with sbatch:
#   1. a real PyTorch Gloo all-reduce through trl-launch on both nodes;
#   2. a job whose worker crashes once: it restarts and succeeds;
#   3. a long job stopped with scancel: nothing of it is left on either host.
# Needs root and Debian's slurm-wlm and munge (installed when missing).
#
# Usage: slurm.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
source "$here/../lib/testhosts.sh"
testhosts_skip_unless_possible
python=${TRL_TEST_PYTHON:-/usr/bin/python3}
"$python" -c "import torch.distributed" 2>/dev/null \
  || skip_or_fail "$python has no torch.distributed"
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null 2>&1 \
    || skip_or_fail "cannot install slurm-wlm and munge"
fi

work=$(mktemp -d /tmp/trl-slurm.XXXXXX)
chmod 755 "$work"
munged_pid=""
cleanup() {
  for f in "$work"/slurmd*.pid "$work"/slurmctld.pid; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  sleep 0.5
  for f in "$work"/slurmd*.pid "$work"/slurmctld.pid; do
    [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
  done
  if [ -n "$munged_pid" ]; then
    kill "$munged_pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$munged_pid" 2>/dev/null || break; sleep 0.1; done
  fi
  testhosts_destroy
  rm -rf "$work"
}
trap cleanup EXIT
TESTHOSTS_OWN_NAME=network testhosts_create "trlsl$(( $$ % 10000 ))x" 2
a1=${TESTHOST_ADDR[1]} a2=${TESTHOST_ADDR[2]}

# munge: one key, one daemon; its socket is on the shared filesystem.
if ! pgrep -x munged >/dev/null; then
  if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
    chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
  fi
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- /usr/sbin/munged || { echo "FAIL: munged did not start"; exit 1; }
  munged_pid=$(pgrep -x munged | head -1)
fi
for _ in $(seq 1 50); do munge -n </dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
munge -n </dev/null | unmunge >/dev/null 2>&1 || { echo "FAIL: munge does not answer"; exit 1; }

conf=$work/slurm.conf
cat >"$conf" <<CONF
ClusterName=trltest
SlurmctldHost=node01($a1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd%n.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
KillWait=10
NodeName=node01 NodeAddr=$a1 CPUs=2 State=UNKNOWN
NodeName=node02 NodeAddr=$a2 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=node[01-02] Default=YES MaxTime=INFINITE State=UP
CONF
mkdir -p "$work/state"
export SLURM_CONF=$conf
on1() { testhosts_exec 1 env SLURM_CONF="$conf" "$@"; }

testhosts_exec 1 /usr/sbin/slurmctld -f "$conf" -c \
  || { echo "FAIL: slurmctld did not start"; cat "$work/slurmctld.log"; exit 1; }
for i in 1 2; do
  # slurmd wants cgroup v1 hierarchies; `ip netns exec` gave it an empty
  # /sys/fs/cgroup.
  testhosts_exec "$i" sh -c '
    mount -t tmpfs none /sys/fs/cgroup
    for c in freezer cpu cpuacct cpuset memory devices pids blkio; do
      mkdir -p /sys/fs/cgroup/$c; mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c
    done
    mkdir -p /sys/fs/cgroup/systemd
    mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
    exec /usr/sbin/slurmd -f "$0" -N "$1"' "$conf" "${TESTHOST_NAME[$i]}" \
    || { echo "FAIL: slurmd on ${TESTHOST_NAME[$i]} did not start"; exit 1; }
done
for _ in $(seq 1 300); do
  idle=$(on1 sinfo -h -o '%T %D' 2>/dev/null | awk '$1 == "idle" {print $2}')
  [ "$idle" = 2 ] && break; sleep 0.2
done
[ "${idle:-}" = 2 ] || { echo "FAIL: the nodes never became idle"; on1 sinfo; cat "$work"/*.log; exit 1; }
echo "Slurm up: $(on1 sinfo -h -o '%P %T %D %N')"

# The batch script as shipped, less its GPU request (the test hosts have
# none); a CPU config: two processes on each node.
sed '/--gpus-per-node/d' "$root/deploy/slurm/trl-launch.sbatch" >"$work/job.sbatch"
cat >"$work/cpu.yaml" <<YAML
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_CPU
num_machines: 1
num_processes: 2
main_process_port: 29700
use_cpu: true
YAML
cat >"$work/crash_once.py" <<'PY'
import os, runpy, sys
if os.environ["RANK"] == "1" and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    print("rank 1 crashes in generation 0", flush=True)
    sys.exit(3)
sys.argv = [sys.argv[0]] + sys.argv[1:]
runpy.run_path(os.environ["ALLREDUCE"], run_name="__main__")
PY
cat >"$work/sleep.py" <<'PY'
import os, signal, sys, time
got = []
def caught(number, frame):
    got.append(number)
    print(f"rank {os.environ['RANK']} got {signal.Signals(number).name}", flush=True)
signal.signal(signal.SIGTERM, caught)
signal.signal(signal.SIGUSR1, caught)
print(f"rank {os.environ['RANK']} pid {os.getpid()} sleeping", flush=True)
deadline = time.monotonic() + 300
while not got and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(1)  # a second delivery of the signal would show here
sys.exit(0)
PY

# Every check sets fail=1 in this shell, never inside $(...), where it
# would be lost.
fail=0
submit() {  # submit NAME COMMAND... -> job id
  local name=$1; shift
  (cd "$work" && on1 env TRL_BIN_DIR="$root/deploy/slurm" TRL_PYTHON="$python" \
     PATH="$build/coordinator:$build/agent:$PATH" ALLREDUCE="$here/allreduce.py" \
     sbatch --parsable --job-name "$name" --output "$work/$name.out" \
     "$work/job.sbatch" "$work/cpu.yaml" "$@")
}
job_state() { on1 scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
wait_done() {  # wait_done ID SECONDS -> final state
  local state=""
  for _ in $(seq 1 $(($2 * 5))); do
    state=$(job_state "$1")
    case "$state" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break ;; esac
    sleep 0.2
  done
  echo "$state"
}

# submitted NAME ID: fails the test when sbatch gave no job id.
submitted() {
  [ -n "$2" ] && return 0
  fail=1; echo "FAIL: sbatch did not submit $1"; return 1
}

# 1. A Gloo all-reduce over both nodes.
id=$(submit allreduce "$here/allreduce.py" "$a1")
submitted allreduce "$id"
state=$(wait_done "$id" 120)
echo "== job $id (all-reduce): $state"; cat "$work/allreduce.out"
[ "$state" = COMPLETED ] || { fail=1; echo "FAIL: the all-reduce job ended $state"; }
for rank in 0 1 2 3; do
  grep -q "\[rank $rank\] allreduce ok: rank $rank/4" "$work/allreduce.out" \
    || { fail=1; echo "FAIL: rank $rank reported no correct all-reduce"; }
done
grep -q "Slurm sets num_machines to 2" "$work/allreduce.out" \
  || { fail=1; echo "FAIL: no note that Slurm set num_machines"; }

# 2. A worker crashes once: the job restarts and succeeds.
id=$(submit crash "$work/crash_once.py" "$a1")
submitted crash "$id"
state=$(wait_done "$id" 120)
echo "== job $id (crash once): $state"; cat "$work/crash.out"
[ "$state" = COMPLETED ] || { fail=1; echo "FAIL: the crashing job ended $state"; }
grep -q "rank 1 crashes in generation 0" "$work/crash.out" || { fail=1; echo "FAIL: no crash seen"; }
[ "$(grep -c 'allreduce ok' "$work/crash.out")" = 4 ] \
  || { fail=1; echo "FAIL: generation 1 did not all-reduce on 4 ranks"; }

# 3 and 4. Slurm's signals reach every worker: the pre-emption notice
# (scancel --signal=USR1, as #SBATCH --signal sends it), then scancel's
# SIGTERM; afterwards nothing of either job is left on either host.
run_sleeper() {  # run_sleeper NAME: sets sleeper_id, once its 4 ranks sleep
  sleeper_id=$(submit "$1" "$work/sleep.py")
  submitted "$1" "$sleeper_id"
  for _ in $(seq 1 300); do
    [ "$(grep -c 'sleeping' "$work/$1.out" 2>/dev/null)" = 4 ] && break; sleep 0.2
  done
  grep -c sleeping "$work/$1.out" 2>/dev/null | grep -qx 4 \
    || { fail=1; echo "FAIL: $1 never ran 4 ranks"; cat "$work/$1.out"; }
}
run_sleeper notice; id=$sleeper_id
on1 scancel --signal=USR1 "$id"
state=$(wait_done "$id" 60)
echo "== job $id (pre-emption notice, SIGUSR1): $state"; cat "$work/notice.out"
for rank in 0 1 2 3; do  # each exactly once: Slurm sends it, we do not again
  [ "$(grep -o "rank $rank got SIGUSR1" "$work/notice.out" | wc -l)" = 1 ] \
    || { fail=1; echo "FAIL: rank $rank did not get SIGUSR1 exactly once"; }
done
run_sleeper sleeper; id=$sleeper_id
on1 scancel "$id"
state=$(wait_done "$id" 60)
echo "== job $id (scancel): $state"; cat "$work/sleeper.out"
[ "$state" = CANCELLED ] || { fail=1; echo "FAIL: the cancelled job ended $state"; }
for rank in 0 1 2 3; do
  [ "$(grep -o "rank $rank got SIGTERM" "$work/sleeper.out" | wc -l)" = 1 ] \
    || { fail=1; echo "FAIL: rank $rank did not get SIGTERM exactly once"; }
done
sleep 1
for i in 1 2; do
  left=$(for p in $(testhosts_pids "$i"); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -E 'trl-coord|trl-agent|sleep[.]py|allreduce[.]py|crash_once' >/dev/null && echo "$p"
  done)
  if [ -n "$left" ]; then
    fail=1; echo "FAIL: left on ${TESTHOST_NAME[$i]}:"; ps -o pid,args -p $left
  fi
done
[ $fail = 0 ] && echo "PASS: sbatch on a real 2-node Slurm: all-reduce, a restart, SIGUSR1 and SIGTERM reach every worker, scancel leaves nothing"
exit $fail

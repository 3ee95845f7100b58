#!/usr/bin/env bash
# A hang in an unchanged PyTorch script over two machines (issue 33): a
# Gloo job of 2 test hosts x 2 processes with the PyPI environment's
# Python, trl-coord on node01 (machine 0), trl-agent on node02 (machine 1).
# Rank 3 (machine 1) sleeps before its all-reduce in generation 0
# (tests/pypi/hang_job_two_hosts.py); ranks 0-2 wait in that all-reduce.
# The CPU detector (--hang_cpu_timeout 3; nothing in the script) finds the
# hang; each agent captures its workers before it signals them, and the
# coordinator says where every rank stood: rank 3 on machine 1 at its
# sleep, the others in the all-reduce (at least the ranks of the machine
# that found the hang first: see the check); rank 3's stacks file is in
# machine 1's log directory. The job restarts
# once, generation 1 all-reduces on all 4 ranks, the job succeeds and
# nothing is left on either host.
#
# Usage: two_hosts_hang.sh BUILD_DIR [py-spy|no-py-spy]
#   py-spy (default): the py-spy next to the environment's Python names
#   each rank's Python line.
#   no-py-spy: the job's Python is the same environment seen from a
#   directory without py-spy (bin/python, pyvenv.cfg and lib/ linked), and
#   the daemons' PATH has none either: the stacks files say py-spy was not
#   found, and the kernel's view names rank 3 asleep (in *nanosleep), the
#   others in another kernel wait.
set -u
here=$(cd "$(dirname "$0")" && pwd)
usage="usage: $0 BUILD_DIR [py-spy|no-py-spy]"
build=$(cd "${1:?$usage}" && pwd)
mode=${2:-py-spy}
case $mode in py-spy | no-py-spy) ;; *) echo "$usage"; exit 2 ;; esac
source "$here/../lib/testhosts.sh"
testhosts_skip_unless_possible
venv=${TRL_PYPI_VENV:-/var/cache/trl-launch/pypi-venv}
[ -x "$venv/bin/python" ] ||
  skip_or_fail "no PyPI virtual environment at $venv (scripts/pypi_venv.sh makes it)"
[ -x "$venv/bin/py-spy" ] ||
  skip_or_fail "no py-spy in $venv (scripts/pypi_venv.sh adds tests/pypi/tools.txt)"

work=$(mktemp -d)
cleanup() { testhosts_destroy; [ -n "${TRL_KEEP_WORK:-}" ] || rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 143' TERM; trap 'exit 130' INT; trap 'exit 129' HUP
job=hang_job_two_hosts.py
cp "$here/$job" "$work/"
sleep_line=$(grep -n 'time.sleep(600)' "$work/$job" | cut -d: -f1)
reduce_line=$(grep -n '^dist.all_reduce(t)' "$work/$job" | cut -d: -f1)
[ -n "$sleep_line" ] && [ -n "$reduce_line" ] || { echo "FAIL: $job has no sleep or all-reduce"; exit 1; }

python=$venv/bin/python prefix=$venv path=$PATH
if [ "$mode" = no-py-spy ]; then
  # The same environment from a directory without py-spy: Python takes
  # its prefix from the pyvenv.cfg above bin/, site-packages from lib/.
  prefix=$work/nospy python=$work/nospy/bin/python
  mkdir -p "$prefix/bin"
  ln -s "$(readlink -f "$venv/bin/python")" "$python"
  cp "$venv/pyvenv.cfg" "$prefix/"
  ln -s "$venv/lib" "$prefix/lib"
  "$python" -c 'import sys, torch.distributed; assert sys.prefix == sys.argv[1], sys.prefix' \
    "$prefix" || { echo "FAIL: $python does not import torch from $venv as $prefix"; exit 1; }
  # The daemons' PATH: without any directory that has a py-spy.
  path=$(echo "$PATH" | tr : '\n' | while read -r d; do [ -x "$d/py-spy" ] || echo "$d"; done | paste -sd:)
  if PATH=$path command -v py-spy >/dev/null || [ -e "$prefix/bin/py-spy" ]; then
    echo "FAIL: a py-spy is still found"; exit 1
  fi
fi

testhosts_create "trlhg$(( $$ % 1000 ))x" 2
port=$(( 29500 + $$ % 400 ))
master=${TESTHOST_ADDR[1]}
flags=(--num_machines 2 --num_processes 4 --main_process_ip "$master"
       --main_process_port "$port" --use_cpu --max_restarts 1
       --hang_cpu_timeout 3 --stop_grace 2 --python "$python")
start=$SECONDS
# Each machine its own log directory: rank 3's stacks must be machine 1's.
( cd "$work" && PATH=$path testhosts_exec 2 timeout -k 5 90 "$build/agent/trl-agent" \
    --machine_rank 1 "${flags[@]}" --log_dir "$work/logs1" ) >"$work/agent.out" 2>&1 &
agent=$!
( cd "$work" && PATH=$path testhosts_exec 1 timeout -k 5 90 "$build/coordinator/trl-coord" start \
    "${flags[@]}" --log_dir "$work/logs0" "$job" ) >"$work/coord.out" 2>&1 &
coord=$!
wait $coord; coord_rc=$?
wait $agent; agent_rc=$?
echo "== $mode: trl-coord exit $coord_rc, trl-agent exit $agent_rc after $(( SECONDS - start )) s"

fail=0
bad() { echo "FAIL: $*"; fail=1; }
if [ $coord_rc != 0 ] || [ $agent_rc != 0 ]; then
  bad "the job did not succeed after its restart"
fi

# The script-free detector stopped generation 0, naming a rank, its
# machine and host.
grep -Eq "W \[coord\] stopping generation 0: rank [0-3] \(local rank [01] on machine [01], host node0[12]\) hung: its processes used less than 1% of a core for [0-9.]+ s \(--hang_cpu_timeout 3\); " \
  "$work/coord.out" || bad "the hang was not reported with its detector"

# Where the job's ranks stood, one place per "; ": rank 3 alone at its
# sleep, named with its machine, and every other rank in the collective.
# The stop comes in two phases: both machines read their ranks before
# either signals them, so no rank has woken from the collective (a peer's
# socket closed) before it was read.
if [ "$mode" = py-spy ]; then
  collective="in all_reduce \(torch/distributed/[^)]*\), from $job:$reduce_line"
  odd="in <module> \($job:$sleep_line\)"
else
  collective="state S \(sleeping\) in the kernel at [a-z0-9_.]+"
  odd="state S \(sleeping\) in the kernel at [a-z_]*nanosleep"
fi
stood=$(grep "W \[coord\] generation 0: where its ranks stood when it was stopped: " "$work/coord.out" |
        sed 's/.*when it was stopped: //')
places=$(echo "$stood" | sed 's/; /\n/g')
others=$(echo "$places" | grep -v "^rank 3 ")
# The ranks the other places name ("ranks 0-2", "ranks 0, 2", "rank 1").
others_named=$(echo "$others" | sed -E 's/^ranks? ([0-9, -]+) .*/\1/' | python3 -c '
import sys
named = set()
for line in sys.stdin:
    for part in line.replace(" ", "").split(","):
        if "-" in part:
            a, b = part.split("-"); named.update(range(int(a), int(b) + 1))
        elif part.strip():
            named.add(int(part))
print(" ".join(map(str, sorted(named))))')
if [ "$(echo "$stood" | grep -c .)" != 1 ] ||
   ! echo "$places" | grep -Eqx "rank 3 on machine 1 \(host node02\) $odd(, the odd one out)?" ||
   echo "$others" | grep -Evq "^ranks? [0-9, -]+( on machine [01] \(host node0[12]\))? $collective(, the odd one out)?$" ||
   [ "$others_named" != "0 1 2" ] ||
   echo "$others" | grep -q nanosleep; then
  bad "the coordinator did not say rank 3 on machine 1 was at its sleep and ranks 0-2 in the collective: '$stood'"
fi
# Machine 1's agent (node02) said so for its ranks.
grep -Eq "W \[agent\] generation 0: .*; where its ranks stand: (.*; )?rank 3 $odd(;|$)" "$work/agent.out" ||
  bad "machine 1's agent did not say where rank 3 stood"

# Rank 3's stacks: in machine 1's log directory, the first line where it
# stood; with py-spy its dump, without it the reason there is none.
stacks=$(echo "$work"/logs1/*/gen0/rank3.stacks.txt)
if [ ! -f "$stacks" ]; then
  bad "no stacks file of rank 3 in machine 1's log directory: $(find "$work"/logs* -name '*.stacks.txt')"
else
  head -1 "$stacks" | grep -Eqx "rank 3: $odd" ||
    bad "rank 3's stacks do not say where it stood: $(head -1 "$stacks")"
  if [ "$mode" = py-spy ]; then
    grep -q '^  | Thread .*"MainThread"' "$stacks" || bad "rank 3's stacks file has no py-spy dump"
  else
    grep -q '^  | ' "$stacks" && bad "rank 3's stacks file has a py-spy dump, with no py-spy to be found"
    grep -qF "(no py-spy found next to the job's Python or on PATH: the kernel's view only" "$stacks" ||
      bad "rank 3's stacks file does not say py-spy was not found"
    # Absent, not refused as untrusted.
    ! grep -h "not running .* to capture hung workers" "$work/coord.out" "$work/agent.out" ||
      bad "a py-spy was found (and refused)"
  fi
fi
! ls "$work"/logs0/*/gen0/rank[23].stacks.txt >/dev/null 2>&1 ||
  bad "machine 1's ranks have stacks in machine 0's log directory"
stacks0=$(echo "$work"/logs0/*/gen0/rank0.stacks.txt)
head -1 "$stacks0" 2>/dev/null | grep -q "^rank 0: " ||
  bad "rank 0 has no stacks file in machine 0's log directory: $(head -1 "$stacks0" 2>&1)"

# Generation 1: each rank all-reduced once, on its machine, with the
# Python given.
for rank in 0 1 2 3; do
  host=node0$(( rank / 2 + 1 )) out=$work/coord.out
  [ $rank -ge 2 ] && out=$work/agent.out
  [ "$(grep -c "^\[rank $rank\] rank $rank: sum 4 on $host with $prefix$" "$out")" = 1 ] ||
    bad "rank $rank did not all-reduce once on $host with $prefix"
done
grep -q "I \[coord\] generation 1: world size 4" "$work/coord.out" ||
  bad "no generation 1"

# Nothing is left on either host.
for i in 1 2; do
  left=$(testhosts_pids $i)
  [ -z "$left" ] ||
    bad "processes left on ${TESTHOST_NAME[$i]}: $(ps -o pid=,args= -p "$(echo $left | tr ' ' ,)")"
done

if [ $fail != 0 ]; then
  echo "== trl-coord (node01)"; cat "$work/coord.out"
  echo "== trl-agent (node02)"; cat "$work/agent.out"
  echo "FAIL: $mode"
  exit 1
fi
grep "W \[coord\] stopping generation 0: " "$work/coord.out"
echo "$stood" | sed 's/^/stood: /'
head -1 "$stacks" | sed 's/^/machine 1 stacks: /'
echo "PASS: $mode: the CPU detector found the hang, rank 3 on node02 was named the odd one out, the job restarted and succeeded"

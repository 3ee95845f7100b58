#!/usr/bin/env bash
# A hang in an unchanged PyTorch script, found and explained (issue 33): a
# Gloo job of two ranks with the PyPI environment's Python, rank 1 asleep
# before its all-reduce in generation 0 (tests/pypi/hang_job.py). The CPU
# detector finds both ranks idle; before the kill the agent captures them
# with the py-spy next to that Python: rank 1 in its sleep at
# hang_job.py:11, rank 0 in all_reduce called from hang_job.py:13. The job
# restarts and succeeds.
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/testhosts.sh"  # skip_or_fail
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
venv=${TRL_PYPI_VENV:-/var/cache/trl-launch/pypi-venv}
[ -x "$venv/bin/python" ] ||
  skip_or_fail "no PyPI virtual environment at $venv (scripts/pypi_venv.sh makes it)"
[ -x "$venv/bin/py-spy" ] ||
  skip_or_fail "no py-spy in $venv (scripts/pypi_venv.sh adds tests/pypi/tools.txt)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/hang_job.py" "$work/"
# Below the tests' FreePort range and the span MASTER_PORT is picked from.
port=$(( 12000 + RANDOM % 4000 ))
fail() { echo "FAIL: $*"; cat "$work/coord.out"; exit 1; }
( cd "$work" && timeout 180 "$build/coordinator/trl-coord" start \
    --num_machines 1 --num_processes 2 --main_process_ip 127.0.0.1 \
    --main_process_port "$port" --use_cpu --max_restarts 1 \
    --hang_cpu_timeout 3 --log_dir "$work/logs" \
    --python "$venv/bin/python" hang_job.py ) >"$work/coord.out" 2>&1 ||
  fail "the job did not succeed after its restart"
grep -q "hung: its processes used less than 1% of a core" "$work/coord.out" ||
  fail "the hang was not reported with its detector"
grep -q "where its ranks stand: rank[s]* .*in <module> (hang_job.py:11)" \
  "$work/coord.out" || fail "the agent did not say where the ranks stood"
stood=$(grep "\[coord\] generation 0: where its ranks stood when it was stopped: " "$work/coord.out")
echo "$stood" | grep -q "rank 0 in all_reduce (torch/distributed/.*), from hang_job.py:13" &&
  echo "$stood" | grep -q "rank 1 in <module> (hang_job.py:11)" ||
  fail "the coordinator did not say where the job's ranks stood: $stood"
gen0=$(echo "$work"/logs/*/gen0)
head -1 "$gen0/rank1.stacks.txt" | grep -qx "rank 1: in <module> (hang_job.py:11)" ||
  fail "rank 1's stacks do not say it slept at hang_job.py:11: $(head -1 "$gen0/rank1.stacks.txt")"
head -1 "$gen0/rank0.stacks.txt" |
  grep -q "^rank 0: in all_reduce (torch/distributed/.*), from hang_job.py:13$" ||
  fail "rank 0's stacks do not say it waited in all_reduce from hang_job.py:13: $(head -1 "$gen0/rank0.stacks.txt")"
grep -q '^  | Thread .*"MainThread"' "$gen0/rank1.stacks.txt" ||
  fail "rank 1's stacks file has no py-spy dump"
grep -c "rank [01]: sum 2" "$work/coord.out" | grep -qx 2 ||
  fail "generation 1 did not all-reduce on both ranks"
echo "ok: the hang was found by the CPU detector and each rank's place named"

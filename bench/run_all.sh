#!/usr/bin/env bash
# The whole benchmark suite in one command: launch and restart against
# torchrun on two test hosts, a lost machine's replacement against torchrun
# on four (needs root; skipped with a note otherwise),
# the demo's all-reduce against torch.distributed, and the coordinator at
# 256, 1024, 4096 and 16,384 simulated agents. Writes the report (REPORT.md,
# results.json, scale.png) to bench/results/DATE-HOST/, or to OUT_DIR; a
# full run there also regenerates the benchmark tables of README.md and
# bench/README.md from the newest report (bench/tables.py --write).
#
# Usage: bench/run_all.sh [--quick] [OUT_DIR]
#   --quick: 64 simulated agents, one repetition, nothing else (what CI
#            runs to keep the suite from rotting; its numbers mean little)
# A simulator run that fails still leaves its row ("not run") in the
# report, which is written anyway; the exit status is then 1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
out=${1:-$root/bench/results/$(date +%Y-%m-%d)-$(hostname -s)}
build=${BUILD_DIR:-$root/build}
[ -x "$build/bench/sim/trl-agent-sim" ] || { echo "build first: scripts/setup.sh"; exit 1; }
# The raw numbers stay beside the report (results.json has them too).
raw=$out/raw
mkdir -p "$raw"

scale_ok=1
if [ $quick = 1 ]; then
  HEARTBEAT_PHASE=2 PS_RUNS=2 bash "$here/scale.sh" "$build" "$raw/scale.jsonl" 1 64 \
    || scale_ok=0
else
  if [ "$(id -u)" = 0 ]; then
    BENCH_RAW="$raw/launch.json" bash "$here/launch_noop.sh" "$build" 5
    BENCH_RAW="$raw/restart.json" bash "$here/restart_latency.sh" "$build" 5
    # A lost machine to the next generation (spare, 2:3, torchrun 2:3):
    # JSON lines kept in raw/ (report.py does not fold them in yet).
    BENCH_RAW="$raw/elastic_replace.jsonl" bash "$here/elastic_replace.sh" "$build" 3
  else
    echo "launch and restart benchmarks skipped: test hosts need root"
  fi
  BENCH_RAW="$raw/allreduce.json" bash "$here/allreduce_gloo.sh" "$build" 5
  bash "$here/scale.sh" "$build" "$raw/scale.jsonl" 3 256 1024 4096 || scale_ok=0
  # 16,384 agents x 8 ranks (131,072): one run (each takes minutes here).
  SCALE_APPEND=1 SCALE_REFERENCES=0 bash "$here/scale.sh" "$build" \
    "$raw/scale.jsonl" 1 16384 || scale_ok=0
fi
/usr/bin/python3 "$here/report.py" "$raw" "$out"
# A full report in bench/results/: the tables of README.md and
# bench/README.md are regenerated from the newest report there
# (bench/tables.py; the docs.bench_tables test checks them).
if [ $quick = 0 ] && [ "$(cd "$out/.." && pwd)" = "$root/bench/results" ]; then
  /usr/bin/python3 "$here/tables.py" --write
fi
if [ $scale_ok = 0 ]; then
  echo "FAIL: a simulator run failed (bench/scale.sh above); the report has it as not run"
  exit 1
fi

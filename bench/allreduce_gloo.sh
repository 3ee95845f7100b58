#!/usr/bin/env bash
# All-reduce of the demo trainer's gradient (8706 floats, 34 KiB) on CPU
# with Gloo, two workers on loopback: trl-launch (trl-allreduce-bench, the
# worker library, rendezvous through the coordinator's store) against
# torch.distributed under torchrun, side by side, alternating.
#
# Usage: bench/allreduce_gloo.sh BUILD_DIR [RUNS] [FLOATS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR [RUNS] [FLOATS]}" && pwd)
runs=${2:-5}
floats=${3:-8706}
source "$here/lib.sh"
python=${TRL_BENCH_PYTHON:-/usr/bin/python3}
torchrun=${TRL_BENCH_TORCHRUN:-/usr/bin/torchrun}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

field() { grep -o "$1=[0-9.]*" | cut -d= -f2; }
for run in $(seq 1 "$runs"); do
  "$build/coordinator/trl-coord" start --num_processes 2 --main_process_port 29561 \
    "$build/worker/trl-allreduce-bench" --floats "$floats" 2>/dev/null |
    grep RESULT | sed 's/^\[rank 0\] //' | tee -a "$work/trl.txt"
  # --redirects/--tee: Debian's torchrun 1.13 fails on Python 3.11 without.
  OMP_NUM_THREADS=1 "$torchrun" --nproc_per_node 2 --master_port 29562 \
    --redirects=1 --tee=1 --log_dir "$work/torchrun-$run" \
    "$here/allreduce_torch.py" --floats "$floats" 2>/dev/null |
    grep RESULT | sed 's/^\[default0\]://' | tee -a "$work/torch.txt"
done
trl=$(field median_us < "$work/trl.txt" | median)
torch=$(field median_us < "$work/torch.txt" | median)
echo
echo "all-reduce of $floats floats ($((floats * 4)) bytes), 2 workers, $runs runs (median of per-run medians):"
echo "  trl-launch (Gloo via worker library): ${trl} us  ($(field median_us < "$work/trl.txt" | minmax | sed 's/\.000//g') us)"
echo "  torchrun   (torch.distributed Gloo):  ${torch} us  ($(field median_us < "$work/torch.txt" | minmax | sed 's/\.000//g') us)"
echo "  ratio torch / trl-launch: $(echo "scale=2; $torch / $trl" | bc)"
if [ -n "${BENCH_RAW:-}" ]; then
  printf '{"floats": %d, "trl_launch_us": [%s], "torchrun_us": [%s]}\n' "$floats" \
    "$(field median_us < "$work/trl.txt" | paste -sd,)" \
    "$(field median_us < "$work/torch.txt" | paste -sd,)" >"$BENCH_RAW"
fi

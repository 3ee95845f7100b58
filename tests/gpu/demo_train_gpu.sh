#!/usr/bin/env bash
# On a machine with a GPU: trl-demo-train through the launcher with NCCL
# (the coordinator's per-generation unique id, one rank per GPU), checked
# against the same training on CPU, to 1e-5 (GPU and CPU arithmetic differ:
# README's 5e-8 is for CPU layouts only). Without a GPU, or without a build with
# CUDA and NCCL, it skips (exit 77) and says why.
#
# Usage: demo_train_gpu.sh BUILD_DIR
set -u
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
if ! command -v nvidia-smi >/dev/null || ! gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); then
  echo "SKIP: no GPU here (nvidia-smi is missing or lists no GPU)"; exit 77
fi
if [ "$gpus" -lt 1 ]; then echo "SKIP: nvidia-smi lists no GPU"; exit 77; fi
if [ ! -x "$build/coordinator/trl-nccl-root" ]; then
  echo "SKIP: $build was built without NCCL (CUDA toolkit with NCCL under /usr/local/cuda?)"; exit 77
fi
nvidia-smi -L

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
steps=100
per_device=$((32 / gpus)); [ $per_device -ge 1 ] || per_device=1
effective=$((per_device * gpus))
fail=0

"$build/coordinator/trl-coord" start --num_processes "$gpus" \
  --main_process_port 29551 \
  "$build/worker/trl-demo-train" --backend nccl \
  --per_device_train_batch_size $per_device --max_steps $steps \
  --logging_steps 20 --output_dir "$work/gpu" >"$work/gpu.out" 2>"$work/gpu.err"
rc=$?
cat "$work/gpu.out"
[ $rc = 0 ] || { echo "FAIL: GPU run exit $rc"; cat "$work/gpu.err"; fail=1; }
grep -q "$gpus rank(s) over NCCL" "$work/gpu.out" \
  || { echo "FAIL: the GPU run did not use NCCL"; fail=1; }
grep -q "no NCCL unique id" "$work/gpu.err" \
  && { echo "FAIL: the coordinator had no NCCL id"; grep -i nccl "$work/gpu.err"; fail=1; }

"$build/worker/trl-demo-train" --backend none --per_device_train_batch_size $effective \
  --max_steps $steps --logging_steps 20 --output_dir "$work/cpu" >"$work/cpu.out" 2>&1 \
  || { echo "FAIL: CPU run"; cat "$work/cpu.out"; fail=1; }
cat "$work/cpu.out"

worst=$(paste "$work/cpu/final_weights.txt" "$work/gpu/final_weights.txt" |
  awk 'BEGIN { worst = 0; n = 0 }
       { n++; d = $1 - $2; if (d < 0) d = -d; if (d > worst) worst = d }
       END { if (n == 0) print "none"; else printf "%.3g\n", worst }')
echo "max |w(cpu) - w(gpu, NCCL)| = $worst over $(wc -l < "$work/cpu/final_weights.txt") weights"
case "$worst" in
  none|"") echo "FAIL: no weights to compare"; fail=1 ;;
  *) [ "$(echo "$worst <= 0.00001" | sed 's/e/*10^/' | bc -l)" = 1 ] \
       || { echo "FAIL: GPU and CPU weights differ by $worst"; fail=1; } ;;
esac
[ $fail = 0 ] && echo "PASS: $gpus GPU rank(s) over NCCL train the CPU run's weights"
exit $fail

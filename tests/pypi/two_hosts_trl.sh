#!/usr/bin/env bash
# A TRL user's job from PyPI, launched twice over two test hosts x 2
# processes from the same Accelerate config: once with `accelerate launch`
# on each host (what the user ran before), once with trl-coord + trl-agent.
# Both runs use the cached virtual environment of scripts/pypi_venv.sh
# (PyTorch, Accelerate, Transformers, TRL, DeepSpeed from PyPI), activated
# as a user would (its bin/ first on PATH), and TRL's own SFTTrainer
# (tests/pypi/sft_job.py). tests/pypi/compare_runs.py then compares the
# workers' environments, what Accelerate made of them, the losses and the
# final weights; nothing may be left on either host.
#
# Usage: two_hosts_trl.sh BUILD_DIR CONFIG
#   CONFIG: no, multi_cpu (one process on host 1: Accelerate's plain
#   launcher, DistributedType.NO), ddp (TRL's multi_node.yaml), zero2, zero3 (TRL's DeepSpeed
#   configs: DeepSpeed's CPU accelerator over gloo), fsdp2 (Accelerate
#   enables FSDP only on GPUs: on CPU the job trains as plain DDP, and the
#   workers' FSDP variables are compared), fsdp1 (the environment only:
#   Accelerate refuses FSDP1's sync_module_states on CPU under either
#   launcher, so the workers write their environment and stop).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR CONFIG}" && pwd)
config=${2:?usage: $0 BUILD_DIR CONFIG}
source "$here/../lib/testhosts.sh"
testhosts_skip_unless_possible
venv=${TRL_PYPI_VENV:-/var/cache/trl-launch/pypi-venv}
[ -x "$venv/bin/accelerate" ] && [ -x "$venv/bin/python" ] ||
  skip_or_fail "no PyPI virtual environment at $venv (scripts/pypi_venv.sh makes it)"

# machines x processes in all; the single-process types run on host 1.
machines=2 processes=4 distributed_type=""
case $config in
  ddp) source_config=multi_node.yaml ;;
  zero2) source_config=deepspeed_zero2.yaml ;;
  zero3) source_config=deepspeed_zero3.yaml ;;
  fsdp1) source_config=fsdp1.yaml ;;
  fsdp2) source_config=fsdp2.yaml ;;
  no) source_config=single_gpu.yaml machines=1 processes=1 distributed_type=NO ;;
  multi_cpu) source_config=single_gpu.yaml machines=1 processes=1 distributed_type=MULTI_CPU ;;
  *) echo "unknown CONFIG '$config' (ddp, zero2, zero3, fsdp1, fsdp2, no, multi_cpu)"; exit 2 ;;
esac

work=$(mktemp -d)
cleanup() { testhosts_destroy; [ -n "${TRL_KEEP_WORK:-}" ] || rm -rf "$work"; }
trap cleanup EXIT
# Each host's name resolves to its network address, as a cluster's DNS
# has it: with Debian's 127.0.1.1 entry, `accelerate launch`'s workers on
# machine 0 advertise a loopback address and the job never forms (trl-launch
# names the interface itself: GLOO_SOCKET_IFNAME).
export TESTHOSTS_OWN_NAME=network
testhosts_create "trlpy$(( $$ % 1000 ))x" 2
master=${TESTHOST_ADDR[1]}
fail=0

# TRL's config, made a two-machine job on the test hosts: 2 x 2 processes,
# machine 0's address and a port. Everything else is TRL's own.
port=$(( 29500 + $$ % 400 ))
"$venv/bin/python" - "$here/../data/accelerate_configs/$source_config" \
  "$work/config.yaml" "$master" "$port" "$machines" "$processes" \
  "$distributed_type" <<'EOF'
import sys, yaml
source, target, ip, port, machines, processes, distributed_type = sys.argv[1:]
with open(source) as f:
    config = yaml.safe_load(f)
config.update(num_machines=int(machines), num_processes=int(processes),
              machine_rank=0, main_process_ip=ip, main_process_port=int(port))
if distributed_type:
    config.update(distributed_type=distributed_type, use_cpu=True)
with open(target, "w") as f:
    yaml.safe_dump(config, f)
EOF
echo "== $config: $source_config as a $machines-machine job of $processes process(es)"
cat "$work/config.yaml"

export PATH="$venv/bin:$PATH" TOKENIZERS_PARALLELISM=false \
  HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_NO_ADVISORY_WARNINGS=1
job=("$here/sft_job.py")
job_args=(--use_cpu)
# A process group over gloo, as TRL's CPU docs say (a single process has
# none).
[ "$processes" -gt 1 ] && job_args+=(--ddp_backend gloo)
compare_args=()
if [ "$config" = fsdp1 ]; then
  job_args+=(--environment_only); compare_args+=(--environment_only)
fi
# DeepSpeed on CPU, as its docs say: its CPU accelerator (over gloo).
export DS_ACCELERATOR=cpu

check_hosts_empty() {
  for i in 1 2; do
    local left; left=$(testhosts_pids $i)
    if [ -n "$left" ]; then
      echo "FAIL: $1: processes left on ${TESTHOST_NAME[$i]}: $(ps -o pid=,args= -p "$(echo $left | tr ' ' ,)")"
      fail=1
    fi
  done
}

# With `accelerate launch`, as the user ran it: the same command on both.
for i in $(seq 1 "$machines"); do
  testhosts_exec $i timeout -k 10 600 accelerate launch --config_file "$work/config.yaml" \
    --machine_rank $((i - 1)) "${job[@]}" "$work/accelerate" "${job_args[@]}" \
    >"$work/accelerate.$i.log" 2>&1 &
  eval "accelerate_pid_$i=$!"
done
for i in $(seq 1 "$machines"); do
  eval "wait \"\$accelerate_pid_$i\""; rc=$?
  echo "== accelerate launch: exit $rc (machine $((i - 1)))"
  if [ $rc != 0 ]; then
    echo "FAIL: accelerate launch on machine $((i - 1))"
    tail -n 40 "$work/accelerate.$i.log"; fail=1
  fi
done
check_hosts_empty "accelerate launch"

# With trl-launch: the coordinator on machine 0, an agent on machine 1.
run_trl_launch() {
  agent_rc=0
  rm -rf "$work/trl"
  if [ "$machines" = 2 ]; then
    testhosts_exec 2 "$build/agent/trl-agent" --config_file "$work/config.yaml" \
      --machine_rank 1 >"$work/agent.log" 2>&1 &
    agent=$!
  fi
  testhosts_exec 1 timeout -k 10 600 "$build/coordinator/trl-coord" start --config_file "$work/config.yaml" \
    "${job[@]}" "$work/trl" "${job_args[@]}" >"$work/coord.log" 2>&1
  coord_rc=$?
  [ "$machines" = 2 ] && { wait $agent; agent_rc=$?; }
  echo "== trl-launch: trl-coord exit $coord_rc, trl-agent exit $agent_rc"
}
run_trl_launch
# Once (CI, ZeRO-3 on CPU): the training ended on every rank, then one
# rank's Python aborted on its way out ("terminate called without an active
# exception": a thread of the worker's stack still joinable at exit), and
# trl-launch rightly failed the job. That is the worker stack's race, not
# the launcher's: the trl-launch side runs once more, and says so. Any
# other failure, or the same twice, fails the test.
if [ $coord_rc != 0 ] && grep -q "'train_runtime'" "$work/coord.log" &&
   grep -q "killed by signal 6 (SIGABRT)" "$work/coord.log" &&
   grep -q "terminate called without an active exception" "$work/coord.log"; then
  echo "NOTE: a worker aborted at its exit after the training ended (the worker stack's teardown race): trl-launch's run once more"
  grep -m3 "SIGABRT\|terminate called" "$work/coord.log"
  cp "$work/coord.log" "$work/coord.first.log"
  check_hosts_empty "trl-launch (the aborted run)"
  run_trl_launch
fi
if [ $coord_rc != 0 ] || [ $agent_rc != 0 ]; then
  echo "FAIL: trl-launch"; tail -n 40 "$work/coord.log"
  [ "$machines" = 2 ] && tail -n 40 "$work/agent.log"
  fail=1
fi
check_hosts_empty "trl-launch"

if [ $fail = 0 ]; then
  "$venv/bin/python" "$here/compare_runs.py" "$config" "$work/accelerate" "$work/trl" \
    --world "$processes" "${compare_args[@]}" || fail=1
fi
[ $fail = 0 ] && echo "PASS: $config" || echo "FAIL: $config"
exit $fail

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
#   CONFIG: ddp (TRL's multi_node.yaml), zero2, zero3 (TRL's DeepSpeed
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

case $config in
  ddp) source_config=multi_node.yaml ;;
  zero2) source_config=deepspeed_zero2.yaml ;;
  zero3) source_config=deepspeed_zero3.yaml ;;
  fsdp1) source_config=fsdp1.yaml ;;
  fsdp2) source_config=fsdp2.yaml ;;
  *) echo "unknown CONFIG '$config' (ddp, zero2, zero3, fsdp1, fsdp2)"; exit 2 ;;
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
  "$work/config.yaml" "$master" "$port" <<'EOF'
import sys, yaml
source, target, ip, port = sys.argv[1:]
with open(source) as f:
    config = yaml.safe_load(f)
config.update(num_machines=2, num_processes=4, machine_rank=0,
              main_process_ip=ip, main_process_port=int(port))
with open(target, "w") as f:
    yaml.safe_dump(config, f)
EOF
echo "== $config: $source_config as a 2 x 2 job"
cat "$work/config.yaml"

export PATH="$venv/bin:$PATH" TOKENIZERS_PARALLELISM=false \
  HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_NO_ADVISORY_WARNINGS=1
job=("$here/sft_job.py")
job_args=(--ddp_backend gloo --use_cpu)
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
for i in 1 2; do
  testhosts_exec $i timeout -k 10 600 accelerate launch --config_file "$work/config.yaml" \
    --machine_rank $((i - 1)) "${job[@]}" "$work/accelerate" "${job_args[@]}" \
    >"$work/accelerate.$i.log" 2>&1 &
  eval "accelerate_pid_$i=$!"
done
wait "$accelerate_pid_1"; rc1=$?
wait "$accelerate_pid_2"; rc2=$?
echo "== accelerate launch: exit $rc1 (machine 0), $rc2 (machine 1)"
if [ $rc1 != 0 ] || [ $rc2 != 0 ]; then
  echo "FAIL: accelerate launch"; tail -n 40 "$work/accelerate.1.log" "$work/accelerate.2.log"; fail=1
fi
check_hosts_empty "accelerate launch"

# With trl-launch: the coordinator on machine 0, an agent on machine 1.
testhosts_exec 2 "$build/agent/trl-agent" --config_file "$work/config.yaml" \
  --machine_rank 1 >"$work/agent.log" 2>&1 &
agent=$!
testhosts_exec 1 timeout -k 10 600 "$build/coordinator/trl-coord" start --config_file "$work/config.yaml" \
  "${job[@]}" "$work/trl" "${job_args[@]}" >"$work/coord.log" 2>&1
coord_rc=$?
wait $agent; agent_rc=$?
echo "== trl-launch: trl-coord exit $coord_rc, trl-agent exit $agent_rc"
if [ $coord_rc != 0 ] || [ $agent_rc != 0 ]; then
  echo "FAIL: trl-launch"; tail -n 40 "$work/coord.log" "$work/agent.log"; fail=1
fi
check_hosts_empty "trl-launch"

if [ $fail = 0 ]; then
  "$venv/bin/python" "$here/compare_runs.py" "$config" "$work/accelerate" "$work/trl" \
    "${compare_args[@]}" || fail=1
fi
[ $fail = 0 ] && echo "PASS: $config" || echo "FAIL: $config"
exit $fail

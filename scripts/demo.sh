#!/usr/bin/env bash
# Sets up trl-launch and runs the local demo job: one machine, two CPU
# workers on loopback, with the built-in default config. The workers run
# trl-demo-train: data-parallel training of a small model (Gloo all-reduce,
# rendezvous through the coordinator's store); rank 0 prints the loss as it
# falls. Extra arguments go to the trainer (e.g. --max_steps 500).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec build/coordinator/trl-coord start --num_processes 2 \
  --main_process_port "${TRL_DEMO_PORT:-29531}" \
  build/worker/trl-demo-train --per_device_train_batch_size 8 \
  --gradient_accumulation_steps 2 --max_steps 200 --logging_steps 20 "$@"

#!/usr/bin/env bash
# Sets up trl-launch and runs the local demo job: one machine, two CPU
# workers on loopback, with the built-in default config. Each worker shows
# its rank and the launch environment trl-launch gave it.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec build/coordinator/trl-coord start --num_processes 2 \
  --main_process_port "${TRL_DEMO_PORT:-29531}" \
  build/worker/trl-env-worker --print_env "$@"

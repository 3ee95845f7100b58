#!/usr/bin/env bash
# The coordinator at scale, without hardware: for each number of agents,
# a real trl-coord (no local agent) and trl-agent-sim with that many
# simulated agents x 8 ranks, each its own gRPC stream. Writes one JSON
# object per run (see bench/sim/agent_sim_main.cc for the fields), then a
# real trl-agent's resident memory while it runs a small job.
#
# Usage: bench/scale.sh BUILD_DIR OUT.jsonl [REPS] [AGENTS...]
#   e.g. bench/scale.sh build /tmp/scale.jsonl 3 256 1024 4096
# HEARTBEAT_PHASE (s, default 10) and PS_RUNS (default 5) tune a run;
# PS_BASELINE=PATH/trl-coord times that build's `ps --json` and `ps` too,
# against the same coordinator (e.g. one from before a change to them).
# SCALE_APPEND=1 adds to OUT.jsonl instead of starting it afresh;
# SCALE_REFERENCES=0 leaves out the reference runs after the sizes (heartbeats
# on the stream, --insecure, fast detection, a real agent's memory).
# Every run goes on when a simulator run fails (its partial JSON line is
# kept), but the exit status is then 1, after a line naming the failures.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR OUT.jsonl [REPS] [AGENTS...]}" && pwd)
out=${2:?usage: $0 BUILD_DIR OUT.jsonl [REPS] [AGENTS...]}
reps=${3:-3}
shift 3 2>/dev/null || shift $#
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(256 1024 4096)
# A port of its own (another run of the suite, e.g. another checkout's
# ctest, may be on 29600 at the same time): SCALE_PORT, else one drawn from
# 29600..29999.
port=${SCALE_PORT:-$((29600 + RANDOM % 400))}
[ "${SCALE_APPEND:-0}" = 1 ] || : >"$out"
coord=""
failures=()
cleanup() { [ -n "$coord" ] && kill "$coord" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT
# The default is what is measured: TLS with the token's derived identity
# (a token of the run's own); SECURITY=insecure for the reference run.
TRL_AUTH_TOKEN=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
export TRL_AUTH_TOKEN
security_flags() { [ "${SECURITY:-}" = insecure ] && echo --insecure || true; }
# sim_run AGENTS EXTRA_SIM_FLAGS... -- COORD_AND_SIM_FLAGS...: a coordinator
# for AGENTS agents x 8 ranks and one simulator run against it; prints the
# simulator's JSON line; its status is the simulator's.
sim_run() {
  local agents=$1; shift
  local sim_flags=() rc=0
  while [ "$1" != -- ]; do sim_flags+=("$1"); shift; done; shift
  local flags=(--num_machines "$agents" --num_processes $((agents * 8))
               --main_process_ip 127.0.0.1 --main_process_port "$port" --use_cpu
               $(security_flags) --heartbeat_interval 1 "$@")
  # Every simulated agent connects from 127.0.0.1: one address may hold
  # them all (a real cluster has an address per machine).
  "$build/coordinator/trl-coord" start --no_local_agent "${flags[@]}" \
    --connections_per_address $((agents + 64)) \
    --max_restarts 3 /bin/true >/dev/null 2>&1 &
  coord=$!
  # Until our coordinator listens: what answers on the port must be ours
  # (one that could not bind exits).
  for _ in $(seq 1 100); do
    ss -Hltnp "sport = :$port" 2>/dev/null | grep -q "pid=$coord," && break
    kill -0 "$coord" 2>/dev/null || break
    sleep 0.05
  done
  if ! ss -Hltnp "sport = :$port" 2>/dev/null | grep -q "pid=$coord,"; then
    echo "FAIL: trl-coord for $agents agents does not listen on $port (in use?)" >&2
    kill "$coord" 2>/dev/null || true; wait "$coord" 2>/dev/null; coord=""; return 1
  fi
  "$build/bench/sim/trl-agent-sim" "${flags[@]}" --coordinator_pid "$coord" \
    --ps_binary "$build/coordinator/trl-coord" --timeout 120 \
    ${PS_BASELINE:+--ps_baseline_binary "$PS_BASELINE"} \
    --heartbeat_phase "${HEARTBEAT_PHASE:-10}" "${sim_flags[@]}" || rc=$?
  [ $rc = 0 ] || echo "FAIL: run of $agents agents: trl-agent-sim exited $rc" >&2
  kill "$coord" 2>/dev/null || true; wait "$coord" 2>/dev/null || true; coord=""
  return $rc
}

for agents in "${sizes[@]}"; do
  for rep in $(seq 1 "$reps"); do
    sim_run "$agents" --ps_runs "${PS_RUNS:-5}" -- | tee -a "$out" \
      || failures+=("$agents agents, run $rep")
  done
done

if [ "${SCALE_REFERENCES:-1}" = 0 ]; then
  if [ ${#failures[@]} -gt 0 ]; then
    printf 'FAIL: simulator run failed: %s\n' "${failures[@]}" >&2
    exit 1
  fi
  exit 0
fi

# The reference for the heartbeats' cost: the largest size with heartbeats
# on the gRPC stream (--no_udp_heartbeats), rendezvous and heartbeats only.
largest=${sizes[${#sizes[@]}-1]}
for rep in $(seq 1 "$reps"); do
  sim_run "$largest" --ps_runs 1 --no_failures -- --no_udp_heartbeats | tee -a "$out" \
    || failures+=("$largest agents, heartbeats on the stream, run $rep")
done

# The reference for the handshakes' cost: the largest size without TLS
# (--insecure), rendezvous and heartbeats only.
for rep in $(seq 1 "$reps"); do
  SECURITY=insecure sim_run "$largest" --ps_runs 1 --no_failures -- | tee -a "$out" \
    || failures+=("$largest agents, --insecure, run $rep")
done

# Detection configured down: heartbeats every 0.1 s, 3 misses (0.3 s).
flags=(--num_machines 256 --num_processes 2048 --main_process_ip 127.0.0.1
       --main_process_port "$port" --use_cpu --insecure --heartbeat_interval 0.1)
"$build/coordinator/trl-coord" start --no_local_agent "${flags[@]}" \
  --connections_per_address 320 --max_restarts 3 /bin/true >/dev/null 2>&1 &
coord=$!
sleep 0.5
"$build/bench/sim/trl-agent-sim" "${flags[@]}" --coordinator_pid "$coord" \
  --heartbeat_phase 1 --timeout 60 | tee -a "$out" || failures+=("fast detection, 256 agents")
kill "$coord" 2>/dev/null || true; wait "$coord" 2>/dev/null || true; coord=""

# A real agent's memory: trl-coord (machine 0) and one trl-agent (machine
# 1), two workers each that sleep; the agent's VmRSS is read while they run.
flags=(--num_machines 2 --num_processes 4 --main_process_ip 127.0.0.1
       --main_process_port "$port" --use_cpu --insecure)
"$build/coordinator/trl-coord" start "${flags[@]}" "$build/worker/trl-env-worker" \
  --sleep 3 >/dev/null 2>&1 &
coord=$!
"$build/agent/trl-agent" --machine_rank 1 "${flags[@]}" >/dev/null 2>&1 &
agent=$!
sleep 2
mib() { awk -v key="$1:" '$1 == key {printf "%.1f", $2 / 1024}' "/proc/$agent/status" 2>/dev/null || echo -1; }
rss=$(mib VmRSS); anon=$(mib RssAnon); file=$(mib RssFile)
wait "$agent" 2>/dev/null || true
wait "$coord" 2>/dev/null || true; coord=""
echo "{\"real_agent_rss_mib\": $rss, \"real_agent_anon_mib\": $anon, \"real_agent_file_mib\": $file}" | tee -a "$out"
if [ ${#failures[@]} -gt 0 ]; then
  printf 'FAIL: simulator run failed: %s\n' "${failures[@]}" >&2
  exit 1
fi

#!/usr/bin/env bash
# Failures on two test hosts, two workers each, every one followed by a
# restart that succeeds:
#   worker:      kill -9 of a worker on node02
#   agent:       kill -9 of node02's agent, then the agent started again
#   coordinator: kill -9 of trl-coord on node01, then started again
# After each: every generation has ranks 0..3 exactly once, all agreeing on
# TORCHELASTIC_RESTART_COUNT; no generation overlaps another; nothing is left
# on either host and the coordinator's port is free.
#
# Usage: failures.sh BUILD_DIR [SCENARIO...]
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR [worker|agent|coordinator]...}" && pwd)
shift
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(worker agent coordinator)
source "$here/../lib/testhosts.sh"
source "$here/../lib/generations.sh"
testhosts_skip_unless_possible

work=$(mktemp -d)
cleanup() { testhosts_destroy; rm -rf "$work"; }
trap cleanup EXIT
testhosts_create "trlfl$(( $$ % 10000 ))x" 2

write_generation_worker "$work/worker.sh"

port=29400
flags=(--num_machines 2 --num_processes 4 --main_process_ip "${TESTHOST_ADDR[1]}"
       --main_process_port $port --use_cpu --max_restarts 2 --stop_grace 2
       --heartbeat_interval 0.5 --lease 2 --rejoin_timeout 60)

outputs() { cat "$run"/*.out 2>/dev/null; }
gen0_up() { [ "$(outputs | grep -c 'start gen 0')" = 4 ]; }
start_agent() {
  testhosts_exec 2 "$build/agent/trl-agent" --machine_rank 1 "${flags[@]}" \
    >"$run/agent$1.out" 2>"$run/agent$1.err" &
  eval "agent$1=\$!"
}
start_coord() {
  testhosts_exec 1 "$build/coordinator/trl-coord" start "${flags[@]}" \
    --state_file "$run/state" "$work/worker.sh" \
    >"$run/coord$1.out" 2>"$run/coord$1.err" &
  eval "coord$1=\$!"
}
host_pid() {  # the pid, as seen from outside, of the process matching $2 on host $1
  for pid in $(testhosts_pids "$1"); do
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2"; then echo "$pid"; return; fi
  done
}

check_invariants() {  # after a scenario
  local fail=0 all; all=$(outputs)
  local last; last=$(echo "$all" | last_generation)
  [ "${last:-0}" -ge 1 ] || { echo "FAIL: no generation after 0 ran"; fail=1; }
  # Every generation: ranks 0..3 once each (a generation the failure cut
  # short may miss ranks that had not started).
  for g in $(echo "$all" | awk '/start gen/ {print $5}' | sort -un); do
    dup=$(echo "$all" | awk -v g="$g" '/start gen/ && $5 == g {print $7}' | sort | uniq -d)
    [ -z "$dup" ] || { echo "FAIL: generation $g ran rank(s) $dup twice"; fail=1; }
  done
  for rank in 0 1 2 3; do
    echo "$all" | grep -q "end gen $last rank $rank " || { echo "FAIL: rank $rank of generation $last did not finish"; fail=1; }
  done
  local overlap; overlap=$(echo "$all" | generations_overlap)
  [ -z "$overlap" ] || { echo "FAIL: generations overlapped: $overlap"; fail=1; }
  for i in 1 2; do
    left=$(testhosts_pids $i)
    [ -z "$left" ] || { echo "FAIL: processes left on ${TESTHOST_NAME[$i]}: $(ps -o args= -p $left | tr '\n' ';')"; fail=1; }
  done
  if ip netns exec "${TESTHOST_PREFIX}1" ss -Hltn "sport = :$port" | grep -q .; then
    echo "FAIL: port $port still listens on node01"; fail=1
  fi
  return $fail
}

total=0
for scenario in "${scenarios[@]}"; do
  run="$work/$scenario"; mkdir -p "$run"
  echo "== scenario: $scenario"
  bad=0
  start_agent 1
  start_coord 1
  if ! wait_for 30 gen0_up; then
    echo "FAIL: generation 0 did not start"; cat "$run"/*; total=1; continue
  fi
  case $scenario in
    worker)
      pid=$(outputs | awk '/start gen 0 rank 2 / {print $9}')
      [ -n "$pid" ] || { echo "FAIL: no pid for rank 2"; bad=1; }
      kill -9 "$pid"
      wait $coord1; crc=$?; wait $agent1; arc=$?
      ;;
    agent)
      pid=$(host_pid 2 trl-agent)
      [ -n "$pid" ] || { echo "FAIL: no trl-agent on node02"; bad=1; }
      kill -9 "$pid"
      wait_for 10 grep -q "disconnected" "$run/coord1.err" \
        || { echo "FAIL: the coordinator did not notice"; bad=1; }
      start_agent 2
      wait $coord1; crc=$?; wait $agent2; arc=$?
      ;;
    coordinator)
      pid=$(host_pid 1 trl-coord)
      [ -n "$pid" ] || { echo "FAIL: no trl-coord on node01"; bad=1; }
      kill -9 "$pid"
      wait $coord1
      gen0_stopped() { [ "$(grep -c 'end gen 0' "$run/agent1.out")" = 2 ]; }
      wait_for 10 gen0_stopped \
        || { echo "FAIL: node02 kept its workers without a coordinator"; bad=1; }
      start_coord 2
      wait $coord2; crc=$?; wait $agent1; arc=$?
      grep -q "resuming job" "$run/coord2.err" || { echo "FAIL: the job was not resumed"; bad=1; }
      ;;
  esac
  echo "trl-coord exit $crc, trl-agent exit $arc"
  [ $crc = 0 ] && [ $arc = 0 ] || { echo "FAIL: non-zero exit"; cat "$run"/*.err; bad=1; }
  check_invariants || { outputs; bad=1; }
  if [ $bad = 0 ]; then echo "PASS: $scenario"; else echo "FAIL: $scenario"; total=1; fi
done
[ $total = 0 ] && echo "PASS: ${scenarios[*]}"
exit $total

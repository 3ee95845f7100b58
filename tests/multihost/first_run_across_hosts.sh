#!/usr/bin/env bash
# A newcomer's first two-node job, on two test hosts with a home each (the
# token is not shared), checked as the person sees it:
#   1. node01's coordinator says where the token is and that every machine
#      needs the same file; while machine 1 is missing it says so, with the
#      command to run there, and `ps` names the missing machine;
#   2. node03's agent, given a wrong port, says nothing listens there;
#      given another token, it names its token file, shows none of gRPC's
#      or OpenSSL's lines, and exits 2;
#   3. node02's agent, with no token yet, says where it looked; once the
#      file is copied it joins by itself, and the job runs;
#   4. `start --log_dir` covers node02's ranks too;
#   5. a failing rank on node02 is named on node01 with its host and the
#      program that ran, and `logs -f` from node03 exits with the job's code.
#
# Usage: first_run_across_hosts.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
source "$here/../lib/testhosts.sh"
source "$here/../lib/generations.sh"
testhosts_skip_unless_possible

work=$(mktemp -d)
cleanup() { testhosts_destroy; rm -rf "$work"; }
trap cleanup EXIT
testhosts_create "fr$(( $$ % 10000 ))x" 3
mkdir -p "$work/home1" "$work/home2" "$work/home3/.trl"
printf 'f00dfeedf00dfeedf00dfeedf00dfeed' >"$work/home3/.trl/token"
chmod 600 "$work/home3/.trl/token"

# Rank 3 (node02) fails once every rank has printed its line.
cat >"$work/worker.sh" <<'WORKER'
#!/bin/sh
echo "step 1 of rank $RANK"
sleep 1
if [ "$RANK" = 3 ]; then echo "rank 3 gives up" >&2; exit 7; fi
sleep 30
WORKER
chmod +x "$work/worker.sh"

addr=${TESTHOST_ADDR[1]}
flags=(--num_machines 2 --num_processes 4 --main_process_ip "$addr"
       --main_process_port 29400 --use_cpu --no_python
       --waiting_report_interval 1)
on() { local i=$1 home=$2; shift 2; testhosts_exec "$i" env HOME="$home" "$@"; }
fail=0
check() {  # check FILE TEXT WHAT: TEXT (fixed) is in FILE
  grep -qF -- "$2" "$1" || { echo "FAIL: $3"; echo "  wanted: $2"; fail=1; }
}

on 1 "$work/home1" "$build/coordinator/trl-coord" start "${flags[@]}" \
  --log_dir "$work/logs" --state_file "$work/state" "$work/worker.sh" \
  >"$work/coord.out" 2>"$work/coord.err" &
coord=$!
said_twice() { [ "$(grep -c 'still waiting for machine 1 of 2' "$work/coord.err")" -ge 2 ]; }
if ! wait_for 20 said_twice; then
  echo "FAIL: the coordinator did not say twice what it waits for"
  cat "$work/coord.err"; exit 1
fi
check "$work/coord.err" "auth token: $work/home1/.trl/token (created now). Every machine of this job needs this same file" \
  "start did not say where the token is"
check "$work/coord.err" "On its host, run: trl-agent --num_machines 2 --num_processes 4 --main_process_ip $addr --main_process_port 29400" \
  "the wait did not give the command to run"
on 1 "$work/home1" "$build/coordinator/trl-coord" ps --address "$addr:29400" \
  >"$work/ps.out" 2>&1
check "$work/ps.out" "waiting for: 1 machine not registered (1)" "ps did not name the machine it waits for"

# A wrong port, then another token, from node03.
on 3 "$work/home3" "$build/agent/trl-agent" --machine_rank 1 \
  "${flags[@]/29400/29499}" --rdzv_timeout 4 >"$work/port.out" 2>"$work/port.err" &
port_agent=$!
on 3 "$work/home3" timeout 20 "$build/agent/trl-agent" --machine_rank 1 \
  "${flags[@]}" >"$work/token.out" 2>"$work/token.err"
token_rc=$?
[ $token_rc = 2 ] || { echo "FAIL: an agent with another token exited $token_rc, not 2"; fail=1; }
check "$work/token.err" "another token than this agent's ($work/home3/.trl/token)" \
  "the wrong token's file was not named"
if grep -qE 'SSL_ERROR|Handshake failed' "$work/token.err"; then
  echo "FAIL: gRPC's handshake lines were shown"; fail=1
fi
wait "$port_agent"; port_rc=$?
[ $port_rc = 1 ] || { echo "FAIL: an agent at a wrong port exited $port_rc, not 1, at the end of its wait"; fail=1; }
check "$work/port.err" "did not answer within 4 s: connection refused: nothing listens on port 29499 at $addr" \
  "a wrong port was not told apart"

# node02 with no token yet: it says so, then joins once the file is there.
on 2 "$work/home2" "$build/agent/trl-agent" --machine_rank 1 "${flags[@]}" \
  >"$work/agent.out" 2>"$work/agent.err" &
agent=$!
no_token() { grep -q 'waiting for the auth token' "$work/agent.err"; }
wait_for 10 no_token || { echo "FAIL: the agent did not say it waits for its token"; fail=1; }
check "$work/agent.err" "no auth token: $work/home2/.trl/token does not exist" \
  "the agent did not say where it looked for the token"
mkdir -p "$work/home2/.trl"
install -m 600 "$work/home1/.trl/token" "$work/home2/.trl/token"
started() { grep -q '\[rank 3\] step 1 of rank 3' "$work/agent.out"; }
wait_for 20 started || { echo "FAIL: the job did not start once the token was copied"; fail=1; }
on 3 "$work/home1" timeout 30 "$build/coordinator/trl-coord" logs -f \
  --address "$addr:29400" >"$work/follow.out" 2>"$work/follow.err" &
follow=$!

wait $coord; coord_rc=$?
wait $agent; agent_rc=$?
wait $follow; follow_rc=$?
echo "trl-coord exit $coord_rc, trl-agent exit $agent_rc, logs -f exit $follow_rc"
[ $coord_rc = 7 ] && [ $agent_rc = 7 ] && [ $follow_rc = 7 ] ||
  { echo "FAIL: every one should exit 7, the failing rank's code"; fail=1; }
check "$work/coord.err" "rank 3 (local rank 1 on machine 1, host ${TESTHOST_NAME[2]}) exited with code 7 (program $work/worker.sh)" \
  "the failure did not name the host and the program"
check "$work/coord.err" "| rank 3 gives up" "the failing rank's last line was not shown"
check "$work/agent.err" "(the coordinator's --log_dir)" "node02 did not say where its rank logs go"
for rank in 0 1 2 3; do
  log=$(ls "$work"/logs/*/gen0/rank$rank.log 2>/dev/null)
  grep -q "step 1 of rank $rank" $log 2>/dev/null ||
    { echo "FAIL: no log of rank $rank under the coordinator's --log_dir"; fail=1; }
done
for i in 1 2 3; do
  left=$(testhosts_pids $i)
  [ -z "$left" ] || { echo "FAIL: processes left on ${TESTHOST_NAME[$i]}: $left"; fail=1; }
done
if [ $fail != 0 ]; then
  for f in coord.err agent.err port.err token.err ps.out follow.out follow.err; do
    echo "== $f"; tail -8 "$work/$f"
  done
fi
[ $fail = 0 ] && echo "PASS: a two-node first run, token step and mistakes included, as a newcomer sees it"
exit $fail

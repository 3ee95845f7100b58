#!/usr/bin/env bash
# A flapping host is cordoned. trl-coord on node01 (machine 0), agents on
# node02 (machine 1) and node03 (machine 2), 2 workers each; on node02
# every worker exits 1 0.5 s after it starts, the others run until the
# test releases them. With --cordon_after 2 (window 600 s) and
# --max_restarts 5, node02 fails generations 0 and 1 and is then cordoned:
# no worker starts on it again, and
#   spare (default): `trl-agent --spare` on node04 takes machine 1; the
#     next generation runs 6 ranks with machine 1's on node04;
#   elastic: --num_machines 2:3, no spare; the next generation runs on
#     machines 0 and 2 (world size 4).
# `ps` shows node02 on a `cordoned:` line (and ps --json names it); `trl-coord
# uncordon node02` clears it. Then the workers are released and the job
# must succeed (trl-coord and the agents of node03 (and node04) exit 0),
# with nothing left on any host.
#
# Usage: cordon_flapping.sh BUILD_DIR [spare|elastic]
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR [spare|elastic]}" && pwd)
mode=${2:-spare}
source "$here/../lib/testhosts.sh"
source "$here/../lib/generations.sh"
testhosts_skip_unless_possible
case "$mode" in
  spare) hosts=4 ;;
  elastic) hosts=3 ;;
  *) echo "usage: $0 BUILD_DIR [spare|elastic]"; exit 2 ;;
esac

work=$(mktemp -d)
cleanup() { testhosts_destroy; rm -rf "$work"; }
trap cleanup EXIT
# Killed (ctest's timeout, ^C): exit through the EXIT trap, which removes
# the hosts and everything on them.
trap 'exit 143' TERM; trap 'exit 130' INT; trap 'exit 129' HUP
testhosts_create "trlcf$([ "$mode" = spare ] && echo s || echo e)$(( $$ % 10000 ))x" $hosts
bad=${TESTHOST_NAME[2]}

cat >"$work/worker.sh" <<'WORKER'
#!/bin/sh
# worker.sh BAD_HOST RELEASE_FILE
echo "start gen $TRL_GENERATION rank $RANK/$WORLD_SIZE machine $TRL_MACHINE_RANK host $(hostname) at $(date +%s.%N)"
if [ "$(hostname)" = "$1" ]; then sleep 0.5; echo "failing on $1"; exit 1; fi
i=0
while [ ! -e "$2" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$2" ] || exit 3
WORKER
chmod +x "$work/worker.sh"

port=29650
coord_addr="${TESTHOST_ADDR[1]}:$port"
machines=3
[ "$mode" = elastic ] && machines=2:3
flags=(--num_machines "$machines" --num_processes 6 --main_process_ip "${TESTHOST_ADDR[1]}"
       --main_process_port "$port" --use_cpu --max_restarts 5 --no_python
       --heartbeat_interval 0.5 --heartbeat_misses 3 --lease 2 --stop_grace 2
       --rejoin_timeout 60)
testhosts_exec 2 "$build/agent/trl-agent" --machine_rank 1 "${flags[@]}" \
  >"$work/m1.out" 2>"$work/m1.err" &
m1=$!
testhosts_exec 3 "$build/agent/trl-agent" --machine_rank 2 "${flags[@]}" \
  >"$work/m2.out" 2>"$work/m2.err" &
m2=$!
spare=""
if [ "$mode" = spare ]; then
  testhosts_exec 4 "$build/agent/trl-agent" --spare "${flags[@]}" \
    >"$work/spare.out" 2>"$work/spare.err" &
  spare=$!
fi
extra=()
[ "$mode" = elastic ] && extra=(--elastic_wait 30)
testhosts_exec 1 "$build/coordinator/trl-coord" start "${flags[@]}" "${extra[@]}" \
  --cordon_after 2 --cordon_window 600 --state_file "$work/state" \
  "$work/worker.sh" "$bad" "$work/release" >"$work/coord.out" 2>"$work/coord.err" &
coord=$!

fail=0
outputs() { cat "$work"/*.out | sed 's/^\[[^]]*\] *//'; }
ps_text() { testhosts_exec 1 "$build/coordinator/trl-coord" ps --address "$coord_addr" 2>&1; }
ps_json() { testhosts_exec 1 "$build/coordinator/trl-coord" ps --address "$coord_addr" --json 2>/dev/null; }
cordoned_shown() { ps_text | grep -q "^ *cordoned: $bad "; }
cordoned_json() {  # the hostnames of ps --json's cordoned list
  ps_json | /usr/bin/python3 -c "import json,sys; print(' '.join(c.get('hostname', '?') for c in json.load(sys.stdin).get('cordoned', [])))" 2>/dev/null
}
world_after=6
[ "$mode" = elastic ] && world_after=4
# The generation after the cordon: every rank started, none on node02.
healthy_generation() {
  outputs | awk -v w="$world_after" -v bad="$bad" '
    $1 == "start" { g = $3; n[g]++; split($5, rw, "/"); if (rw[2] != w) wrong[g] = 1; if ($9 == bad) badg[g] = 1 }
    END { for (g in n) if (g + 0 >= 2 && n[g] == w && !wrong[g] && !badg[g]) { print g; exit 0 } ; exit 1 }'
}
if ! wait_for 90 healthy_generation; then
  echo "FAIL: no generation of $world_after ranks without $bad after its failures"
  outputs; cat "$work/coord.err"; fail=1
fi
gen=$(healthy_generation)
echo "generation $gen runs without $bad"
if wait_for 10 cordoned_shown; then
  ps_text | grep -E "^ *(cordoned|spares):"
else
  echo "FAIL: ps showed no 'cordoned:' line naming $bad"; ps_text; fail=1
fi
cordoned_json | grep -qw "$bad" ||
  { echo "FAIL: ps --json has no cordoned list naming $bad ('$(cordoned_json)')"; fail=1; }

testhosts_exec 1 "$build/coordinator/trl-coord" uncordon "$bad" --address "$coord_addr" \
  >"$work/uncordon.log" 2>&1 || { echo "FAIL: trl-coord uncordon $bad failed"; cat "$work/uncordon.log"; fail=1; }
if ! wait_for 10 eval '! cordoned_shown'; then
  echo "FAIL: ps still shows $bad cordoned after uncordon"; ps_text; fail=1
fi
cordoned_json | grep -qw "$bad" &&
  { echo "FAIL: ps --json still lists $bad as cordoned after uncordon"; fail=1; }

touch "$work/release"
wait $coord; coord_rc=$?
wait $m2; m2_rc=$?
spare_rc=0
[ -n "$spare" ] && { wait "$spare"; spare_rc=$?; }
wait_for 20 eval '! kill -0 $m1 2>/dev/null' || { echo "FAIL: $bad's agent outlived the job"; fail=1; }
echo "trl-coord exit $coord_rc, node03's agent exit $m2_rc, spare exit $spare_rc"
if [ $coord_rc != 0 ] || [ $m2_rc != 0 ] || [ $spare_rc != 0 ]; then
  echo "FAIL: non-zero exit"; fail=1
fi
all=$(outputs)
echo "$all" | grep -E "^(start|failing)"
grep -iE "cordon|spare|generation [0-9]+|restarts used" "$work/coord.err" | tail -20

# node02 failed exactly twice (generations 0 and 1) and never ran again.
bad_gens=$(echo "$all" | awk -v bad="$bad" '$1 == "start" && $9 == bad {print $3}' | sort -un | tr '\n' ' ')
[ "$bad_gens" = "0 1 " ] || { echo "FAIL: $bad's workers ran in generations '$bad_gens', not 0 and 1"; fail=1; }
if [ "$mode" = spare ]; then
  m1_hosts=$(echo "$all" | awk -v g="$gen" '$1 == "start" && $3 == g && $7 == 1 {print $9}' | sort -u)
  [ "$m1_hosts" = "${TESTHOST_NAME[4]}" ] ||
    { echo "FAIL: machine 1 of generation $gen ran on '$m1_hosts', not the spare ${TESTHOST_NAME[4]}"; fail=1; }
else
  machines_g=$(echo "$all" | awk -v g="$gen" '$1 == "start" && $3 == g {print $7}' | sort -u | tr '\n' ' ')
  [ "$machines_g" = "0 2 " ] || { echo "FAIL: generation $gen ran on machines '$machines_g', not 0 and 2"; fail=1; }
fi
for i in $(seq 1 $hosts); do
  left=$(testhosts_pids "$i")
  [ -z "$left" ] || { echo "FAIL: processes left on ${TESTHOST_NAME[$i]}: $left"; fail=1; }
done
[ $fail = 0 ] && echo "PASS ($mode): $bad cordoned after 2 failures, the job went on without it and succeeded; uncordon cleared it"
exit $fail

#!/bin/bash
# A worker of the nemesis suite: run by trl-coord/trl-agent as
#   worker.sh JOB_DIR SECONDS
# It appends one-line records to JOB_DIR/records (each a single short write,
# so lines of different workers never mix):
#   start GEN RANK PID HOST TIME WORLD_SIZE JOB_ID HOST_PID
#   older GEN RANK PID HOST TIME OLD_GEN OLD_RANK OLD_PID   (an older
#         generation's worker was still alive when this one started)
#   end   GEN RANK PID HOST TIME CODE
# PID is the worker's pid as the nemesis sees it, outside the test host's
# PID namespace (read through the machine's /proc, which the host has at
# DIR/../rootproc), so that the watcher and the checker can follow it;
# HOST_PID is its pid in the host, which its agent reports (ps).
# TIME is the wall clock ($EPOCHREALTIME, the clock of `date +%s.%N`), which
# the test hosts (network namespaces) share. It runs SECONDS and exits 0,
# unless the nemesis leaves JOB_DIR/ctl/crash.RANK (exit 1) or
# JOB_DIR/ctl/flood.RANK (a 5 MiB line without a newline, then 100000 lines);
# the first worker of that rank to see the file takes it. On SIGTERM it does
# what a trainer does when told to stop: it saves a checkpoint, which takes
# 0.3-1.0 s (drawn from RANK and the generation, well under the suite's
# --stop_grace 2), recorded as
#   stop  GEN RANK PID HOST TIME SECONDS
# then writes its end record and exits 143 (further SIGTERMs are ignored
# meanwhile; a SIGKILL cuts it short). A worker that ended on SIGTERM within
# milliseconds hid a coordinator that started the next generation while the
# old one was still stopping. A SIGKILL leaves no end record: the nemesis'
# watcher records when its pid was last seen alive.
set -u
dir=$1 seconds=$2
g=${TRL_GENERATION:-${TORCHELASTIC_RESTART_COUNT:-?}}
host=$(hostname)
rootproc=$dir/../rootproc
read -r stat <"$rootproc/self/stat" || { echo "worker.sh: cannot read $rootproc/self/stat" >&2; exit 3; }
me=${stat%% *}
rec() { echo "$*" >>"$dir/records"; }

rec "start $g $RANK $me $host $EPOCHREALTIME ${WORLD_SIZE:-?} ${TRL_JOB_ID:-?} $$"
# The checkpoint's length: 0.3-1.0 s in steps of 0.1, from rank and generation.
gnum=${g//[^0-9]/}
checkpoint=0.$(( (RANK * 3 + ${gnum:-0} * 5) % 8 + 3 ))
[ "$checkpoint" = 0.10 ] && checkpoint=1.0
on_term() {
  trap '' TERM
  rec "stop $g $RANK $me $host $EPOCHREALTIME $checkpoint"
  sleep "$checkpoint"
  rec "end $g $RANK $me $host $EPOCHREALTIME term"
  exit 143
}
trap on_term TERM

# Is a worker of an older generation still alive, on any host? Its start
# record has no end record and its pid still runs this script (not a zombie).
declare -A started=() ended=()
mapfile -t lines <"$dir/records"
for l in "${lines[@]}"; do
  read -r kind rg rr rp _ <<<"$l"
  case $kind in
    start) started[$rp]="$rg $rr" ;;
    end) ended[$rp]=1 ;;
  esac
done
for p in "${!started[@]}"; do
  [ -n "${ended[$p]:-}" ] && continue
  read -r og orank <<<"${started[$p]}"
  [ "$og" -lt "$g" ] 2>/dev/null || continue
  stat=$(cat "$rootproc/$p/stat" 2>/dev/null) || continue
  state=${stat##*) }; state=${state%% *}
  [ "$state" = Z ] && continue
  grep -qa nemesis/worker.sh "$rootproc/$p/cmdline" 2>/dev/null || continue
  rec "older $g $RANK $me $host $EPOCHREALTIME $og $orank $p"
done

end=$(( ${EPOCHREALTIME%.*} + seconds ))
while [ "${EPOCHREALTIME%.*}" -lt "$end" ]; do
  if mv "$dir/ctl/crash.$RANK" "$dir/ctl/taken.crash.$RANK.$me" 2>/dev/null; then
    echo "rank $RANK of generation $g crashes (exit 1)"
    rec "end $g $RANK $me $host $EPOCHREALTIME 1"
    exit 1
  fi
  if mv "$dir/ctl/flood.$RANK" "$dir/ctl/taken.flood.$RANK.$me" 2>/dev/null; then
    head -c 5242880 /dev/zero | tr '\0' x
    yes "flood from rank $RANK of generation $g" | head -n 100000
  fi
  sleep 0.2 &
  wait $!
done
rec "end $g $RANK $me $host $EPOCHREALTIME 0"
exit 0

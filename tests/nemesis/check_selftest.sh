#!/usr/bin/env bash
# The checker has teeth: hand-made job directories, one good and one per
# broken invariant; check.py must pass the good one and catch each bad one,
# naming the invariant.
#
# Usage: check_selftest.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A good job: generation 0 (6 ranks on three hosts) stopped by a fault,
# generation 1 ran to the end; one worker of generation 0 was killed (no end
# record, the watcher saw it go) while it saved its checkpoint, with its agent
# (node03's, which exited 137); the others saved theirs (stop, then end
# records); all daemons exited, the job with 0.
good() {
  local d=$1; mkdir -p "$d"
  : >"$d/records"
  for r in 0 1 2 3 4 5; do
    local h=node0$(( r / 2 + 1 ))
    echo "start 0 $r $(( 100 + r )) $h 1000.$(( 10 + r )) 6 job1" >>"$d/records"
  done
  for r in 0 1 2 3 4 5; do
    echo "stop 0 $r $(( 100 + r )) node0$(( r / 2 + 1 )) 1002.50 $([ $r = 4 ] && echo 1.0 || echo 0.5)" >>"$d/records"
  done
  for r in 0 1 2 3 5; do
    echo "end 0 $r $(( 100 + r )) node0$(( r / 2 + 1 )) 1003.$(( 10 + r )) term" >>"$d/records"
  done
  echo "gone 104 1003.50 1003.60" >"$d/gone"
  for r in 0 1 2 3 4 5; do
    echo "start 1 $r $(( 200 + r )) node0$(( r / 2 + 1 )) 1005.$(( 10 + r )) 6 job1" >>"$d/records"
  done
  for r in 0 1 2 3 4 5; do
    echo "end 1 $r $(( 200 + r )) node0$(( r / 2 + 1 )) 1009.$(( 10 + r )) 0" >>"$d/records"
  done
  cat >"$d/daemons" <<'EOF'
daemon coord1 coord node01 10 999.0
daemon agent2.1 agent node02 11 999.0
daemon agent3.1 agent node03 12 999.0
exit agent3.1 12 137 1003.0
daemon agent3.2 agent node03 13 1004.0
exit agent2.1 11 0 1010.0
exit agent3.2 13 0 1010.0
exit coord1 10 0 1010.1
EOF
  echo "job 999.0 1010.2 60 6" >"$d/job"
  : >"$d/after"
}

fail=0
expect() {  # expect NAME pass|INVARIANT: runs the checker on $work/NAME
  local name=$1 want=$2 out rc
  out=$(python3 "$here/check.py" "$work/$name" 2>&1); rc=$?
  if [ "$want" = pass ]; then
    if [ $rc = 0 ]; then echo "ok: $name passes"; else echo "FAIL: $name should pass:"; echo "$out"; fail=1; fi
  elif [ $rc = 1 ] && echo "$out" | grep -q "VIOLATION $want:"; then
    echo "ok: $name caught: $(echo "$out" | grep -m1 "VIOLATION $want:" | sed 's/^ *//')"
  else
    echo "FAIL: $name not caught as $want (rc $rc):"; echo "$out"; fail=1
  fi
}

good "$work/good"; expect good pass

# I1: a generation-0 worker ends after generation 1 started.
good "$work/overlap"
sed -i 's/^end 0 2 102 node02 1003.12 term/end 0 2 102 node02 1005.50 term/' "$work/overlap/records"
expect overlap I1
# I1: a SIGKILLed worker the watcher still saw alive after generation 1 started.
good "$work/overlap_killed"
echo "gone 104 1005.30 1005.40" >"$work/overlap_killed/gone"
expect overlap_killed I1
# I1: a worker wrote its end record in time but the watcher still saw its pid
# alive after generation 1 started.
good "$work/overlap_after_end"
echo "gone 103 1005.20 1005.30" >"$work/overlap_after_end/gone"
expect overlap_after_end I1
# I1: a new worker saw an older one alive at its start.
good "$work/older_alive"
echo "older 1 3 203 node02 1005.13 0 4 104" >>"$work/older_alive/records"
expect older_alive I1

# I7: a worker told to stop (rank 1 on node01, 0.5 s to save its checkpoint)
# was gone 0.2 s later without an end record, and no daemon of node01
# started, ended or was killed meanwhile: its checkpoint was cut short.
good "$work/grace_cut"
sed -i '/^end 0 1 /d' "$work/grace_cut/records"
echo "gone 101 1002.60 1002.70" >>"$work/grace_cut/gone"
expect grace_cut I7
# ... but gone after the time it asked for (a slow host) is no violation.
good "$work/grace_had"
sed -i '/^end 0 1 /d' "$work/grace_had/records"
echo "gone 101 1003.00 1003.10" >>"$work/grace_had/gone"
expect grace_had pass
# ... nor cut short by a replacement agent of its machine rank on another
# host (its sweep kills what the old, frozen agent left; the old one is
# killed only later).
takeover_grace() {
  local d=$1; takeover "$d"
  sed -i '/^end 0 2 /d' "$d/records"
  echo "gone 102 1002.60 1002.70" >>"$d/gone"
  sed -i 's/^killed agent1.1 11 1002.0/killed agent1.1 11 1004.0/; s/^exit agent1.1 11 137 1002.0/exit agent1.1 11 137 1004.0/' "$d/daemons"
}

# I2: rank 4 twice in generation 1 (rank 5 missing).
good "$work/dup_rank"
sed -i 's/^start 1 5 205 node03/start 1 4 205 node03/; s/^end 1 5 /end 1 4 /' "$work/dup_rank/records"
expect dup_rank I2
# I2: disagreeing WORLD_SIZE.
good "$work/world_size"
sed -i 's/^start 1 3 203 node02 1005.13 6/start 1 3 203 node02 1005.13 4/' "$work/world_size/records"
expect world_size I2

# I2: no worker of the job started at all (daemons that could not be
# started exit 127 and run nothing).
good "$work/nothing_started"
: >"$work/nothing_started/records"; : >"$work/nothing_started/gone"
sed -i 's/^\(exit [a-z0-9.]* [0-9]*\) [0-9]* /\1 127 /' "$work/nothing_started/daemons"
expect nothing_started I2
# I3: a leftover worker pid, a leftover process, the port still bound.
good "$work/leftover_pid"
echo "worker 205 /bin/bash tests/nemesis/worker.sh" >"$work/leftover_pid/after"
expect leftover_pid I3
good "$work/leftover_proc"
echo "proc node02 4242 trl-agent --machine_rank 1" >"$work/leftover_proc/after"
expect leftover_proc I3
good "$work/port_bound"
echo "port node01 tcp 29400" >"$work/port_bound/after"
expect port_bound I3

# I4: generation 1 then generation 0 on node03.
good "$work/decreasing_gen"
echo "start 0 4 300 node03 1009.50 6 job1" >>"$work/decreasing_gen/records"
echo "end 0 4 300 node03 1009.60 term" >>"$work/decreasing_gen/records"
expect decreasing_gen I4

# I5: the job failed although all ranks exited 0; the job succeeded although
# rank 3 crashed; the job succeeded but an agent exited 1.
good "$work/wrong_rc_fail"
sed -i 's/^exit coord1 10 0 /exit coord1 10 1 /' "$work/wrong_rc_fail/daemons"
expect wrong_rc_fail I5
good "$work/wrong_rc_success"
sed -i 's/^end 1 3 203 node02 1009.13 0/end 1 3 203 node02 1009.13 1/' "$work/wrong_rc_success/records"
expect wrong_rc_success I5
good "$work/agent_rc"
sed -i 's/^exit agent2.1 11 0 /exit agent2.1 11 1 /' "$work/agent_rc/daemons"
expect agent_rc I5

# I5: the last agent on node03 exited 137: judged unless the nemesis killed it.
good "$work/agent_killed_last"
sed -i '/agent3.2/d' "$work/agent_killed_last/daemons"
echo "killed agent3.1 12 1002.9" >>"$work/agent_killed_last/daemons"
expect agent_killed_last pass
good "$work/agent_died_last"
sed -i '/agent3.2/d' "$work/agent_died_last/daemons"
expect agent_died_last I5

# I6: the job over its limit; a daemon that hung.
good "$work/too_long"
echo "job 999.0 1100.0 60 6" >"$work/too_long/job"
expect too_long I6
good "$work/hung"
sed -i '/^exit agent3.2 /d' "$work/hung/daemons"
echo "hung agent3.2 13 1059.0" >>"$work/hung/daemons"
expect hung I6

# Machine ranks (daemon lines with a 7th field): machine rank 1 taken over
# from node02 by node04 (the old agent killed, the first replacement refused
# with exit 2 and started again); judged per machine rank, not per host.
takeover() {
  local d=$1; good "$d"
  cat >"$d/daemons" <<'EOF'
daemon coord1 coord node01 10 999.0 0
daemon agent1.1 agent node02 11 999.0 1
daemon agent2.1 agent node03 12 999.0 2
killed agent1.1 11 1002.0
exit agent1.1 11 137 1002.0
daemon agent1.2 agent node04 13 1002.1 1
exit agent1.2 13 2 1002.3
daemon agent1.3 agent node04 14 1002.8 1
exit agent1.3 14 0 1010.0
exit agent2.1 12 0 1010.0
exit coord1 10 0 1010.1
EOF
}
takeover "$work/takeover"; expect takeover pass
takeover_grace "$work/takeover_grace"; expect takeover_grace pass
# (Without the replacement, the same is a cut checkpoint.)
takeover_grace "$work/takeover_grace_cut"
sed -i '/agent1.[23]/d' "$work/takeover_grace_cut/daemons"
expect takeover_grace_cut I7
# ... unless its agent was cut off meanwhile (its lease ran out): fencing
# gives its workers only until the lease's end + 0.5 s.
takeover_grace "$work/takeover_grace_fenced"
sed -i '/agent1.[23]/d' "$work/takeover_grace_fenced/daemons"
printf '%s\n' "00:00:01.000 I [agent] generation 0: starting ranks 2..3" \
  "23:59:59.000 E [agent] no word from the coordinator for 1500 ms (the lease); stopping workers" \
  >"$work/takeover_grace_fenced/agent1.1.err"
# (A cut-off in another generation does not excuse it.)
takeover_grace "$work/takeover_grace_other_gen"
sed -i '/agent1.[23]/d' "$work/takeover_grace_other_gen/daemons"
printf '%s\n' "00:00:01.000 I [agent] generation 5: starting ranks 2..3" \
  "00:00:02.000 E [agent] no word from the coordinator for 1500 ms (the lease); stopping workers" \
  >"$work/takeover_grace_other_gen/agent1.1.err"
expect takeover_grace_other_gen I7
expect takeover_grace_fenced pass
takeover "$work/takeover_failed"
sed -i 's/^exit agent1.3 14 0 /exit agent1.3 14 1 /' "$work/takeover_failed/daemons"
expect takeover_failed I5

# A full disk: the coordinator could not keep generation 2 (after rank 3 of
# generation 1 crashed), said so naming the file, and exited 1.
unkept() {
  local d=$1; good "$d"
  sed -i 's/^end 1 3 203 node02 1009.13 0/end 1 3 203 node02 1009.13 1/' "$d/records"
  sed -i 's/^exit coord1 10 0 /exit coord1 10 1 /' "$d/daemons"
  echo "[coord] [warning] stopping generation 1: cannot keep the job's state, so generation 2 does not start (a restarted coordinator would not know of it): cannot write /tmp/x/statefs/job1.state: No space left on device" >"$d/coord1.err"
}
unkept "$work/unkept"; expect unkept pass
# ... but generation 2 started all the same.
unkept "$work/unkept_started"
echo "start 2 0 300 node01 1009.50 6 job1" >>"$work/unkept_started/records"
echo "end 2 0 300 node01 1009.60 term" >>"$work/unkept_started/records"
expect unkept_started I4
# ... which a coordinator started again on the state file may do.
unkept "$work/unkept_restarted"
sed -i 's/^exit coord1 10 1 1010.1/exit coord1 10 137 1009.3/' "$work/unkept_restarted/daemons"
echo "killed coord1 10 1009.3" >>"$work/unkept_restarted/daemons"
echo "daemon coord2 coord node01 15 1009.4" >>"$work/unkept_restarted/daemons"
echo "exit coord2 15 1 1010.2" >>"$work/unkept_restarted/daemons"
echo "start 2 0 300 node01 1009.50 6 job1" >>"$work/unkept_restarted/records"
echo "end 2 0 300 node01 1009.60 1" >>"$work/unkept_restarted/records"
expect unkept_restarted pass
# ... exiting otherwise than 1, or without naming the file.
unkept "$work/unkept_rc"
sed -i 's/^exit coord1 10 1 /exit coord1 10 3 /' "$work/unkept_rc/daemons"
expect unkept_rc I5
unkept "$work/unkept_unnamed"
sed -i 's/: cannot write .*/: disk trouble/' "$work/unkept_unnamed/coord1.err"
expect unkept_unnamed I5
# Every rank of generation 1 exited 0, but the coordinator had taken one for
# lost and could not keep the restart: exit 1 is right, since it said so...
unkept "$work/unkept_after_success"
sed -i 's/^end 1 3 203 node02 1009.13 1/end 1 3 203 node02 1009.13 0/' "$work/unkept_after_success/records"
expect unkept_after_success pass
# ... and wrong if it said nothing (wrong_rc_fail above), or named another
# generation.
unkept "$work/unkept_other_generation"
sed -i 's/^end 1 3 203 node02 1009.13 1/end 1 3 203 node02 1009.13 0/' "$work/unkept_other_generation/records"
sed -i 's/so generation 2 does not start/so generation 5 does not start/' "$work/unkept_other_generation/coord1.err"
expect unkept_other_generation I5

# An elastic job (--num_machines 2:3, world sizes 4 or 6): generation 1 ran
# on two machines (4 ranks), after node03 was lost.
elastic() {
  local d=$1; good "$d"
  sed -i '/^start 1 [45] /d; /^end 1 [45] /d; s/^\(start 1 .*\) 6 job1$/\1 4 job1/' "$d/records"
  echo "job 999.0 1010.2 60 6 4,6" >"$d/job"
}
elastic "$work/elastic"; expect elastic pass
# ... a fixed-size job may not shrink,
elastic "$work/elastic_fixed"
echo "job 999.0 1010.2 60 6" >"$work/elastic_fixed/job"
expect elastic_fixed I2
# ... nor an elastic one run ranks of two world sizes in one generation,
elastic "$work/elastic_mixed_ws"
sed -i 's/^start 1 3 203 node02 1005.13 4/start 1 3 203 node02 1005.13 6/' "$work/elastic_mixed_ws/records"
expect elastic_mixed_ws I2
# ... or miss a rank of the world size its final generation had,
elastic "$work/elastic_missing"
sed -i '/^start 1 3 /d; /^end 1 3 /d' "$work/elastic_missing/records"
expect elastic_missing I5
# ... or keep a generation-0 worker alive (the lost host's) after generation
# 1 started on the two others.
elastic "$work/elastic_overlap"
echo "gone 104 1005.40 1005.50" >"$work/elastic_overlap/gone"
expect elastic_overlap I1

# A spare (trl-agent --spare on node04) took machine 2's place: node03's
# agent was killed, generation 1's ranks 4-5 ran on node04; node03's new
# agent became a spare. Every agent exits 0.
spare() {
  local d=$1; good "$d"
  sed -i 's/^\(start 1 [45] 20[45]\) node03/\1 node04/; s/^\(end 1 [45] 20[45]\) node03/\1 node04/' "$d/records"
  cat >"$d/daemons" <<'EOF2'
daemon coord1 coord node01 10 999.0 0
daemon agent1.1 agent node02 11 999.0 1
daemon agent2.1 agent node03 12 999.0 2
daemon spare.1 agent node04 14 999.0 spare
killed agent2.1 12 1003.0
exit agent2.1 12 137 1003.0
daemon agent2.2 agent node03 13 1004.0 2
exit agent1.1 11 0 1010.0
exit agent2.2 13 0 1010.0
exit spare.1 14 0 1010.0
exit coord1 10 0 1010.1
EOF2
}
spare "$work/spare"; expect spare pass
# ... the spare's copy of rank 4 started while the old one still ran (the
# watcher saw it after generation 1 started): two copies of a rank,
spare "$work/spare_two_copies"
echo "gone 104 1005.20 1005.30" >"$work/spare_two_copies/gone"
expect spare_two_copies I1
# ... the job succeeded but the spare exited 1,
spare "$work/spare_rc"
sed -i 's/^exit spare.1 14 0 /exit spare.1 14 1 /' "$work/spare_rc/daemons"
expect spare_rc I5
# ... every rank exited 0, but the job failed.
spare "$work/spare_job_failed"
sed -i 's/^exit coord1 10 0 /exit coord1 10 1 /' "$work/spare_job_failed/daemons"
expect spare_job_failed I5

# I6: the events (trl-coord events --json) say generation 1 had the world
# size its workers had, and say nothing of a generation that never started.
events() {
  local d=$1 ws=$2; good "$d"
  cat >"$d/events.json" <<EOF2
{"events": [
 {"unix_ms": "1000000", "generation": "-1", "kind": "registered", "machine_rank": 1, "text": "host node02, address 10.0.0.2, 2 workers"},
 {"unix_ms": "1000100", "generation": "0", "kind": "generation", "machine_rank": -1, "text": "world size 6, restarts used 0 of 50"},
 {"unix_ms": "1005000", "generation": "1", "kind": "generation", "machine_rank": -1, "text": "world size $ws, restarts used 1 of 50"},
 {"unix_ms": "1009000", "generation": "7", "kind": "generation", "machine_rank": -1, "text": "world size 2, restarts used 2 of 50"}
]}
EOF2
}
events "$work/events" 6; expect events pass
events "$work/events_wrong_size" 4; expect events_wrong_size I6
elastic "$work/events_elastic"
events "$work/events_elastic_tmp" 4; cp "$work/events_elastic_tmp/events.json" "$work/events_elastic/"
sed -i 's/"world size 4, /"2 of 2:3 machines (0, 1), world size 4, effective batch size = per-device batch x 4, /' "$work/events_elastic/events.json"
expect events_elastic pass
# (the elastic job's events beside the fixed-size job's records)
events "$work/events_shrunk" 6; cp "$work/events_elastic/events.json" "$work/events_shrunk/"
expect events_shrunk I6

# I6: what ps --json said while the job ran (ps/TIME.json) against the
# workers' records, which now say each worker's pid in its host (pid - 90).
with_ps() {
  local d=$1; good "$d"
  awk '$1 == "start" {$0 = $0 " " ($4 - 90)} {print}' "$d/records" >"$d/records.new"
  mv "$d/records.new" "$d/records"
  mkdir -p "$d/ps"
  ps_answer "$d/ps/1002.0.json" 0 running 0
  ps_answer "$d/ps/1009.9.json" 1 succeeded 0
}
ps_answer() {  # FILE GENERATION STATE EXIT_CODE: every rank alike
  local file=$1 g=$2 state=$3 code=$4 r sep=""
  {
    echo "{\"job_id\": \"job1\", \"generation\": \"$g\", \"ranks\": ["
    for r in 0 1 2 3 4 5; do
      echo "$sep{\"rank\": $r, \"pid\": $(( 10 + g * 100 + r )), \"state\": \"$state\", \"exit_code\": $code, \"signal\": 0, \"hostname\": \"node0$(( r / 2 + 1 ))\"}"
      sep=","
    done
    echo "]}"
  } >"$file"
}
with_ps "$work/ps_good"; expect ps_good pass
# ... the poller ran, but no answer came while workers ran,
with_ps "$work/ps_none"; rm -f "$work/ps_none/ps/"*.json
expect ps_none I6
# ... the workers did not say their pids in their hosts,
with_ps "$work/ps_no_host_pids"; sed -i 's/^\(start .* job1\) [0-9]*$/\1/' "$work/ps_no_host_pids/records"
expect ps_no_host_pids I6
# ... a rank shown on a host it did not run on (a handover's spare),
with_ps "$work/ps_wrong_host"
sed -i 's/"hostname": "node03"}/"hostname": "node04"}/' "$work/ps_wrong_host/ps/1009.9.json"
expect ps_wrong_host I6
# ... a pid of the generation before,
with_ps "$work/ps_old_pid"
sed -i 's/"pid": 110,/"pid": 10,/' "$work/ps_old_pid/ps/1009.9.json"
expect ps_old_pid I6
# ... and rank 4 of generation 0, killed while it saved its checkpoint,
# shown as having exited 0 (the lost ranks of a one-way partition).
with_ps "$work/ps_killed_shown_0"
ps_answer "$work/ps_killed_shown_0/ps/1004.0.json" 0 succeeded 0
sed -i '/"rank": [^4],/s/"succeeded", "exit_code": 0/"stopped", "exit_code": 143/' \
  "$work/ps_killed_shown_0/ps/1004.0.json"
expect ps_killed_shown_0 I6
# (the same answer with rank 4 shown lost passes)
with_ps "$work/ps_killed_shown_lost"
cp "$work/ps_killed_shown_0/ps/1004.0.json" "$work/ps_killed_shown_lost/ps/"
sed -i 's/"rank": 4, \(.*\)"succeeded", "exit_code": 0/"rank": 4, \1"lost", "exit_code": -1/' \
  "$work/ps_killed_shown_lost/ps/1004.0.json"
expect ps_killed_shown_lost pass

# I5: a job whose every rank exited 0 failed because machine 2's agent came
# back without its workers' outcome: excused only when the nemesis killed
# that host's agent after its workers had ended (frozen while they exited,
# their exit statuses went to it alone), too soon for its guardian to keep
# them (0.5 s), not otherwise.
outcome_died() {
  local d=$1; good "$d"
  sed -i 's/^exit coord1 10 0 /exit coord1 10 1 /; s/^exit agent2.1 11 0 /exit agent2.1 11 1 /; s/^exit agent3.2 13 0 /exit agent3.2 13 1 /' "$d/daemons"
  echo "10:00:00.000 E [coord] job trl-1 failed: the agent of machine 2 (host node03) lost its connection and came back without the outcome of every worker" >"$d/coord1.err"
}
outcome_died "$work/outcome_died"
echo "killed agent3.2 13 1009.50" >>"$work/outcome_died/daemons"
expect outcome_died pass
outcome_died "$work/outcome_not_lost"
expect outcome_not_lost I5
outcome_died "$work/outcome_stray_killed"
echo "killed agent3.2 13 1009.50 stray" >>"$work/outcome_stray_killed/daemons"
expect outcome_stray_killed I5
outcome_died "$work/outcome_killed_before_the_ends"
echo "killed agent3.2 13 1009.12" >>"$work/outcome_killed_before_the_ends/daemons"
expect outcome_killed_before_the_ends I5
outcome_died "$work/outcome_kept_in_time"
echo "killed agent3.2 13 1011.50" >>"$work/outcome_kept_in_time/daemons"
expect outcome_kept_in_time I5

# I8: generation 1 started while node03 was cordoned, yet ran ranks there;
# started after node03 passed its checks again, it may; a coordinator
# started again knows of no cordon.
cordon_log() {  # DIR LINE...: coord1.err, one line each
  local d=$1; shift; good "$d"; : >"$d/coord1.err"
  for l in "$@"; do echo "10:00:00.000 I [coord] $l" >>"$d/coord1.err"; done
}
cordon_log "$work/cordoned_ran" "generation 0: world size 6" \
  "host node03 is cordoned (health check failed: --health_check exited 1): it gets no ranks" \
  "generation 1: world size 6"
expect cordoned_ran I8
cordon_log "$work/cordon_ended" "generation 0: world size 6" \
  "host node03 is cordoned (health check failed: --health_check exited 1): it gets no ranks" \
  "host node03 passes its health checks again: it may be given ranks" "generation 1: world size 6"
expect cordon_ended pass
cordon_log "$work/cordoned_said" "host node03 is cordoned (3 failures within 600 s, the last: ...)" \
  "generation 1: world size 6" \
  "generation 1: machine 2 runs on cordoned host node03: no spare took its place and the job cannot start without it"
expect cordoned_said pass
cordon_log "$work/uncordoned" "host node03 is cordoned (failed 3 times)" \
  "host node03 is uncordoned: it may be given ranks again" "generation 1: world size 6"
expect uncordoned pass

# A process its agent started and stopped at once, before the worker script
# wrote its start record (seed 3): shown stopped by SIGTERM, it passes;
# shown as having exited 0 on its own, it cannot have.
with_ps "$work/ps_unrecorded_stopped"
ps_answer "$work/ps_unrecorded_stopped/ps/1012.0.json" 2 stopped 0
sed -i 's/"signal": 0/"signal": 15/' "$work/ps_unrecorded_stopped/ps/1012.0.json"
expect ps_unrecorded_stopped pass
with_ps "$work/ps_unrecorded_succeeded"
ps_answer "$work/ps_unrecorded_succeeded/ps/1012.0.json" 2 succeeded 0
expect ps_unrecorded_succeeded I6

[ $fail = 0 ] && echo "PASS: the checker caught every broken invariant"
exit $fail

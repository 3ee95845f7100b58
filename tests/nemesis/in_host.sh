#!/bin/bash
# Runs a daemon inside a nemesis test host (entered with nsenter: its
# network, mount, UTS and PID namespaces), and says what the nemesis, which
# runs outside, needs to know of it:
#   in_host.sh ROOTPROC PIDFILE RCFILE OUT ERR CMD...
# PIDFILE gets CMD's pid as the machine sees it (read through ROOTPROC, the
# machine's /proc bound in the host; CMD is exec'd by the process that read
# it), RCFILE its exit status once it ended (128+N for signal N), OUT and ERR
# its output. This shell is what waits: a SIGSTOP of CMD stops neither it nor
# nsenter.
rootproc=$1 pidfile=$2 rcfile=$3 out=$4 err=$5
shift 5
# shellcheck disable=SC2016
bash -c 'read -r stat <"$0/self/stat" || exit 126
         echo "${stat%% *}" >"$1.tmp" && mv "$1.tmp" "$1" || exit 126
         shift; exec "$@"' "$rootproc" "$pidfile" "$@" >"$out" 2>"$err" &
wait $!
echo $? >"$rcfile.tmp" && mv "$rcfile.tmp" "$rcfile"

# Helpers for multi-host tests that follow generations of workers.
# Source this file.

# Writes a worker script to $1. It logs "start gen G rank R pid P at T" and
# "end gen ..." lines; generation 0 runs until stopped (SIGTERM), later
# generations exit 0 after 0.3 s.
write_generation_worker() {
  cat >"$1" <<'WORKER'
#!/bin/sh
g=$TORCHELASTIC_RESTART_COUNT
echo "start gen $g rank $RANK pid $$ at $(date +%s.%N)"
trap 'echo "end gen $g rank $RANK pid $$ at $(date +%s.%N)"; exit 0' TERM
if [ "$g" = 0 ]; then
  while true; do sleep 0.1; done
fi
sleep 0.3
echo "end gen $g rank $RANK pid $$ at $(date +%s.%N)"
WORKER
  chmod +x "$1"
}

# wait_for SECONDS COMMAND...: polls until COMMAND succeeds; 1 on timeout.
wait_for() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@"; do
    [ "$(date +%s)" -ge $deadline ] && return 1
    sleep 0.05
  done
}

# From worker lines on stdin ("[rank R] start gen G ..."): the last
# generation that started.
last_generation() {
  awk '/start gen/ {print $5}' | sort -n | tail -1
}

# From worker lines on stdin: "G overlaps H" for every earlier generation G
# that still had a worker running when a later generation H started.
generations_overlap() {
  awk '
    /start gen/ { g=$5; t=$NF; if (!(g in first) || t < first[g]) first[g]=t }
    /end gen/   { g=$5; t=$NF; if (!(g in last) || t > last[g]) last[g]=t }
    END { for (g in last) for (h in first) if (h + 0 > g + 0 && last[g] + 0 >= first[h] + 0) print g " overlaps " h }'
}

# Helpers for the benchmark scripts: timestamps and summaries.
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
minmax() { sort -g | awk 'NR==1{min=$1} {max=$1} END {printf "min %.3f, max %.3f", min, max}'; }

# summarize_against_torchrun TRL_FILE TORCH_FILE TARGET [TUNED_FILE
# TUNED_TARGET]: the medians (with min and max) of files of seconds, one a
# line, the ratio torchrun / trl-launch against TARGET (and against torchrun
# with --monitor_interval 0.1, its best setting here, when TUNED_FILE is
# given), and the raw numbers as JSON in $BENCH_RAW when it is set (for
# bench/report.py).
summarize_against_torchrun() {
  local trl=$1 torch=$2 target=$3 tuned=${4:-} tuned_target=${5:-}
  local trl_median torch_median
  trl_median=$(median <"$trl"); torch_median=$(median <"$torch")
  printf 'trl-launch median %.3f s (%s), torchrun median %.3f s (%s)\n' \
    "$trl_median" "$(minmax <"$trl")" "$torch_median" "$(minmax <"$torch")"
  printf 'ratio torchrun / trl-launch: %.1f (target >= %s)\n' \
    "$(echo "$torch_median / $trl_median" | bc -l)" "$target"
  local tuned_json=""
  if [ -n "$tuned" ]; then
    local tuned_median; tuned_median=$(median <"$tuned")
    printf 'torchrun --monitor_interval 0.1 median %.3f s (%s)\n' \
      "$tuned_median" "$(minmax <"$tuned")"
    printf 'ratio tuned torchrun / trl-launch: %.1f (target >= %s)\n' \
      "$(echo "$tuned_median / $trl_median" | bc -l)" "$tuned_target"
    tuned_json=$(printf ', "torchrun_tuned_s": [%s]' \
      "$(awk '{printf "%s%.4f", (NR > 1 ? "," : ""), $1}' "$tuned")")
  fi
  if [ -n "${BENCH_RAW:-}" ]; then
    printf '{"trl_launch_s": [%s], "torchrun_s": [%s]%s}\n' \
      "$(awk '{printf "%s%.4f", (NR > 1 ? "," : ""), $1}' "$trl")" \
      "$(awk '{printf "%s%.4f", (NR > 1 ? "," : ""), $1}' "$torch")" \
      "$tuned_json" >"$BENCH_RAW"
  fi
}

# two_host_bench_setup PREFIX [BUILD_DIR] [RUNS]: what a side-by-side run on
# two test hosts needs (tests/lib/testhosts.sh sourced first). Sets build,
# runs, torchrun, work (a scratch directory) and master (node01's address);
# hosts and work go at exit.
two_host_bench_setup() {
  local prefix=$1
  build=$(cd "${2:-$here/../build}" && pwd)
  runs=${3:-5}
  testhosts_skip_unless_possible
  torchrun=${TORCHRUN:-/usr/bin/torchrun}
  [ -x "$torchrun" ] || { echo "torchrun not found (apt-get install python3-torch)"; exit 1; }
  work=$(mktemp -d)
  trap 'testhosts_destroy; rm -rf "$work"' EXIT
  testhosts_create "$prefix$(( $$ % 10000 ))x" 2
  master=${TESTHOST_ADDR[1]}
}

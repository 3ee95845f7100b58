#!/usr/bin/env bash
# The nemesis ctest: the checker's self-test first, then every seed kept in
# regression_seeds (lines "SEED SECONDS [--window S] [--gap S]  # what it
# found"), then the default run (seed 1, 180 s).
#
# Usage: ctest.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: $0 BUILD_DIR}
bash "$here/check_selftest.sh" || exit 1
if [ "$(id -u)" != 0 ]; then echo "SKIP: test hosts need root"; exit 77; fi
fail=0
while read -r line; do
  line=${line%%#*}
  read -r -a args <<<"$line"
  [ ${#args[@]} -ge 2 ] || continue
  echo "=== regression: --seed ${args[0]} --seconds ${args[*]:1}"
  bash "$here/nemesis.sh" "$build" --seed "${args[0]}" --seconds "${args[@]:1}" </dev/null
  rc=$?
  [ $rc = 77 ] && exit 77
  [ $rc = 0 ] || fail=1
done <"$here/regression_seeds"
echo "=== default run"
bash "$here/nemesis.sh" "$build" --seed 1 --seconds 180
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || fail=1
exit $fail

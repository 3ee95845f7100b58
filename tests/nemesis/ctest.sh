#!/usr/bin/env bash
# The nemesis ctest: the checker's self-test first, then every seed kept in
# regression_seeds (lines "SEED SECONDS [# what it found]"), then the
# default run (seed 1, 180 s).
#
# Usage: ctest.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: $0 BUILD_DIR}
bash "$here/check_selftest.sh" || exit 1
if [ "$(id -u)" != 0 ]; then echo "SKIP: test hosts need root"; exit 77; fi
fail=0
while read -r seed seconds _; do
  case $seed in ''|'#'*) continue ;; esac
  echo "=== regression seed $seed ($seconds s)"
  bash "$here/nemesis.sh" "$build" --seed "$seed" --seconds "$seconds"
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

#!/usr/bin/env bash
# Sets up (scripts/setup.sh), checks formatting, and runs every test:
# unit, integration (real processes on loopback) and multi-host (network
# namespaces, real PyTorch).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --tests

echo "== clang-format"
files=$(git ls-files '*.cc' '*.h' 2>/dev/null || find . -name '*.cc' -o -name '*.h')
clang-format --dry-run -Werror $files
echo "formatting ok"

echo "== tests"
summary=$(mktemp)
(cd build && ctest --output-on-failure -j2 --timeout 300) | tee "$summary"

echo "== fuzzing (bounded)"
./scripts/fuzz.sh 20

# ctest's verdict once more, last, in the plain form.
line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$summary" | tail -1)
rm -f "$summary"
failed=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/')
total=$(echo "$line" | sed -E 's/.* tests failed out of ([0-9]+).*/\1/')
echo "tests: $((total - failed)) passed, $failed failed"

#!/usr/bin/env bash
# Sets up (scripts/setup.sh), checks formatting, and runs every test:
# unit, integration (real processes on loopback) and multi-host (network
# namespaces, real PyTorch).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

echo "== clang-format"
files=$(git ls-files '*.cc' '*.h' 2>/dev/null || find . -name '*.cc' -o -name '*.h')
clang-format --dry-run -Werror $files
echo "formatting ok"

echo "== tests"
cd build
ctest --output-on-failure -j2 --timeout 300

echo "== fuzzing (bounded)"
cd ..
./scripts/fuzz.sh 20

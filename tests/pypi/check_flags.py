#!/usr/bin/env python3
"""Every flag of the installed Accelerate's own `accelerate launch` parser is
in tests/data/accelerate_launch_flags.txt (which the unit test
accelerate_flags_test checks against common/accelerate_flags.cc and the
README's table), so a flag Accelerate adds cannot slip past trl-coord.

Usage: check_flags.py FLAGS_TXT   (run with the PyPI environment's python)

The list is read from Accelerate's real parser (launch_command_parser),
imported, not from its source text. Each option's first long spelling is
the listed one (Accelerate adds --kebab-case aliases of --snake_case flags).
Exits 1 naming every flag that is missing from the list.
"""

import sys

import accelerate
from accelerate.commands.launch import launch_command_parser


def parser_flags():
    flags = set()
    for action in launch_command_parser()._actions:
        longs = [s for s in action.option_strings if s.startswith("--")]
        shorts = [s for s in action.option_strings if not s.startswith("--")]
        if longs:
            flags.add(longs[0])
        flags.update(shorts)
        flags.update(s for s in longs[1:] if s.replace("-", "_") != longs[0].replace("-", "_"))
    return flags


def listed_flags(path):
    with open(path, encoding="utf-8") as file:
        return {line.strip() for line in file if line.strip() and not line.startswith("#")}


def main():
    listed = listed_flags(sys.argv[1])
    real = parser_flags()
    missing = sorted(real - listed)
    print(f"accelerate {accelerate.__version__}: {len(real)} flags in its parser, "
          f"{len(listed)} in the list, {len(real & listed)} of the parser's in it")
    for flag in missing:
        print(f"FAIL: {flag} (accelerate {accelerate.__version__}) is not in {sys.argv[1]}")
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Lists the flags of `accelerate launch`, read from Accelerate's source.

Usage: accelerate_launch_flags.py WHEEL_OR_LAUNCH_PY...

Each argument is an Accelerate wheel (`pip download accelerate==X --no-deps`)
or its accelerate/commands/launch.py. The script parses launch.py with
Python's `ast` module (nothing of Accelerate is imported, so neither torch
nor Accelerate need be installed), walks launch_command_parser() and prints
every option string of every `add_argument` call on the parser or its
argument groups, one a line, sorted: the union over the files given. The
positional arguments (training_script, training_script_args) are left out.
tests/data/accelerate_launch_flags.txt is this script's output.
"""

import ast
import sys
import zipfile


def launch_source(path):
    if path.endswith(".whl"):
        with zipfile.ZipFile(path) as wheel:
            return wheel.read("accelerate/commands/launch.py").decode()
    with open(path, encoding="utf-8") as file:
        return file.read()


def flags_of(source):
    tree = ast.parse(source)
    parser_function = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "launch_command_parser"
    )
    flags = set()
    for node in ast.walk(parser_function):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            continue
        for argument in node.args:
            if (
                isinstance(argument, ast.Constant)
                and isinstance(argument.value, str)
                and argument.value.startswith("-")
            ):
                flags.add(argument.value)
    return flags


def main(paths):
    if not paths:
        sys.exit(__doc__)
    flags = set()
    for path in paths:
        flags |= flags_of(launch_source(path))
    for flag in sorted(flags):
        print(flag)


if __name__ == "__main__":
    main(sys.argv[1:])

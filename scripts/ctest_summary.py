#!/usr/bin/env python3
"""Reads ctest's JUnit file (ctest --output-junit FILE) and prints the
verdict: one line per skipped test with its reason, then exactly

    tests: N passed, N failed, N skipped

A skip (the test exited with its SKIP_RETURN_CODE, or a GoogleTest test
called GTEST_SKIP: ctest's SKIP_REGULAR_EXPRESSION) is never a pass. A
test that did not run for any other reason (its executable missing, a
failed fixture) is a failure. The GPU test skipping on a machine without a
GPU is reported as such and is allowed; with --ci, any other skip fails.

Exit status: 0 when nothing failed (and, with --ci, nothing but the GPU
test skipped for want of a GPU); 1 otherwise; 2 when the file is unusable.

With --tails, prints instead the last lines of each failed test's output
(CI keeps only the end of a run's output; this goes just before the verdict).

Usage: ctest_summary.py [--ci] [--tails] JUNIT.xml
"""
import sys
import xml.etree.ElementTree as ET

GPU_TEST = "gpu.demo_train"


SKIP_MESSAGES = ("SKIP_RETURN_CODE", "SKIP_REGULAR_EXPRESSION")
TAIL_LINES = 25


def skip_reason(case):
    lines = (case.findtext("system-out") or "").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("SKIP"):  # a script's "SKIP: why"
            return line.split(":", 1)[-1].strip() or line
        if line.endswith(": Skipped") and i + 1 < len(lines):  # GTEST_SKIP
            return lines[i + 1].strip() or "no reason given"
    return "no reason given"


def main(argv):
    ci = "--ci" in argv
    tails = "--tails" in argv
    paths = [a for a in argv if a not in ("--ci", "--tails")]
    if len(paths) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        cases = ET.parse(paths[0]).getroot().iter("testcase")
    except (OSError, ET.ParseError) as error:
        print(f"FAIL: cannot read ctest's results {paths[0]}: {error}")
        return 2
    passed, failed, skipped = [], [], []
    for case in cases:
        name, status = case.get("name"), case.get("status")
        skip = case.find("skipped")
        if status == "run" and case.find("failure") is None:
            passed.append(name)
        elif (status in ("notrun", "disabled") and skip is not None
              and (skip.get("message") or "").startswith(SKIP_MESSAGES)):
            skipped.append((name, skip_reason(case)))
        else:
            why = skip.get("message") if skip is not None else status
            failed.append(f"{name} ({why})")
            if tails:
                out = (case.findtext("system-out") or "").splitlines()
                print(f"--- the last {TAIL_LINES} lines of {name}:")
                for line in out[-TAIL_LINES:]:
                    print("  " + line[:300])
    if tails:
        return 0
    if not (passed or failed or skipped):
        print("FAIL: ctest ran no test")
        return 1
    unexpected = []
    for name, reason in skipped:
        if name == GPU_TEST and "no GPU" in reason:
            print(f"{GPU_TEST} skipped: no GPU on this machine ({reason})")
        else:
            print(f"{name} skipped: {reason}")
            unexpected.append(name)
    for name in failed:
        print(f"FAIL: {name}")
    if ci and unexpected:
        print("FAIL: under CI every test must run; skipped: " +
              ", ".join(unexpected))
    print(f"tests: {len(passed)} passed, {len(failed)} failed, "
          f"{len(skipped)} skipped")
    return 1 if failed or (ci and unexpected) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

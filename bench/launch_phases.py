#!/usr/bin/env python3
"""Where a no-op launch's time goes, phase by phase, from the lines the
daemons log (TRL_LOG_LEVEL=debug) in bench/launch_noop.sh's runs: each run's
directory holds coord.log (trl-coord and machine 0's agent), agent.log
(machine 1's agent) and times (the wall clock, HH:MM:SS.nnnnnnnnn, when the
script started the daemons and when both had exited). The test hosts share
one clock, so the two machines' lines compare.

Usage: launch_phases.py RUNS_DIR [JSON_OUT]
Prints a table of each phase's median, min and max (ms) over the runs and
its share of the median total; JSON_OUT gets the same as JSON.
A run whose logs lack a phase's line is left out of that phase (and said).
"""
import glob
import json
import os
import re
import statistics
import sys

# Phase -> (the line that ends it: file, pattern, which match). Each phase
# starts where the one before it ended; the first starts at the script's t0.
PHASES = [
    ("process start, config, token, identity",
     ("coord", r"\[coord\] job \S+ planned", "first")),
    ("servers listening",
     ("coord", r"\[coord\] job \S+: coordinator on", "first")),
    ("registration (both machines)",
     ("coord", r"\[coord\] machine \d+ registered", "last")),
    ("command check",
     ("both", r"\[agent\] the job's command runs on this machine", "last")),
    ("generation assigned",
     ("coord", r"\[coord\] generation 0:", "first")),
    ("workers started",
     ("both", r"\[agent\] generation 0: \d+ workers started", "last")),
    ("workers reaped",
     ("both", r"\[agent\] generation 0: local rank \d+ exited", "last")),
    ("outcome known",
     ("coord", r"\[coord\] job \S+ ended \(", "first")),
    ("farewells heard, servers shut down",
     ("coord", r"\[coord\] job \S+ (succeeded|failed|stopped)", "first")),
    ("processes exited", ("times", "t1", None)),
]
STAMP = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d+)")


def seconds(stamp):
    m = STAMP.match(stamp)
    if not m:
        return None
    h, mi, s, frac = m.groups()
    return int(h) * 3600 + int(mi) * 60 + int(s) + float("0." + frac)


def lines(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def one_run(run_dir):
    """{phase: ms} of one run (phases whose line is missing are absent)."""
    times = dict(line.split() for line in lines(os.path.join(run_dir, "times"))
                 if len(line.split()) == 2)
    t0 = seconds(times.get("t0", ""))
    if t0 is None:
        return {}
    logs = {"coord": lines(os.path.join(run_dir, "coord.log")),
            "agent": lines(os.path.join(run_dir, "agent.log"))}
    logs["both"] = logs["coord"] + logs["agent"]
    out, before = {}, t0
    for name, (where, pattern, which) in PHASES:
        if where == "times":
            at = seconds(times.get(pattern, ""))
        else:
            found = [seconds(line) for line in logs[where]
                     if re.search(pattern, line)]
            found = [t for t in found if t is not None]
            at = (max(found) if which == "last" else min(found)) if found \
                else None
        if at is None:
            continue  # the next phase then spans both
        if at < t0 - 43200:  # past midnight
            at += 86400
        out[name] = round((at - before) * 1000, 1)
        before = at
    out["total"] = round((before - t0) * 1000, 1)
    return out


def summarize(runs):
    table = {}
    for name in [p[0] for p in PHASES] + ["total"]:
        values = [r[name] for r in runs if name in r]
        if not values:
            continue
        table[name] = {"median_ms": statistics.median(values),
                       "min_ms": min(values), "max_ms": max(values),
                       "runs": len(values)}
    return table


def main():
    runs_dir = sys.argv[1]
    runs = [one_run(d) for d in sorted(glob.glob(os.path.join(runs_dir, "*")))
            if os.path.isdir(d)]
    runs = [r for r in runs if r]
    if not runs:
        print(f"no runs with logs under {runs_dir}")
        return 1
    table = summarize(runs)
    total = table["total"]["median_ms"]
    print(f"where a no-op launch's time goes ({len(runs)} runs, ms; the "
          "phases' medians need not add up to the total's):")
    print(f"  {'phase':42s} {'median':>7s} {'min':>7s} {'max':>7s} {'share':>6s}")
    for name, s in table.items():
        share = 100 * s["median_ms"] / total if total else 0
        note = "" if s["runs"] == len(runs) else f"  ({s['runs']} runs)"
        print(f"  {name:42s} {s['median_ms']:7.1f} {s['min_ms']:7.1f} "
              f"{s['max_ms']:7.1f} {share:5.0f}%{note}")
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            json.dump({"phases": table, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Renders the benchmark tables of README.md and bench/README.md from a
results.json (bench/report.py writes it), into regions between

  <!-- bench:NAME begin (generated from PATH by bench/tables.py; do not edit) -->
  <!-- bench:NAME end -->

Usage: tables.py --write|--check [--results PATH]
  --write  rewrites every region in place
  --check  exits 1 and prints a diff where a region differs
  PATH     default: for each region, the newest bench/results/*/results.json
           (by name) that holds its figures (a scale-only run leaves the
           launch tables to the newest report that ran them)"""
import argparse
import difflib
import glob
import json
import os
import re
import sys

import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md", "bench/README.md"]
REGION = re.compile(r"<!-- bench:(\S+) begin .*?-->\n(.*?)<!-- bench:\1 end -->",
                    re.S)


def source(d, m=None):
    m = m or d["machine"]
    return (f"the run of {m['date']} on `{m['host']}` ({m['cores']} cores, "
            f"{m['cpu']}; commit {m['commit']})")


def launcher_table(d, key, what):
    r = d.get(key)
    if r is None:
        return f"Not run in the report of {source(d)}.\n"
    rows = [f"Result of {source(d)}, {r['ours']['n']} runs:\n\n"
            "| launcher | median | min | max |\n|---|---|---|---|\n"]
    for name, s in (("trl-launch", r["ours"]), ("torchrun", r["reference"])):
        rows.append(f"| {name} | {s['median']:.3f} s | {s['min']:.3f} s | "
                    f"{s['max']:.3f} s |\n")
    target = {"launch": report.LAUNCH_TARGET,
              "restart": report.RESTART_TARGET}[key]
    verdict = "met" if report.meets(r["ratio"], target) else "missed"
    rows.append(f"\nRatio torchrun / trl-launch: {r['ratio']:.1f} (target "
                f"{target}, torchrun's defaults): {verdict}.{what(r)}\n")
    return "".join(rows)


def launch(d):
    return launcher_table(d, "launch", lambda r: "")


def restart(d):
    return launcher_table(d, "restart", lambda r: (
        " The first restart waits for no backoff (later ones do: "
        "`--restart_backoff`)." if r["ours"]["median"] < 0.1 else
        f" Of trl-launch's {r['ours']['median']:.3f} s, 0.1 s is the "
        "configured backoff (`--restart_backoff`, before every restart in "
        "that run's code)."))


def allreduce(d):
    return (f"Result of {source(d)}; the launcher plays no part in it:\n\n" +
            "".join(report.allreduce_rows(d)))


def targets(d):
    if d.get("launcher_machine"):
        # Two runs of different code in one table: each row says whose.
        whose = (f"the launch and restart rows from {source(d, d['launcher_machine'])}, "
                 f"the others from {source(d)}")
    else:
        whose = source(d)
    return (f"Against the targets as bench/report.py checks them, {whose}:\n\n" +
            "".join(report.targets_rows(d)))


# (field, heading, format of the median, multiplier)
SCALE_COLUMNS = [("rendezvous_s", "rendezvous", "{:.3g} s", 1),
                 ("coordinator_cpu_share", "CPU, 1 Hz heartbeats", "{:.1f} %",
                  100),
                 ("ps_median_ms", "ps --json", "{:.0f} ms", 1),
                 ("coordinator_rss_mib", "coordinator RSS", "{:.0f} MiB", 1),
                 ("restart_s", "restart", "{:.2f} s", 1),
                 ("dead_agent_noticed_s", "silent agent noticed", "{:.2f} s",
                  1)]


def scale(d):
    table = {int(k): v for k, v in d["scale"].items()}
    if not table:
        return f"Not run in the report of {source(d)}.\n"
    # The largest size that ran (a run that failed has no figures).
    ran = [size for size in table if table[size]["rendezvous_s"]] or [max(table)]
    largest = max(ran)
    targets = {f: (t, s) for f, _, _, s, t in report.SCALE_FIGURES}
    out = [f"Result of {source(d)}, {table[largest]['rendezvous_s']['n']} "
           "runs per size, the coordinator and the simulator on the same "
           "cores. Heartbeats as UDP datagrams (the default); the last row, "
           "if any, is heartbeats on the gRPC stream in the same suite run.\n\n"
           "| agents | " + " | ".join(h for _, h, _, _ in SCALE_COLUMNS) +
           " |\n|" + "---|" * (len(SCALE_COLUMNS) + 1) + "\n"]
    for size in sorted(table):
        cells = []
        for field, _, form, mult in SCALE_COLUMNS:
            s = table[size][field]
            cell = form.format(s["median"] * mult) if s else "not run"
            by_size, tscale = targets[field]
            target = by_size.get(size)
            if s and target is not None and s["median"] * tscale > target:
                cell += f" (target < {target:g})"
            cells.append(cell)
        out.append(f"| {size} | " + " | ".join(cells) + " |\n")
    stream = [r for r in d["scale_runs"] if r.get("heartbeats_via") == "stream"]
    if stream:
        rdv = report.spread([r["rendezvous_s"] for r in stream])
        rss = report.spread([r["coordinator_rss_mib"] for r in stream])
        cpu = d["heartbeats_on_stream"]
        out.append(f"| {stream[0]['agents']}, heartbeats on the stream | "
                   f"{rdv['min']:.3g}–{rdv['max']:.3g} s | "
                   f"{cpu['median'] * 100:.1f} % | | {rss['median']:.0f} MiB "
                   "| | |\n")
    big = [r for r in d["scale_runs"] if r["agents"] == largest and
           r.get("heartbeats_via", "udp") == "udp" and
           r.get("heartbeat_interval_s", 1) == 1]
    coord = report.spread([r.get("rendezvous_coordinator_cpu_s") for r in big])
    sim = report.spread([r.get("rendezvous_simulator_cpu_s") for r in big])
    if coord and sim:
        out.append(f"\nThe rendezvous of {largest} agents cost the coordinator "
                   f"{coord['min']:.2f}–{coord['max']:.2f} CPU-s and the "
                   f"simulator {sim['min']:.2f}–{sim['max']:.2f} CPU-s; on "
                   f"{d['machine']['cores']} cores its wall time is about "
                   "their sum divided by the cores.\n")
    return "".join(out)


RENDER = {"launch": launch, "restart": restart, "allreduce": allreduce,
          "targets": targets, "scale": scale}


# Whether a report holds a region's figures.
HOLDS = {"launch": lambda d: d.get("launch") is not None,
         "restart": lambda d: d.get("restart") is not None,
         "allreduce": lambda d: d.get("allreduce") is not None,
         "scale": lambda d: bool(d.get("scale")),
         "targets": lambda d: bool(d.get("scale"))}
# The launcher figures of the targets table (from the newest report that
# ran them when the one with the scale figures did not).
LAUNCHER_KEYS = ("launch", "launch_tuned", "restart", "restart_tuned")


def reports():
    found = sorted(glob.glob(os.path.join(ROOT, "bench/results/*/results.json")))
    if not found:
        sys.exit("tables.py: no bench/results/*/results.json")
    loaded = []
    for path in found:
        with open(path) as f:
            loaded.append((os.path.relpath(path, ROOT), json.load(f)))
    return loaded


def pick(name, loaded):
    """(path, results) of the newest report holding region `name`."""
    for rel, d in reversed(loaded):
        if HOLDS[name](d):
            if name == "targets" and d.get("launch") is None:
                for other_rel, other in reversed(loaded):
                    if other.get("launch") is not None:
                        d = dict(d)
                        for key in LAUNCHER_KEYS:
                            d[key] = other.get(key)
                        d["launcher_machine"] = other["machine"]
                        return f"{rel} and {other_rel}", d
            return rel, d
    return loaded[-1]


def regenerate(text, loaded):
    def one(m):
        name = m.group(1)
        if name not in RENDER:
            sys.exit(f"tables.py: unknown region bench:{name}")
        rel, d = pick(name, loaded)
        return (f"<!-- bench:{name} begin (generated from {rel} by "
                f"bench/tables.py; do not edit) -->\n{RENDER[name](d)}"
                f"<!-- bench:{name} end -->")
    return REGION.sub(one, text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    ap.add_argument("--results")
    args = ap.parse_args()
    if args.results:
        path = os.path.abspath(args.results)
        with open(path) as f:
            loaded = [(os.path.relpath(path, ROOT), json.load(f))]
    else:
        loaded = reports()
    rel = " and ".join(sorted({r for r, _ in loaded}))
    stale, seen = False, set()
    for doc in DOCS:
        with open(os.path.join(ROOT, doc)) as f:
            old = f.read()
        found = [m.group(1) for m in REGION.finditer(old)]
        markers = re.findall(r"<!-- bench:\S+ (begin|end)", old)
        if markers != ["begin", "end"] * len(found):
            sys.exit(f"tables.py: {doc}: a bench: marker without its pair")
        seen.update(found)
        new = regenerate(old, loaded)
        if new == old:
            continue
        if args.write:
            with open(os.path.join(ROOT, doc), "w") as f:
                f.write(new)
            print(f"tables.py: rewrote the regions of {doc} from {rel}")
        else:
            stale = True
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), new.splitlines(True), f"{doc} (as is)",
                f"{doc} (from {rel})"))
    for name in sorted(set(RENDER) - seen):
        print(f"tables.py: no document has the region bench:{name}")
        stale = True
    if stale:
        print(f"tables.py: generated regions differ from {rel}; run "
              "bench/tables.py --write")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

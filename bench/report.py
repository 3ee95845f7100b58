#!/usr/bin/env python3
"""Writes the benchmark report from the raw results that bench/run_all.sh
collects: REPORT.md (tables against the targets in docs/design.md), results.json (the
raw numbers) and scale.png (each figure against the number of agents).

Usage: report.py RAW_DIR OUT_DIR
RAW_DIR may hold scale.jsonl, launch.json, restart.json, allreduce.json;
a missing file is reported as not run."""
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import time


def load_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def load_scale(path):
    runs, extra = [], {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                record = json.loads(line)
                if "agents" in record:
                    runs.append(record)
                else:
                    extra.update(record)
    return runs, extra


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values),
            "max": max(values), "n": len(values)}


def number(x, digits=3):
    """`digits` significant digits, without an exponent (5420, not
    5.42e+03)."""
    if x != 0 and abs(x) >= 10 ** digits:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def fmt(s, unit="", scale=1.0, digits=3):
    if s is None:
        return "not run"
    m = s["median"] * scale
    if s["n"] == 1:
        return f"{number(m, digits)}{unit}"
    return (f"{number(m, digits)}{unit} ({number(s['min'] * scale, digits)}–"
            f"{number(s['max'] * scale, digits)})")


def machine():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    memory = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            memory = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    # BENCH_COMMIT: the commit the measured binaries were built from, when
    # the report is written at another.
    try:
        commit = os.environ.get("BENCH_COMMIT") or subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True,
                                cwd=os.path.dirname(__file__)).stdout.strip()
    except OSError:
        commit = ""
    return {"host": platform.node(), "cores": os.cpu_count(), "cpu": cpu,
            "memory": memory, "kernel": platform.release(), "commit": commit,
            "date": time.strftime("%Y-%m-%d")}


# (field, label, unit, scale to unit, targets by number of agents, lower
# is better always)
SCALE_FIGURES = [
    # As issue 15 (docs/design.md, Targets) sets them, at 4096 and 16,384
    # agents x 8 ranks.
    ("rendezvous_s", "rendezvous: first registration -> every agent assigned",
     "s", 1.0, {4096: 0.5, 16384: 2.0}),
    ("rendezvous_connect_s", "of which: later waves' TCP + TLS set-up", "s",
     1.0, {}),
    ("last_registration_to_assigned_s",
     "last registration -> every agent assigned", "ms", 1000.0,
     {4096: 30.0, 16384: 100.0}),
    ("coordinator_cpu_share", "coordinator CPU under 1 Hz heartbeats",
     "% of a core", 100.0, {4096: 5.0, 16384: 10.0}),
    ("ps_median_ms", "`trl-coord ps --json`", "ms", 1.0,
     {4096: 50.0, 16384: 200.0}),
    ("ps_summary_median_ms", "`trl-coord ps` (summary)", "ms", 1.0,
     {4096: 20.0, 16384: 50.0}),
    ("coordinator_rss_mib", "coordinator resident memory", "MiB", 1.0,
     {4096: 64.0, 16384: 256.0}),
    ("coordinator_anon_mib", "coordinator private (anonymous) memory", "MiB",
     1.0, {}),
    ("restart_s", "whole-job restart: worker exit -> all agents assigned",
     "s", 1.0, {4096: 0.3, 16384: 1.0}),
    ("dead_agent_noticed_s", "silent agent noticed (1 s x 3 misses)", "s",
     1.0, {4096: 3.1, 16384: 3.1}),
]
TARGET_SIZES = (4096, 16384)


def target_sizes(table):
    """The sizes checked against targets: those the targets name, else the
    largest (a quick run), held to the smallest size's targets."""
    if any(size in table for size in TARGET_SIZES):
        return list(TARGET_SIZES)  # a size that did not run: "not run"
    return [max(table)]


def target_at(targets, size):
    return targets.get(size, targets.get(TARGET_SIZES[0]))


def scale_table(runs):
    by_size = {}
    for r in runs:
        if (r.get("heartbeat_interval_s", 1) != 1 or
                r.get("heartbeats_via", "udp") != "udp" or
                r.get("transport") == "insecure"):
            continue
        r = dict(r)
        # A ps that never answered (runs 0, median -1000) was not measured:
        # not a figure that meets its target.
        if r.get("ps_ms", {}).get("runs"):
            r["ps_median_ms"] = r["ps_ms"]["median"]
        if r.get("ps_summary_ms", {}).get("runs"):
            r["ps_summary_median_ms"] = r["ps_summary_ms"]["median"]
        by_size.setdefault(r["agents"], []).append(r)
    table = {}
    for size, rs in sorted(by_size.items()):
        table[size] = {f: spread([r.get(f) for r in rs])
                       for f, *_ in SCALE_FIGURES}
        # A run that stopped early (the simulator exits 1 and prints what it
        # had measured): its missing figures are failures, not "not run".
        stopped = [r for r in rs if "dead_agent_noticed_s" not in r]
        if any(r.get("ps_ms", {}).get("runs") == 0 for r in rs):
            table[size]["ps_failed"] = True
        if stopped:
            table[size]["stopped_early"] = {
                "runs": len(stopped), "of": len(rs),
                "leases_expired": [r.get("leases_expired") for r in stopped]}
    return table


def plot(table, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (apt-get install python3-matplotlib)"
    sizes = sorted(table)
    fig, axes = plt.subplots(3, 4, figsize=(16, 11))
    for ax, (field, label, unit, scale, targets) in zip(axes.flat,
                                                        SCALE_FIGURES):
        points = [(s, table[s][field]) for s in sizes if table[s].get(field)]
        if points:
            xs = [s for s, _ in points]
            med = [p["median"] * scale for _, p in points]
            low = [(p["median"] - p["min"]) * scale for _, p in points]
            high = [(p["max"] - p["median"]) * scale for _, p in points]
            ax.errorbar(xs, med, yerr=[low, high], marker="o", capsize=3,
                        label="trl-launch (median, min–max)")
        for size, target in sorted(targets.items()):
            ax.axhline(target, color="red",
                       linestyle="--" if size == TARGET_SIZES[0] else ":",
                       label=f"target at {size}: {target:g} {unit}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(s) for s in sizes])
        ax.set_xlabel("agents (x 8 ranks)")
        ax.set_ylabel(unit)
        ax.set_title(label, fontsize=9)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(SCALE_FIGURES):]:
        ax.axis("off")
    fig.suptitle("trl-coord with simulated agents (one gRPC stream each)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return None


# Ratio targets (reference / trl-launch, docs/design.md, Targets) as this
# report checks them, and the others that are not per number of agents.
LAUNCH_TARGET, LAUNCH_TUNED_TARGET = ">= 100", ">= 30"
RESTART_TARGET, RESTART_TUNED_TARGET = ">= 100", ">= 30"
FAST_DETECTION_TARGET_S = 0.5  # "about 0.3 s" with 0.1 s x 3 misses
AGENT_RSS_TARGET_MIB = 16


def meets(value, target):
    op, bound = target.split()
    return value >= float(bound) if op == ">=" else value > float(bound)


def ratio(raw, ours_key, ref_key):
    if raw is None:
        return None
    ours, ref = spread(raw[ours_key]), spread(raw[ref_key])
    return {"ours": ours, "reference": ref,
            "ratio": ref["median"] / ours["median"]}


def ratio_row(name, r, unit, target):
    if r is None:
        return f"| {name} | not run | | | {target} | |\n"
    verdict = "met" if meets(r["ratio"], target) else "missed"
    return (f"| {name} | {fmt(r['ours'], unit)} | {fmt(r['reference'], unit)} "
            f"| {r['ratio']:.1f} | {target} | {verdict} |\n")


def summarize(raw_dir):
    """results.json's content, from the raw inputs."""
    runs, extra = load_scale(os.path.join(raw_dir, "scale.jsonl"))
    launch = load_json(os.path.join(raw_dir, "launch.json"))
    restart = load_json(os.path.join(raw_dir, "restart.json"))
    allreduce = load_json(os.path.join(raw_dir, "allreduce.json"))
    summary = {"machine": machine(),
               "launch": ratio(launch, "trl_launch_s", "torchrun_s")}
    if launch and "torchrun_tuned_s" in launch:
        summary["launch_tuned"] = ratio(launch, "trl_launch_s",
                                        "torchrun_tuned_s")
    summary["restart"] = ratio(restart, "trl_launch_s", "torchrun_s")
    if restart and "torchrun_tuned_s" in restart:
        summary["restart_tuned"] = ratio(restart, "trl_launch_s",
                                         "torchrun_tuned_s")
    table = scale_table(runs)
    on_stream = [r for r in runs if r.get("heartbeats_via") == "stream"]
    if table and on_stream:
        summary["heartbeats_on_stream"] = spread(
            [r.get("coordinator_cpu_share") for r in on_stream])
    insecure = insecure_runs(runs)
    if table and insecure:
        summary["insecure_reference"] = insecure
    # The worker library's all-reduce against torch.distributed's: the
    # launcher plays no part in it (the keys keep their old names).
    summary["allreduce"] = ratio(allreduce, "trl_launch_us", "torchrun_us")
    summary["scale"] = {str(k): v for k, v in table.items()}
    summary["scale_runs"] = runs
    summary["real_agent"] = extra
    summary["raw"] = {"launch": launch, "restart": restart,
                      "allreduce": allreduce}
    # Where the launch's time went (bench/launch_phases.py), and the same
    # from an earlier commit measured in the same sitting, if one was
    # (raw/before-COMMIT/).
    summary["launch_phases"] = load_json(
        os.path.join(raw_dir, "launch_phases.json"))
    befores = sorted(glob.glob(os.path.join(raw_dir, "before-*")))
    if befores:
        before = befores[-1]
        summary["before"] = {
            "commit": os.path.basename(before)[len("before-"):],
            "launch": ratio(load_json(os.path.join(before, "launch.json")),
                            "trl_launch_s", "torchrun_s"),
            "restart": ratio(load_json(os.path.join(before, "restart.json")),
                             "trl_launch_s", "torchrun_s"),
            "launch_phases": load_json(
                os.path.join(before, "launch_phases.json"))}
    return summary


def phase_rows(summary):
    """Where a no-op launch's time goes, phase by phase (ms), with the
    earlier commit's phases beside them when the sitting measured one."""
    now = (summary.get("launch_phases") or {}).get("phases")
    if not now:
        return []
    before = summary.get("before") or {}
    then = (before.get("launch_phases") or {}).get("phases") or {}
    md = ["\n## Where a no-op launch's time goes\n\n"
          "From the daemons' own log lines (bench/launch_noop.sh runs them "
          "with TRL_LOG_LEVEL=debug; bench/launch_phases.py reads them): "
          "each phase ends at the line named in launch_phases.py and starts "
          "where the one before it ended; the first starts when the script "
          "starts both daemons (`ip netns exec` included). Median (min–max) "
          "ms over the runs; the medians need not add up to the total's.\n\n"]
    head = "| phase | this commit |"
    rule = "|---|---|"
    if then:
        head += f" commit {before['commit']} (same sitting) |"
        rule += "---|"
        md.append(f"The earlier commit's daemons log fewer steps: a phase "
                  "without its line there is counted in the next one.\n\n")
    md.append(head + "\n" + rule + "\n")
    for name, s in now.items():
        row = (f"| {name} | {s['median_ms']:.1f} ({s['min_ms']:.1f}–"
               f"{s['max_ms']:.1f}) |")
        if then:
            t = then.get(name)
            row += (f" {t['median_ms']:.1f} ({t['min_ms']:.1f}–"
                    f"{t['max_ms']:.1f}) |" if t else " (in the next) |")
        md.append(row + "\n")
    if before.get("launch") and before.get("restart"):
        md.append(
            f"\nCommit {before['commit']} in the same sitting: no-op launch "
            f"{before['launch']['ours']['median']:.3f} s "
            f"({before['launch']['ratio']:.1f}x torchrun's defaults), "
            f"restart {before['restart']['ours']['median']:.3f} s "
            f"({before['restart']['ratio']:.1f}x).\n")
    return md


def insecure_runs(runs):
    # The --insecure reference of the handshakes' cost (1 Hz, datagrams),
    # not the other runs that happen to be insecure (fast detection).
    return [r for r in runs if r.get("transport") == "insecure" and
            r.get("heartbeat_interval_s", 1) == 1 and
            r.get("heartbeats_via", "udp") == "udp"]


def targets_rows(summary):
    """The table against the targets, from results.json's content."""
    md = ["| figure | trl-launch | reference | reference / trl-launch | "
          "target | |\n|---|---|---|---|---|---|\n"]
    md.append(ratio_row("no-op job, 2 hosts x 2 workers (s), torchrun's "
                        "defaults", summary.get("launch"), " s", LAUNCH_TARGET))
    if summary.get("launch_tuned"):
        md.append(ratio_row("no-op job, torchrun --monitor_interval 0.1",
                            summary["launch_tuned"], " s", LAUNCH_TUNED_TARGET))
    md.append(ratio_row("worker crash -> next generation all started (s), "
                        "torchrun's defaults", summary.get("restart"), " s",
                        RESTART_TARGET))
    if summary.get("restart_tuned"):
        md.append(ratio_row("worker crash -> next generation, torchrun "
                            "--monitor_interval 0.1", summary["restart_tuned"],
                            " s", RESTART_TUNED_TARGET))
    table = {int(k): v for k, v in summary.get("scale", {}).items()}
    runs = summary.get("scale_runs", [])
    for size in (target_sizes(table) if table else []):
        for field, label, unit, scale, targets in SCALE_FIGURES:
            target = target_at(targets, size)
            if target is None:
                continue
            s = table.get(size, {}).get(field)
            verdict = "not run"
            if s is None and table.get(size, {}).get("stopped_early"):
                verdict = "failed: the run stopped before it (below)"
            if (s is None and field == "ps_median_ms" and
                    table.get(size, {}).get("ps_failed")):
                verdict = "failed: no `ps --json` answered"
            if s is not None:
                verdict = "met" if s["median"] * scale <= target else "missed"
            md.append(f"| {label}, {size} agents | "
                      f"{fmt(s, ' ' + unit, scale)} | | | < {target:g} {unit} "
                      f"| {verdict} |\n")
    on_stream = [r for r in runs if r.get("heartbeats_via") == "stream"]
    if table and on_stream:
        # Against the same size's UDP runs (not the largest size's).
        udp = table.get(on_stream[0]["agents"], {}).get(
            "coordinator_cpu_share")
        ref = summary.get("heartbeats_on_stream")
        if udp and ref:
            # A short quick run can measure no CPU at all (clock ticks of
            # 10 ms): no ratio then, rather than a division by zero.
            r = (f"{ref['median'] / udp['median']:.1f}x"
                 if udp["median"] > 0 else "n/a (no CPU measured)")
            md.append(f"| coordinator CPU, 1 Hz heartbeats as UDP datagrams "
                      f"vs on the gRPC stream, {on_stream[0]['agents']} agents "
                      f"| {fmt(udp, ' %', 100)} | {fmt(ref, ' %', 100)} | "
                      f"{r} | | |\n")
    insecure = insecure_runs(runs)
    if table and insecure:
        # The cost of the TLS handshakes (the default: the token's derived
        # identity) against --insecure, same size, same run.
        size = insecure[0]["agents"]
        secure_runs = [r for r in runs if r.get("agents") == size and
                       r.get("transport") == "tls-derived" and
                       r.get("heartbeats_via", "udp") == "udp" and
                       r.get("heartbeat_interval_s", 1) == 1]
        for field, label, unit, scale in (
                ("rendezvous_s", "rendezvous", " s", 1),
                ("coordinator_rss_mib", "coordinator memory", " MiB", 1)):
            ours = spread([r.get(field) for r in secure_runs])
            ref = spread([r.get(field) for r in insecure])
            if ours and ref and ours["median"] > 0:
                md.append(f"| {label}, {size} agents: TLS (derived identity) "
                          f"vs --insecure | {fmt(ours, unit, scale)} | "
                          f"{fmt(ref, unit, scale)} | "
                          f"{ref['median'] / ours['median']:.2f} | | |\n")
    fast = [r for r in runs if r.get("heartbeat_interval_s", 1) != 1]
    if fast:
        s = spread([r.get("dead_agent_noticed_s") for r in fast])
        verdict = ("met" if s and s["median"] <= FAST_DETECTION_TARGET_S
                   else "missed")
        md.append(f"| silent agent noticed, 0.1 s x 3 misses, "
                  f"{fast[0]['agents']} agents | {fmt(s, ' s')} | | | about "
                  f"0.3 s | {verdict} |\n")
    extra = summary.get("real_agent")
    if extra:
        rss = extra.get("real_agent_rss_mib")
        verdict = ("met" if rss is not None and rss < AGENT_RSS_TARGET_MIB
                   else "missed")
        md.append(f"| real trl-agent resident memory (2 workers) | {rss} MiB "
                  f"({extra.get('real_agent_anon_mib')} MiB private, "
                  f"{extra.get('real_agent_file_mib')} MiB shared libraries) "
                  f"| | | < {AGENT_RSS_TARGET_MIB} MiB | {verdict} |\n")
    return md


def allreduce_rows(summary):
    """The worker library's all-reduce against torch.distributed's."""
    r, raw = summary.get("allreduce"), summary["raw"].get("allreduce")
    md = ["| all-reduce, 2 CPU workers, Gloo | worker library "
          "(`trl-allreduce-bench`, gloo::allreduce) | torch.distributed."
          "all_reduce | torch / worker library |\n|---|---|---|---|\n"]
    if r is None:
        return md + ["| | not run | | |\n"]
    return md + [f"| {raw['floats']} floats ({raw['floats'] * 4:,} B), "
                 f"{r['ours']['n']} runs (µs) | {fmt(r['ours'], ' µs')} | "
                 f"{fmt(r['reference'], ' µs')} | {r['ratio']:.2f} |\n"]


def main():
    raw_dir, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    summary = summarize(raw_dir)
    info = summary["machine"]
    md = [f"# trl-launch benchmarks, {info['date']}\n\n",
          f"Machine: `{info['host']}`, {info['cores']} cores ({info['cpu']}), "
          f"{info['memory']}, Linux {info['kernel']}; commit {info['commit']}. "
          "Each figure: median (min–max) over the runs.\n\n",
          "## Against the targets (docs/design.md, Targets)\n\n"]
    md += targets_rows(summary)
    md += phase_rows(summary)
    md.append("\n## Not the launcher: the worker library's all-reduce "
              "against torch.distributed's\n\n"
              "Two workers on loopback, median time per call. The launcher "
              "plays no part in this figure.\n\n")
    md += allreduce_rows(summary)
    table = {int(k): v for k, v in summary["scale"].items()}
    md.append("\n## How each figure grows with the number of agents\n\n")
    if table:
        md.append("| agents | " + " | ".join(
            f"{label} ({unit})" for _, label, unit, _, _ in SCALE_FIGURES) +
            " |\n|" + "---|" * (len(SCALE_FIGURES) + 1) + "\n")
        for size in sorted(table):
            md.append(f"| {size} | " + " | ".join(
                fmt(table[size][f], "", scale)
                for f, _, _, scale, _ in SCALE_FIGURES) + " |\n")
        for size in sorted(table):
            stopped = table[size].get("stopped_early")
            if stopped:
                md.append(
                    f"\n{size} agents: {stopped['runs']} of {stopped['of']} "
                    "run(s) stopped early (the simulator's reason is in the "
                    "suite's log); simulated agents whose lease ran out: "
                    f"{', '.join(str(n) for n in stopped['leases_expired'])}. "
                    "The figures measured before the stop are above.\n")
        problem = plot(table, os.path.join(out_dir, "scale.png"))
        md.append("\n" + (f"No plot: {problem}\n" if problem else
                          "![figures against agents](scale.png)\n"))
    else:
        md.append("not run\n")
    with open(os.path.join(out_dir, "REPORT.md"), "w") as f:
        f.write("".join(md))
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"wrote {out_dir}/REPORT.md, results.json"
          f"{', scale.png' if table else ''}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the benchmark report from the raw results that bench/run_all.sh
collects: REPORT.md (tables against the targets in docs/design.md), results.json (the
raw numbers) and scale.png (each figure against the number of agents).

Usage: report.py RAW_DIR OUT_DIR
RAW_DIR may hold scale.jsonl, launch.json, restart.json, allreduce.json;
a missing file is reported as not run."""
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


def fmt(s, unit="", scale=1.0, digits=3):
    if s is None:
        return "not run"
    m = s["median"] * scale
    if s["n"] == 1:
        return f"{m:.{digits}g}{unit}"
    return (f"{m:.{digits}g}{unit} ({s['min'] * scale:.{digits}g}–"
            f"{s['max'] * scale:.{digits}g})")


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
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True,
                                cwd=os.path.dirname(__file__)).stdout.strip()
    except OSError:
        commit = ""
    return {"host": platform.node(), "cores": os.cpu_count(), "cpu": cpu,
            "memory": memory, "kernel": platform.release(), "commit": commit,
            "date": time.strftime("%Y-%m-%d")}


# (field, label, unit, scale to unit, target at the largest size, lower is
# better always)
SCALE_FIGURES = [
    ("rendezvous_s", "rendezvous: first registration -> every agent assigned",
     "s", 1.0, 1.0),
    ("coordinator_cpu_share", "coordinator CPU under 1 Hz heartbeats",
     "% of a core", 100.0, 10.0),
    ("ps_median_ms", "`trl-coord ps --json`", "ms", 1.0, 50.0),
    ("coordinator_rss_mib", "coordinator resident memory", "MiB", 1.0, 64.0),
    ("coordinator_anon_mib", "coordinator private (anonymous) memory", "MiB",
     1.0, None),
    ("restart_s", "whole-job restart: worker exit -> all agents assigned",
     "s", 1.0, None),
    ("dead_agent_noticed_s", "silent agent noticed (1 s x 3 misses)", "s",
     1.0, 3.0),
]


def scale_table(runs):
    by_size = {}
    for r in runs:
        if (r.get("heartbeat_interval_s", 1) != 1 or
                r.get("heartbeats_via", "udp") != "udp" or
                r.get("transport") == "insecure"):
            continue
        r = dict(r)
        if "ps_ms" in r:
            r["ps_median_ms"] = r["ps_ms"]["median"]
        by_size.setdefault(r["agents"], []).append(r)
    table = {}
    for size, rs in sorted(by_size.items()):
        table[size] = {f: spread([r.get(f) for r in rs])
                       for f, *_ in SCALE_FIGURES}
    return table


def plot(table, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (apt-get install python3-matplotlib)"
    sizes = sorted(table)
    fig, axes = plt.subplots(2, 4, figsize=(16, 7.5))
    for ax, (field, label, unit, scale, target) in zip(axes.flat,
                                                       SCALE_FIGURES):
        points = [(s, table[s][field]) for s in sizes if table[s][field]]
        if points:
            xs = [s for s, _ in points]
            med = [p["median"] * scale for _, p in points]
            low = [(p["median"] - p["min"]) * scale for _, p in points]
            high = [(p["max"] - p["median"]) * scale for _, p in points]
            ax.errorbar(xs, med, yerr=[low, high], marker="o", capsize=3,
                        label="trl-launch (median, min–max)")
        if target is not None:
            ax.axhline(target, color="red", linestyle="--",
                       label=f"target {target:g} {unit}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(s) for s in sizes])
        ax.set_xlabel("agents (x 8 ranks)")
        ax.set_ylabel(unit)
        ax.set_title(label, fontsize=9)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    axes.flat[-1].axis("off")
    fig.suptitle("trl-coord with simulated agents (one gRPC stream each)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return None


def ratio_row(name, raw, ours_key, ref_key, unit, target):
    if raw is None:
        return f"| {name} | not run | | | {target} | |\n", None
    ours = spread(raw[ours_key])
    ref = spread(raw[ref_key])
    ratio = ref["median"] / ours["median"]
    return (f"| {name} | {fmt(ours, unit)} | {fmt(ref, unit)} | {ratio:.1f} "
            f"| {target} | {'met' if eval(f'{ratio} {target}') else 'missed'} |\n",
            {"ours": ours, "reference": ref, "ratio": ratio})


def main():
    raw_dir, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    runs, extra = load_scale(os.path.join(raw_dir, "scale.jsonl"))
    launch = load_json(os.path.join(raw_dir, "launch.json"))
    restart = load_json(os.path.join(raw_dir, "restart.json"))
    allreduce = load_json(os.path.join(raw_dir, "allreduce.json"))
    table = scale_table(runs)
    fast = [r for r in runs if r.get("heartbeat_interval_s", 1) != 1]
    # The --insecure reference of the handshakes' cost (1 Hz, datagrams),
    # not the other runs that happen to be insecure (fast detection).
    insecure = [r for r in runs if r.get("transport") == "insecure" and
                r.get("heartbeat_interval_s", 1) == 1 and
                r.get("heartbeats_via", "udp") == "udp"]
    on_stream = [r for r in runs if r.get("heartbeats_via") == "stream"]
    info = machine()

    md = [f"# trl-launch benchmarks, {info['date']}\n\n",
          f"Machine: `{info['host']}`, {info['cores']} cores ({info['cpu']}), "
          f"{info['memory']}, Linux {info['kernel']}; commit {info['commit']}. "
          "Each figure: median (min–max) over the runs.\n\n",
          "## Against the targets (docs/design.md, Targets)\n\n",
          "| figure | trl-launch | reference | reference / trl-launch | target "
          "| |\n|---|---|---|---|---|---|\n"]
    summary = {"machine": info}
    row, summary["launch"] = ratio_row(
        "no-op job, 2 hosts x 2 workers (s), torchrun's defaults", launch,
        "trl_launch_s", "torchrun_s", " s", ">= 100")
    md.append(row)
    if launch and "torchrun_tuned_s" in launch:
        row, summary["launch_tuned"] = ratio_row(
            "no-op job, torchrun --monitor_interval 0.1", launch,
            "trl_launch_s", "torchrun_tuned_s", " s", ">= 30")
        md.append(row)
    row, summary["restart"] = ratio_row(
        "worker crash -> next generation all started (s), torchrun's "
        "defaults", restart, "trl_launch_s", "torchrun_s", " s", ">= 100")
    md.append(row)
    if restart and "torchrun_tuned_s" in restart:
        row, summary["restart_tuned"] = ratio_row(
            "worker crash -> next generation, torchrun --monitor_interval 0.1",
            restart, "trl_launch_s", "torchrun_tuned_s", " s", ">= 1")
        md.append(row)
    if table:
        largest = max(table)
        t = table[largest]
        for field, label, unit, scale, target in SCALE_FIGURES:
            if target is None:
                continue
            s = t[field]
            verdict = ""
            if s is not None:
                verdict = "met" if s["median"] * scale <= target else "missed"
            md.append(f"| {label}, {largest} agents | "
                      f"{fmt(s, ' ' + unit, scale)} | | | < {target:g} {unit} "
                      f"| {verdict} |\n")
    if table and on_stream:
        udp = table[max(table)]["coordinator_cpu_share"]
        ref = spread([r.get("coordinator_cpu_share") for r in on_stream])
        if udp and ref:
            # A short quick run can measure no CPU at all (clock ticks of
            # 10 ms): no ratio then, rather than a division by zero.
            ratio = (f"{ref['median'] / udp['median']:.1f}x"
                     if udp["median"] > 0 else "n/a (no CPU measured)")
            md.append(f"| coordinator CPU, 1 Hz heartbeats as UDP datagrams "
                      f"vs on the gRPC stream, {on_stream[0]['agents']} agents "
                      f"| {fmt(udp, ' %', 100)} | {fmt(ref, ' %', 100)} | "
                      f"{ratio} | | |\n")
            summary["heartbeats_on_stream"] = ref
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
        summary["insecure_reference"] = insecure
    if fast:
        s = spread([r.get("dead_agent_noticed_s") for r in fast])
        verdict = "met" if s and s["median"] <= 0.5 else "missed"
        md.append(f"| silent agent noticed, 0.1 s x 3 misses, "
                  f"{fast[0]['agents']} agents | {fmt(s, ' s')} | | | about "
                  f"0.3 s | {verdict} |\n")
    if extra:
        rss = extra.get("real_agent_rss_mib")
        verdict = "met" if rss is not None and rss < 16 else "missed"
        md.append(f"| real trl-agent resident memory (2 workers) | {rss} MiB "
                  f"({extra.get('real_agent_anon_mib')} MiB private, "
                  f"{extra.get('real_agent_file_mib')} MiB shared libraries) "
                  f"| | | < 16 MiB | {verdict} |\n")
    if allreduce is not None:
        row, summary["allreduce"] = ratio_row(
            f"all-reduce of {allreduce['floats']} floats, 2 CPU workers (µs)",
            allreduce, "trl_launch_us", "torchrun_us", " µs", "> 1")
        md.append(row)

    md.append("\n## How each figure grows with the number of agents\n\n")
    if table:
        md.append("| agents | " + " | ".join(
            f"{label} ({unit})" for _, label, unit, _, _ in SCALE_FIGURES) +
            " |\n|" + "---|" * (len(SCALE_FIGURES) + 1) + "\n")
        for size in sorted(table):
            md.append(f"| {size} | " + " | ".join(
                fmt(table[size][f], "", scale)
                for f, _, _, scale, _ in SCALE_FIGURES) + " |\n")
        problem = plot(table, os.path.join(out_dir, "scale.png"))
        md.append("\n" + (f"No plot: {problem}\n" if problem else
                          "![figures against agents](scale.png)\n"))
    else:
        md.append("not run\n")
    summary["scale"] = {str(k): v for k, v in table.items()}
    summary["scale_runs"] = runs
    summary["real_agent"] = extra
    summary["raw"] = {"launch": launch, "restart": restart,
                      "allreduce": allreduce}
    with open(os.path.join(out_dir, "REPORT.md"), "w") as f:
        f.write("".join(md))
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"wrote {out_dir}/REPORT.md, results.json"
          f"{', scale.png' if table else ''}")


if __name__ == "__main__":
    main()

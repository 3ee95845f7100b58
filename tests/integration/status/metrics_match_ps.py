#!/usr/bin/env python3
"""Scrapes a coordinator's /metrics, parses it with the Prometheus client's
own parser, and checks it against `trl-coord ps --json` at the same moment:
generation, ranks by state, agents by state, restarts. "The same moment":
ps is asked before and after the scrape, and a pair that differs (the job
moved meanwhile) is tried again, a bounded number of times.

    metrics_match_ps.py TRL_COORD MAIN_PORT STATUS_PORT
Exit 0 when they agree; 1, saying what differs, when they do not."""
import collections
import json
import subprocess
import sys
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def ps_json(coord, port):
    out = subprocess.run(
        [coord, "ps", "--address", f"127.0.0.1:{port}", "--json"],
        check=True, capture_output=True, text=True, timeout=10).stdout
    return json.loads(out)


def expected(status):
    """What /metrics must show, from ps's JSON."""
    agents = collections.Counter(n["state"] for n in status["nodes"])
    ranks = collections.Counter(r["state"] for r in status["ranks"])
    return {
        "generation": int(status["generation"]),
        "world_size": status["world_size"],
        "restarts_used": status["restarts_used"],
        "restarts_allowed": status["max_restarts"],
        "agents": dict(agents),
        "ranks": dict(ranks),
        "machines": sorted(n["machine_rank"] for n in status["nodes"]),
    }


def scraped(text):
    """The same figures, as the Prometheus parser reads the exposition."""
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name, family in families.items():
        assert name.startswith("trl_launch_"), name
        assert family.documentation, f"{name} has no HELP"

    def value(name):
        return families[name].samples[0].value

    def by_state(name):
        return {s.labels["state"]: int(s.value)
                for s in families[name].samples if s.value > 0}

    assert families["trl_launch_generation"].type == "gauge"
    assert families["trl_launch_agents"].type == "gauge"
    # The parser drops a counter's _total suffix from the family name.
    assert families["trl_launch_restarts"].type == "counter"
    assert families["trl_launch_refused_calls"].type == "counter"
    assert families["trl_launch_rendezvous_seconds"].type == "histogram"
    assert families["trl_launch_restart_seconds"].type == "histogram"
    return {
        "generation": int(value("trl_launch_generation")),
        "world_size": int(value("trl_launch_world_size")),
        "restarts_used": int(value("trl_launch_restarts")),
        "restarts_allowed": int(value("trl_launch_restarts_allowed")),
        "agents": by_state("trl_launch_agents"),
        "ranks": by_state("trl_launch_ranks"),
        "machines": sorted(
            int(s.labels["machine"])
            for s in families["trl_launch_agent_heartbeat_age_seconds"].samples),
    }


def main():
    coord, port, status_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    url = f"http://127.0.0.1:{status_port}/metrics"
    for attempt in range(20):
        before = expected(ps_json(coord, port))
        with urllib.request.urlopen(url, timeout=10) as reply:
            content_type = reply.headers["Content-Type"]
            text = reply.read().decode()
        after = expected(ps_json(coord, port))
        if before != after:
            time.sleep(0.1)  # the job moved between the two ps: ask again
            continue
        if not content_type.startswith("text/plain; version=0.0.4"):
            print(f"Content-Type is {content_type!r}")
            return 1
        metrics = scraped(text)
        if metrics != before:
            print(f"/metrics says {metrics}\nps --json says {before}")
            return 1
        print(f"agree after {attempt + 1} scrape(s): {metrics}")
        return 0
    print("the job never stood still for a scrape")
    return 1


if __name__ == "__main__":
    sys.exit(main())

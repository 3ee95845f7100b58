#!/usr/bin/env python3
"""The nemesis suite's checker: reads what one job left in its directory and
fails on any broken invariant, printing which and its evidence.

Usage: check.py JOB_DIR...   (exit 0: every invariant held; 1: a violation;
2: a job directory could not be read)

Files in JOB_DIR (written by tests/nemesis/worker.sh and nemesis.sh):
  records  start GEN RANK PID HOST TIME WORLD_SIZE JOB_ID [HOST_PID]
                                                (PID as the nemesis sees it,
                                                HOST_PID in the test host's
                                                own PID namespace)
           older GEN RANK PID HOST TIME OLD_GEN OLD_RANK OLD_PID
           stop  GEN RANK PID HOST TIME SECONDS       (SIGTERM: saving a
                                                checkpoint for SECONDS)
           end   GEN RANK PID HOST TIME CODE          (CODE 0, 1 or term)
  gone     gone PID LAST_SEEN_ALIVE FIRST_SEEN_GONE   (the watcher)
  daemons  daemon NAME ROLE HOST PID TIME [MACHINE_RANK] (ROLE coord or agent;
                                                MACHINE_RANK "spare" for a
                                                trl-agent --spare)
           exit NAME PID RC TIME
           hung NAME PID TIME                         (killed at the deadline)
           killed NAME PID TIME [stray]               (SIGKILLed by the nemesis;
                                                stray: an agent that never
                                                registered, after the job)
  job      job START END LIMIT NUM_PROCESSES [SIZES]  (SIZES: the world sizes
                                                a generation may have, comma-
                                                separated: 4,6 for an elastic
                                                2:3 job; NUM_PROCESSES alone
                                                without it)
  after    proc HOST PID CMDLINE...   (alive on a test host after the job)
           worker PID CMDLINE...      (a worker pid of the job still alive)
           port HOST PROTO PORT       (the coordinator's port still bound)
  ps/TIME.json  `trl-coord ps --json` asked at TIME while the job ran
  events.json  `trl-coord events --state_file F --json` after the job (the
           history kept beside the coordinator's state file), if it could
           be read
  NAME.err what daemon NAME wrote to stderr (read for coordinators: the
           generation a full disk kept from starting; for agents: in which
           generation they were cut off)

Invariants:
  I1  never two generations' workers alive at once: no worker of generation
      g is alive (its end record or the last time the watcher saw its pid
      alive, whichever is later) after
      the first worker of a later generation started; no worker saw an older
      generation's worker alive when it started
  I2  every generation: each rank at most once, 0 <= rank < WORLD_SIZE, all
      agreeing on one WORLD_SIZE, one of SIZES (NUM_PROCESSES, for a job of
      fixed size); the final generation has every rank of its WORLD_SIZE;
      some generation started (unless a coordinator said generation 0
      could not be kept)
  I3  after the job nothing of it is left: no process on any test host, no
      worker pid alive, the coordinator's port free
  I4  on each host, the generations its workers started in only increase;
      when a coordinator said "cannot keep the job's state, so generation N
      does not start" and no coordinator was started after it, no worker of
      generation N or later started
  I5  the job's exit code (the last coordinator's) is 0 exactly when every
      rank of the final generation exited 0; then the last agent of every
      machine rank (of every host, for daemon lines without one) exits 0 (a
      daemon the nemesis killed, and did not replace, is not judged). A
      coordinator that said generation N cannot be kept exits 1 and names
      the file it could not write; it may exit 1 although every rank of the
      final generation N-1 exited 0 (it had taken one for lost, and a full
      disk kept the restart from starting). A job may also fail although
      every rank exited 0 when a machine's agent "came back without the
      outcome of every worker" and the nemesis had SIGKILLed that host's
      agent after its workers ended (frozen, it never read their exits;
      they died with it): a known gap (issue 34), which the budget0 jobs
      find (seed 3, job 8)
  I6  the job and every daemon ended within the job's time limit; none hung;
      the job's events say only what happened: each "generation" event's
      world size is the one that generation's workers were started with
      (a generation none of whose workers started is not judged); and what
      ps --json said while the job ran is what the workers did: a rank with
      a pid ran as that pid (in its host) on the host it names, in the
      generation the answer was for, and an exit shown (0, 1 or 143) is
      the one its worker recorded (a lost rank is never shown exit 0)
  I7  a worker told to stop gets the time it asks for (well under the stop
      grace): none with a stop record and no end record is gone before its
      stop time plus its checkpoint's SECONDS (first seen gone by the
      watcher), unless a daemon of its machine (those on its host, and
      every daemon of their machine ranks; in a job with a spare, every
      agent, since a spare may take any machine's place and roles change
      hands) started, was killed, exited,
      hung or was cut off between its start and then. Cut off: its agent
      said its lease ran out, its connection broke or the coordinator
      declared its machine lost while it ran that generation (NAME.err,
      read in order); fencing then gives the workers only until the
      lease's end + 0.5 s, whatever they ask. A coordinator that starts the next
      generation before the old one has ended leaves the agents to SIGKILL
      the stopping workers before they start the new ones: this catches it
      where I1 cannot (no overlap is left to see)
  I8  a cordoned host gets no ranks: no worker of a generation that a
      coordinator started (its log's "generation N: world size" line) after
      it said "host H is cordoned" and before "host H passes its health
      checks again" (or uncordoned) runs on H. Read in each coordinator's
      log's order, not by its times (clock_shift moves them); a coordinator
      started again begins with no host cordoned (it may have restored one:
      then a start there is not judged). A job of fixed size with no spare
      runs on a host that failures cordoned (--cordon_after) when it says
      so ("generation N: machine M runs on cordoned host H"); a health
      check's cordon makes it wait instead
"""
import json
import os
import re
import sys
from collections import defaultdict


def read_lines(path):
    try:
        with open(path, errors="replace") as f:
            return [l.split() for l in f if l.strip()]
    except FileNotFoundError:
        return []


CUT_OFF = re.compile(
    r"\[agent\] (?:no word from the coordinator|lost the connection to the "
    r"coordinator|stopping generation \d+: this machine was declared lost)")
STARTING = re.compile(r"\[agent\] generation (\d+): starting ranks")


def cut_off_generations(d, daemons):
    """agent name -> the generations during which its log says its machine
    was cut off (its lease ran out, its connection broke, or the coordinator
    declared it lost). Read in the log's order, not by its times: an
    agent's wall clock may be shifted (the clock_shift fault)."""
    cut = defaultdict(set)
    for dm in daemons:
        if dm["role"] != "agent":
            continue
        try:
            with open(os.path.join(d, dm["name"] + ".err"), errors="replace") as f:
                generation = None
                for line in f:
                    m = STARTING.search(line)
                    if m:
                        generation = int(m.group(1))
                    elif generation is not None and CUT_OFF.search(line):
                        cut[dm["name"]].add(generation)
        except FileNotFoundError:
            pass
    return cut


def ps_snapshots(d):
    """(time asked, status) of each ps --json answer in JOB_DIR/ps."""
    out = []
    for name in sorted(os.listdir(os.path.join(d, "ps")) if os.path.isdir(
            os.path.join(d, "ps")) else []):
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(d, "ps", name), errors="replace") as f:
                out.append((float(name[:-5]), json.load(f)))
        except (ValueError, OSError):
            out.append((None, name))
    return out


def ps_disagreements(d, starts, ends):
    """What a ps --json answer said of a rank that its worker's records
    contradict: a pid or host no worker of that generation and rank had,
    or an exit it did not make (a lost rank shown as exit code 0)."""
    found = []
    by_key, ran = {}, defaultdict(list)
    for s in starts:
        if s.get("hpid") is not None:
            by_key[(s["gen"], s["rank"], s["host"], s["hpid"])] = s
            ran[(s["gen"], s["rank"])].append(s)
    if not os.path.isdir(os.path.join(d, "ps")):
        return found  # no poller ran (the self-test's hand-made jobs)
    if starts and not by_key:
        return [("I6", "no worker record says its pid in its host: ps cannot be checked")]
    snapshots = ps_snapshots(d)
    if starts and not snapshots:
        return [("I6", "ps --json never answered while the job ran (%d worker starts): "
                 "nothing it said could be checked" % len(starts))]
    for t, st in snapshots:
        if t is None:
            found.append(("I6", "ps --json gave what is not JSON: %s" % st))
            continue
        gen = int(st.get("generation", -1))
        for row in st.get("ranks", []):
            pid, host = int(row.get("pid", 0)), row.get("hostname", "")
            if pid <= 0:
                continue
            what = "ps --json asked at %.3f (generation %d) said rank %s ran as pid %d on %s" % (
                t, gen, row.get("rank"), pid, host or "no host")
            rank = int(row.get("rank", -1))
            code, state = int(row.get("exit_code", 0)), row.get("state", "")
            s = by_key.get((gen, rank, host, pid))
            if s is None and ran.get((gen, rank)):
                found.append(("I6", what + ", but that generation's rank %d ran as %s" % (
                    rank, ", ".join("pid %d on %s" % (o["hpid"], o["host"])
                                    for o in ran[(gen, rank)]))))
                continue
            if s is None:
                # A process its agent started may end before the worker
                # script writes its start record (a stop right after the
                # start): only an exit of its own (0, or 1) would be false.
                if state == "succeeded" or (code in (0, 1) and int(row.get("signal", 0)) == 0
                                            and state not in ("pending", "running", "lost",
                                                              "stopped")):
                    found.append(("I6", what + " and %s with exit code %d, but no worker of "
                                  "that generation and rank started" % (state, code)))
                continue
            if state in ("pending", "running", "lost") or code < 0:
                continue
            end = ends.get(s["pid"], {}).get("code")
            shown = "0" if code == 0 and int(row.get("signal", 0)) == 0 else str(code)
            if int(row.get("signal", 0)) != 0:
                continue  # killed: no end record to compare
            if (end, shown) not in (("0", "0"), ("1", "1"), ("term", "143")):
                found.append(("I6", what + " and %s with exit code %s, but the worker %s" % (
                    state, shown, "recorded its end as " + end if end else
                    "recorded no end (it was killed)")))
    # One line per distinct claim: the same rank is in many answers.
    seen, unique = set(), []
    for inv, msg in found:
        key = re.sub(r"asked at [0-9.]+ ", "", msg)
        if key not in seen:
            seen.add(key)
            unique.append((inv, msg))
    return unique


# How soon after its workers' last end an agent's SIGKILL may still take
# their exit statuses with it: its guardian keeps them on disk (the exit
# ledger) within its 0.1 s watch, and a loaded machine adds to that.
LEDGER_KEEPS_WITHIN = 0.5


def outcome_died_with_agent(d, coords, daemons, killed_at, final_starts, ends):
    """Whether the job failed because a machine's agent came back without
    its workers' outcome, and that outcome died with the agent: the nemesis
    SIGKILLed an agent on that host after the host's workers of the final
    generation had all ended (it was frozen when they exited: their exit
    statuses went to it alone), too soon for its guardian to keep them in
    the exit ledger. Then the coordinator cannot know that they exited 0,
    and saying the job failed is what it can honestly do. Returns the
    reason, or ""."""
    pattern = re.compile(r"job \S+ failed: the agent of machine (\d+) \(host (\S+)\) lost its "
                         r"connection and came back without the outcome of every worker")
    for dm in coords:
        try:
            with open(os.path.join(d, dm["name"] + ".err"), errors="replace") as f:
                m = next((m for m in map(pattern.search, f) if m), None)
        except OSError:
            m = None
        if m is None:
            continue
        host = m.group(2)
        ended = [ends[s["pid"]]["t"] for s in final_starts
                 if s["host"] == host and s["pid"] in ends]
        if not ended:
            continue
        for a in daemons:
            if a["role"] == "agent" and a["host"] == host and \
                    max(ended) <= killed_at.get(a["name"], 0) <= max(ended) + LEDGER_KEEPS_WITHIN:
                return "%s killed at %.3f, %.3f s after its workers ended" % (
                    a["name"], killed_at[a["name"]], killed_at[a["name"]] - max(ended))
    return ""


def cordoned_generations(d, daemons):
    """(coordinator, generation, host) for each generation a coordinator
    started while it held host cordoned, from its log in order."""
    out = []
    cordon = re.compile(r"\[coord\] host (\S+) is cordoned")
    freed = re.compile(r"\[coord\] host (\S+) (passes its health checks again|is uncordoned)")
    started = re.compile(r"\[coord\] generation (\d+): world size")
    # What it says when a job of fixed size has no spare for a host that
    # failures (not its health check) cordoned: the machine runs there.
    said = re.compile(r"\[coord\] generation (\d+): machine \d+ runs on cordoned host (\S+):")
    for dm in daemons:
        if dm["role"] != "coord":
            continue
        held, excused = set(), set()
        try:
            with open(os.path.join(d, dm["name"] + ".err"), errors="replace") as f:
                for line in f:
                    m = cordon.search(line)
                    if m:
                        held.add(m.group(1))
                        continue
                    m = freed.search(line)
                    if m:
                        held.discard(m.group(1))
                        continue
                    m = said.search(line)
                    if m:
                        excused.add((int(m.group(1)), m.group(2)))
                        continue
                    m = started.search(line)
                    if m:
                        out += [(dm["name"], int(m.group(1)), h) for h in sorted(held)]
        except OSError:
            pass
        out = [c for c in out if c[0] != dm["name"] or (c[1], c[2]) not in excused]
    return out


def check_job(d):
    violations = []

    def bad(inv, msg):
        violations.append((inv, msg))

    starts, ends, olders, stops = [], {}, [], {}
    for f in read_lines(os.path.join(d, "records")):
        try:
            if f[0] == "start":
                starts.append(dict(gen=int(f[1]), rank=int(f[2]), pid=int(f[3]), host=f[4],
                                   t=float(f[5]), ws=f[6], job=f[7] if len(f) > 7 else "?",
                                   hpid=int(f[8]) if len(f) > 8 else None))
            elif f[0] == "end":
                ends[int(f[3])] = dict(gen=int(f[1]), rank=int(f[2]), host=f[4], t=float(f[5]),
                                       code=f[6])
            elif f[0] == "older":
                olders.append(f)
            elif f[0] == "stop":
                stops[int(f[3])] = dict(gen=int(f[1]), rank=int(f[2]), host=f[4], t=float(f[5]),
                                        secs=float(f[6]))
        except (IndexError, ValueError):
            bad("records", "unreadable record: %s" % " ".join(f))
    gone = {}
    for f in read_lines(os.path.join(d, "gone")):
        if f[0] == "gone" and len(f) >= 4:
            gone[int(f[1])] = (float(f[2]), float(f[3]))
    job = None
    for f in read_lines(os.path.join(d, "job")):
        if f[0] == "job" and len(f) >= 5:
            job = dict(start=float(f[1]), end=float(f[2]), limit=float(f[3]), n=int(f[4]))
            job["sizes"] = ({int(x) for x in f[5].split(",")} if len(f) > 5 else {job["n"]})
    if job is None:
        print("%s: no job line" % d)
        return None
    daemons, exits, hung, killed, killed_at = [], {}, [], set(), {}
    events = []  # (daemon name, time, what): started, exited, killed, hung
    for f in read_lines(os.path.join(d, "daemons")):
        if f[0] == "daemon":
            daemons.append(dict(name=f[1], role=f[2], host=f[3], pid=int(f[4]), t=float(f[5]),
                                machine=f[6] if len(f) > 6 else None))
        elif f[0] == "exit":
            exits[f[1]] = dict(pid=int(f[2]), rc=int(f[3]), t=float(f[4]))
            events.append((f[1], float(f[4]), "exited"))
        elif f[0] == "hung":
            hung.append(f)
            events.append((f[1], float(f[3]), "hung"))
        elif f[0] == "killed":
            killed.add(f[1])
            if len(f) < 5 or f[4] != "stray":  # a fault's kill, not kill_strays'
                killed_at[f[1]] = float(f[3])
            events.append((f[1], float(f[3]), "killed"))
    events += [(dm["name"], dm["t"], "started") for dm in daemons]
    after = read_lines(os.path.join(d, "after"))
    # What each coordinator said about a generation it could not keep.
    unkept = {}  # name -> (generation, the line)
    pattern = re.compile(r"cannot keep the job's state, so generation (\d+) does not start")
    for dm in daemons:
        if dm["role"] != "coord":
            continue
        try:
            with open(os.path.join(d, dm["name"] + ".err"), errors="replace") as f:
                for line in f:
                    m = pattern.search(line)
                    if m:
                        unkept[dm["name"]] = (int(m.group(1)), line.strip())
                        break
        except FileNotFoundError:
            pass

    gens = defaultdict(list)
    for s in starts:
        gens[s["gen"]].append(s)

    # I1: one generation at a time.
    def alive_until(s):  # the latest time the worker surely was alive
        times = [(s["t"], "its start record")]
        e = ends.get(s["pid"])
        if e is not None:
            times.append((e["t"], "its end record"))
        if s["pid"] in gone:
            times.append((gone[s["pid"]][0], "last seen alive by the watcher"))
        return max(times)

    first_start = {g: min(s["t"] for s in ss) for g, ss in gens.items()}
    for g in sorted(gens):
        for s in gens[g]:
            until, why = alive_until(s)
            for h in sorted(first_start):
                if h > g and until > first_start[h]:
                    bad("I1", "generation %d rank %d (pid %d on %s) alive at %.3f (%s), "
                        "after generation %d started at %.3f" %
                        (g, s["rank"], s["pid"], s["host"], until, why, h, first_start[h]))
                    break
    for f in olders:
        bad("I1", "generation %s rank %s (pid %s on %s) started at %s while generation %s "
            "rank %s (pid %s) was still alive" % (f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8]))

    # I2: ranks once each, agreeing on WORLD_SIZE.
    sizes = job["sizes"]
    allowed = " or ".join(str(x) for x in sorted(sizes))
    gen_ws = {}  # generation -> its WORLD_SIZE (its first worker's, if allowed)
    for g in sorted(gens):
        seen = {}
        ss = sorted(gens[g], key=lambda s: s["t"])
        first_ws = ss[0]["ws"]
        n = int(first_ws) if first_ws.isdigit() and int(first_ws) in sizes else max(sizes)
        gen_ws[g] = n
        for s in ss:
            if not (s["ws"].isdigit() and int(s["ws"]) in sizes):
                bad("I2", "generation %d rank %d (pid %d on %s) has WORLD_SIZE %s, not %s" %
                    (g, s["rank"], s["pid"], s["host"], s["ws"], allowed))
            elif int(s["ws"]) != n:
                bad("I2", "generation %d rank %d (pid %d on %s) has WORLD_SIZE %s, but its "
                    "rank %d (pid %d on %s) had %s" % (g, s["rank"], s["pid"], s["host"], s["ws"],
                                                       ss[0]["rank"], ss[0]["pid"], ss[0]["host"],
                                                       first_ws))
            if not 0 <= s["rank"] < n:
                bad("I2", "generation %d has rank %d outside 0..%d (pid %d on %s)" %
                    (g, s["rank"], n - 1, s["pid"], s["host"]))
            if s["rank"] in seen:
                o = seen[s["rank"]]
                bad("I2", "generation %d ran rank %d twice: pid %d on %s at %.3f and pid %d on "
                    "%s at %.3f" % (g, s["rank"], o["pid"], o["host"], o["t"], s["pid"],
                                    s["host"], s["t"]))
            seen[s["rank"]] = s
    final = max(gens) if gens else None
    n = gen_ws[final] if gens else max(sizes)
    final_ranks = {s["rank"] for s in gens[final]} if gens else set()
    final_complete = final is not None and final_ranks == set(range(n))
    if final is None and not any(said[0] == 0 for said in unkept.values()):
        # (Daemons that could not even be started ran no job: exit 127.)
        bad("I2", "no worker of the job started, and no coordinator said that generation 0 "
            "could not be kept; the daemons exited %s" % ", ".join(
                "%s %s" % (name, ex["rc"]) for name, ex in sorted(exits.items())))

    # I3: nothing left.
    for f in after:
        if f[0] == "proc":
            bad("I3", "left on %s after the job: pid %s %s" % (f[1], f[2], " ".join(f[3:])))
        elif f[0] == "worker":
            bad("I3", "worker pid %s still alive after the job: %s" % (f[1], " ".join(f[2:])))
        elif f[0] == "port":
            bad("I3", "the coordinator's port %s/%s still bound on %s after the job" %
                (f[3], f[2], f[1]))

    # I4: per host, generations only increase.
    by_host = defaultdict(list)
    for s in starts:
        by_host[s["host"]].append(s)
    for host, ss in sorted(by_host.items()):
        ss.sort(key=lambda s: s["t"])
        for a, b in zip(ss, ss[1:]):
            if b["gen"] < a["gen"]:
                bad("I4", "on %s generation %d (rank %d, pid %d) started at %.3f after generation "
                    "%d (rank %d, pid %d) at %.3f" % (host, b["gen"], b["rank"], b["pid"], b["t"],
                                                      a["gen"], a["rank"], a["pid"], a["t"]))
                break

    # I4: a generation that could not be kept did not start.
    for name, (gen, line) in sorted(unkept.items()):
        dm = next(dm for dm in daemons if dm["name"] == name)
        if any(o["role"] == "coord" and o["t"] > dm["t"] for o in daemons):
            continue  # restarted: the next coordinator may start it
        late = sorted((s for s in starts if s["gen"] >= gen), key=lambda s: s["t"])
        if late:
            s = late[0]
            bad("I4", "%s said generation %d does not start (its state could not be kept), but "
                "generation %d rank %d started (pid %d on %s at %.3f)" %
                (name, gen, s["gen"], s["rank"], s["pid"], s["host"], s["t"]))

    # I5: the exit code matches what the workers did.
    final_ok = final_complete and all(
        ends.get(s["pid"], {}).get("code") == "0" for s in gens[final])
    last = {}
    for dm in sorted(daemons, key=lambda dm: dm["t"]):
        who = dm["host"] if dm["role"] == "coord" or dm["machine"] is None else \
            "the spare" if dm["machine"] == "spare" else "machine rank " + dm["machine"]
        last[(dm["role"], who)] = dm
    coords = [dm for k, dm in last.items() if k[0] == "coord"]
    lost_outcome = outcome_died_with_agent(d, coords, daemons, killed_at, gens.get(final, []),
                                           ends)
    for dm in coords:
        ex = exits.get(dm["name"])
        if ex is None:
            continue  # I6 reports it
        if dm["name"] in killed and ex["rc"] == 137:
            continue  # the nemesis killed it and did not replace it
        said = unkept.get(dm["name"])
        if said is not None:
            if ex["rc"] != 1:
                bad("I5", "%s said generation %d cannot be kept, but exited %d, not 1" %
                    (dm["name"], said[0], ex["rc"]))
            if not re.search(r"cannot write /\S+", said[1]):
                bad("I5", "%s did not name the file it could not write: %s" %
                    (dm["name"], said[1]))
            if final_ok and said[0] == final + 1 and ex["rc"] == 1:
                continue  # a restart a full disk kept from starting
        if final_ok and ex["rc"] == 1 and lost_outcome:
            continue  # the outcome died with the agent that was to read it
        if final_ok and ex["rc"] != 0:
            bad("I5", "every rank of the final generation %d exited 0, but the job (%s, pid %d) "
                "exited %d" % (final, dm["name"], dm["pid"], ex["rc"]))
        if not final_ok and ex["rc"] == 0:
            why = ("no generation started" if final is None else
                   "ranks %s of the final generation %d never started" %
                   (sorted(set(range(n)) - final_ranks), final) if not final_complete else
                   "final generation %d: %s" % (final, ", ".join(
                       "rank %d ended %s" % (s["rank"], ends.get(s["pid"], {}).get("code", "without a record"))
                       for s in sorted(gens[final], key=lambda s: s["rank"])
                       if ends.get(s["pid"], {}).get("code") != "0")))
            bad("I5", "the job (%s, pid %d) exited 0, but not every rank of its final generation "
                "exited 0: %s" % (dm["name"], dm["pid"], why))
    if not coords:
        bad("I5", "no coordinator was started")
    if final_ok and not lost_outcome:
        for k, dm in sorted(last.items()):
            ex = exits.get(dm["name"])
            if dm["name"] in killed and ex is not None and ex["rc"] == 137:
                continue  # killed after the job ended, not replaced
            if k[0] == "agent" and ex is not None and ex["rc"] != 0:
                bad("I5", "the job succeeded, but the last agent of %s (%s on %s, pid %d) "
                    "exited %d" % (k[1], dm["name"], dm["host"], dm["pid"], ex["rc"]))

    # I6: bounded.
    deadline = job["start"] + job["limit"]
    if job["end"] > deadline:
        bad("I6", "the job took %.1f s, over its limit of %.0f s" %
            (job["end"] - job["start"], job["limit"]))
    for f in hung:
        bad("I6", "daemon %s (pid %s) had not ended at the deadline; killed at %s" %
            (f[1], f[2], f[3]))
    for dm in daemons:
        ex = exits.get(dm["name"])
        if ex is None:
            if not any(f[1] == dm["name"] for f in hung):
                bad("I6", "daemon %s (pid %d) has no exit record" % (dm["name"], dm["pid"]))
        elif ex["t"] > deadline:
            bad("I6", "daemon %s (pid %d) ended %.1f s after the job's deadline" %
                (dm["name"], dm["pid"], ex["t"] - deadline))

    # I6: the events say what the workers' records say.
    try:
        with open(os.path.join(d, "events.json"), errors="replace") as f:
            evs = json.load(f).get("events", [])
    except (FileNotFoundError, ValueError, AttributeError):
        evs = []
    for ev in evs:
        if not isinstance(ev, dict) or ev.get("kind") != "generation":
            continue
        try:
            g = int(ev.get("generation", -1))
        except (TypeError, ValueError):
            continue
        m = re.search(r"world size (\d+)", str(ev.get("text", "")))
        if m is None or g not in gens:
            continue
        said, ran = int(m.group(1)), sorted({s["ws"] for s in gens[g]})
        if ran != [str(said)]:
            bad("I6", "the events say generation %d had world size %d (%s), but its workers "
                "were started with WORLD_SIZE %s" % (g, said, ev.get("text"), ", ".join(ran)))

    # I6: what ps --json said while the job ran is what the workers did.
    for inv, msg in ps_disagreements(d, starts, ends):
        bad(inv, msg)

    # I7: a worker told to stop had its time (to save a checkpoint), unless
    # its machine was cut off (the fence's bound, not the checkpoint's).
    cut_off = cut_off_generations(d, daemons)
    with_spare = any(dm["machine"] == "spare" for dm in daemons)
    for s in starts:
        st = stops.get(s["pid"])
        if st is None or s["pid"] in ends or s["pid"] not in gone:
            continue
        first_gone = gone[s["pid"]][1]
        if first_gone >= st["t"] + st["secs"]:
            continue
        # Its machine: the daemons on its host, and every daemon of their
        # machine ranks (a replacement elsewhere sweeps the machine's old
        # workers).
        here = [dm for dm in daemons if dm["host"] == s["host"]]
        machines = {dm["machine"] for dm in here if dm["machine"] is not None}
        names = {dm["name"] for dm in here} | {
            dm["name"] for dm in daemons if dm["machine"] in machines}
        if with_spare and machines - {"0"}:
            names |= {dm["name"] for dm in daemons if dm["role"] == "agent"}
        why = [(t, name, what) for name, t, what in events
               if name in names and s["t"] <= t <= first_gone + 0.5]
        why += [(s["t"], name, "cut off") for name in names
                if st["gen"] in cut_off.get(name, ())]
        if not why:
            bad("I7", "generation %d rank %d (pid %d on %s) was told to stop at %.3f and asked "
                "%.1f s to save its checkpoint, but was gone by %.3f without an end record; no "
                "daemon of its machine (%s) started, was killed, exited, hung or was cut off meanwhile" %
                (st["gen"], st["rank"], s["pid"], s["host"], st["t"], st["secs"], first_gone,
                 ", ".join(sorted(names)) or "none"))

    # I8: a cordoned host gets no ranks.
    for name, g, host in cordoned_generations(d, daemons):
        for s in gens.get(g, []):
            if s["host"] == host:
                bad("I8", "%s started generation %d while host %s was cordoned, but its rank %d "
                    "ran there (pid %d at %.3f)" % (name, g, host, s["rank"], s["pid"], s["t"]))

    summary = dict(gens=len(gens), final=final, final_ok=final_ok, starts=len(starts),
                   rc=[exits.get(dm["name"], {}).get("rc") for dm in coords])
    return violations, summary


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    failed = unreadable = 0
    for d in argv[1:]:
        r = check_job(d)
        if r is None:
            unreadable += 1
            continue
        violations, s = r
        verdict = "FAIL" if violations else "PASS"
        print("%s: %s: %d worker starts in %d generation(s), final generation %s %s, job exit "
              "%s; I1-I8 checked" % (verdict, d, s["starts"], s["gens"], s["final"],
                                     "all ranks exited 0" if s["final_ok"] else "did not all exit 0",
                                     s["rc"]))
        for inv, msg in violations:
            print("  VIOLATION %s: %s" % (inv, msg))
        failed += bool(violations)
    return 2 if unreadable else (1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

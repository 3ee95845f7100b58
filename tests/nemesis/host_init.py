#!/usr/bin/env python3
"""pid 1 of a nemesis test host's own PID namespace (one per host and job).

    host_init.py ROOTPROC PIDFILE

ROOTPROC is the machine's /proc, bound there before the host's own /proc was
mounted: its "self" names this process as the nemesis (outside the host)
sees it, which goes to PIDFILE; daemons are started in the host with
nsenter --target THAT_PID. Then it reaps what is orphaned to it until it is
killed (SIGKILL from outside, which ends every process of the host with it).
"""
import os
import sys
import time

rootproc, pidfile = sys.argv[1:3]
with open(pidfile + ".tmp", "w") as out:
    out.write(os.readlink(os.path.join(rootproc, "self")) + "\n")
os.rename(pidfile + ".tmp", pidfile)
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.1)

#!/usr/bin/env python3
"""A bad link between test hosts, in user space (the kernel here has no
sch_netem): for each LINK it opens two TAP devices (IFF_TAP | IFF_NO_PI) and
forwards Ethernet frames between them, dropping and delaying each direction
as its control file says. The caller moves one TAP of a link into each test
host (ip link set TAP netns NS) and gives them addresses of a subnet of
their own; processes on the hosts then talk over those addresses.

Usage: tap_relay.py --control DIR --ready FILE --stats FILE --parent PID
                    LINK=TAP_A,TAP_B...

  --control  a directory; the file DIR/LINK is read whenever it changes
             (write it elsewhere and rename it over): one line per
             direction,
               DIR loss P delay S
             DIR "ab" (frames TAP_A -> TAP_B) or "ba"; P the share of frames
             dropped (0..1; 1 is a silent partition: the links stay up,
             nothing arrives), S the seconds each frame is held. A
             direction without a line (or a link without a file) forwards
             everything at once; other lines are ignored.
  --ready    written once every TAP device exists
  --stats    rewritten every second and at the end: per link and
             direction "LINK DIR forwarded N dropped N delayed N"
  --parent   the relay exits when this process is gone (and gets SIGTERM
             when its own parent dies): it never outlives its test.
Frames keep their order within a direction; a queue holds at most 20000
frames per direction (more are dropped, as a full router queue would).
"""
import argparse
import collections
import ctypes
import errno
import fcntl
import os
import random
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
PR_SET_PDEATHSIG = 1
QUEUE_MAX = 20000


def open_tap(name):
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


class Direction:
    def __init__(self, link, name, src, dst):
        self.link, self.name, self.src, self.dst = link, name, src, dst
        self.loss = 0.0
        self.delay = 0.0
        self.queue = collections.deque()  # (release time, frame)
        self.forwarded = self.dropped = self.delayed = 0

    def receive(self, frame, now):
        if self.loss > 0 and random.random() < self.loss:
            self.dropped += 1
            return
        if len(self.queue) >= QUEUE_MAX:
            self.dropped += 1
            return
        release = now + self.delay
        if self.queue and self.queue[-1][0] > release:
            release = self.queue[-1][0]  # never overtake an earlier frame
        if self.delay > 0:
            self.delayed += 1
        self.queue.append((release, frame))

    def send_due(self, now):
        while self.queue and self.queue[0][0] <= now:
            _, frame = self.queue.popleft()
            try:
                os.write(self.dst, frame)
                self.forwarded += 1
            except OSError:  # the TAP is down (a partition), or its queue full
                self.dropped += 1

    def next_release(self):
        return self.queue[0][0] if self.queue else None


def read_control(path, directions):
    settings = {}
    try:
        with open(path) as f:
            for line in f:
                w = line.split()
                if len(w) == 5 and w[1] == "loss" and w[3] == "delay":
                    settings[w[0]] = (min(1.0, max(0.0, float(w[2]))), max(0.0, float(w[4])))
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as e:
        print("tap_relay: control file %s: %s" % (path, e), file=sys.stderr)
        return
    for d in directions:
        d.loss, d.delay = settings.get(d.name, (0.0, 0.0))


def write_stats(path, directions):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for d in directions:
            f.write("%s %s forwarded %d dropped %d delayed %d\n" %
                    (d.link, d.name, d.forwarded, d.dropped, d.delayed))
    os.rename(tmp, path)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--control", required=True)
    p.add_argument("--ready", required=True)
    p.add_argument("--stats", required=True)
    p.add_argument("--parent", type=int, required=True)
    p.add_argument("links", nargs="+")
    a = p.parse_args()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # the parent check below still ends it
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))

    directions, by_fd, links = [], {}, []
    for spec in a.links:
        name, _, taps = spec.partition("=")
        tap_a, _, tap_b = taps.partition(",")
        fa, fb = open_tap(tap_a), open_tap(tap_b)
        links.append((name, []))
        for d in (Direction(name, "ab", fa, fb), Direction(name, "ba", fb, fa)):
            directions.append(d)
            links[-1][1].append(d)
            by_fd[d.src] = d
    with open(a.ready, "w") as f:
        f.write("ready %d\n" % os.getpid())

    mtimes = {}
    next_housekeeping = 0.0
    next_stats = 0.0
    while not stop:
        now = time.monotonic()
        if now >= next_housekeeping:
            next_housekeeping = now + 0.05
            try:
                os.kill(a.parent, 0)
            except ProcessLookupError:
                break
            for name, dirs in links:
                path = os.path.join(a.control, name)
                try:
                    st = os.stat(path)
                    m = (st.st_ino, st.st_mtime_ns, st.st_size)
                except FileNotFoundError:
                    m = None
                if m != mtimes.get(name, 0):
                    mtimes[name] = m
                    read_control(path, dirs)
            if now >= next_stats:
                next_stats = now + 1.0
                write_stats(a.stats, directions)
        timeout = next_housekeeping - now
        for d in directions:
            r = d.next_release()
            if r is not None:
                timeout = min(timeout, r - now)
        try:
            readable, _, _ = select.select(list(by_fd), [], [], max(0.0, timeout))
        except InterruptedError:
            continue
        now = time.monotonic()
        for fd in readable:
            d = by_fd[fd]
            for _ in range(256):
                try:
                    frame = os.read(fd, 65536)
                except BlockingIOError:
                    break
                except OSError as e:
                    if e.errno in (errno.EIO, errno.EBADFD):  # down
                        break
                    raise
                if not frame:
                    break
                d.receive(frame, now)
        for d in directions:
            d.send_due(now)
    write_stats(a.stats, directions)


if __name__ == "__main__":
    main()

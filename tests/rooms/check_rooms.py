#!/usr/bin/env python3
"""The rooms of both daemons keep their order, and their pure parts stay pure.

  check_rooms.py SOURCE_DIR [CXX]

1. Each room of coordinator/ includes only the rooms below it (ROOMS), and
   common/ and agent/ include no room at all.
2. Each room of agent/ includes only the rooms below it (AGENT_ROOMS);
   common/ and the coordinator's rooms include nothing of agent/ (only
   coord_main.cc, which runs machine 0's agent, does).
3. agent/core/ reads no clock, starts no thread, takes no lock, does no
   I/O and includes no gRPC: the agent's decisions, driven by its edge.
4. coordinator/job/ is pure: what its sources pull in, read from the
   compiler's own list of headers (-H), holds no gRPC, protobuf, spdlog,
   socket, thread, lock or stream header and no project header but its own
   and common/rank_layout.h; and its sources read no clock, start no thread
   and take no lock (a read of `now` must come in as an argument).

Exits 1 naming every file and line that breaks a rule; prints one line per
rule that holds.
"""
import os
import re
import subprocess
import sys

# A room -> the rooms it may include (docs/coordinator-rooms.md).
ROOMS = {
    'job': set(),
    'record': {'job'},
    'status': {'job'},
    'access': set(),
    'owner': {'job', 'record', 'status', 'access'},
    'rendezvous': {'job', 'record', 'status', 'access', 'owner'},
    'ports': {'job', 'record', 'status', 'access', 'owner'},
    'cli': {'job', 'record', 'status'},
}

# An agent room -> the agent rooms it may include (docs/agent-rooms.md).
AGENT_ROOMS = {
    'core': set(),
    'console': set(),
    'procfs': set(),
    'link': set(),
    'health': set(),
    'workers': {'console', 'core', 'procfs'},
    'cleanup': {'workers', 'console', 'procfs'},
    'session': {'core', 'console', 'procfs', 'link', 'health', 'workers',
                'cleanup'},
}

FORBIDDEN_HEADERS = [
    (r'/grpc(pp)?/|/grpc\+\+/', 'gRPC'),
    (r'/google/protobuf/', 'protobuf'),
    (r'/spdlog/|/fmt/', 'spdlog'),
    (r'/sys/socket\.h$|/netinet/|/arpa/|/netdb\.h$|/sys/epoll\.h$|/poll\.h$|/linux/netlink\.h$',
     'a socket'),
    (r'/c\+\+/\d+/(thread|mutex|shared_mutex|condition_variable|future|stop_token)$',
     'a thread or a lock'),
    (r'/c\+\+/\d+/fstream$', 'a file stream'),
]
FORBIDDEN_CODE = [
    (r'_clock::now\b|\babsl::Now\b|\bclock_gettime\b|\bgettimeofday\b|\btime\(\s*(nullptr|NULL|0)\s*\)',
     'reads a clock'),
    (r'\bstd::(thread|jthread|async)\b|\bpthread_create\b', 'starts a thread'),
    (r'\bstd::(mutex|shared_mutex|condition_variable|lock_guard|unique_lock)\b|\babsl::(Mutex|CondVar|MutexLock)\b',
     'takes a lock'),
    (r'#include\s+"absl/(synchronization|time/clock)', 'includes absl\'s locks or clock'),
    (r'\bstd::(cout|cerr|clog|ofstream|ifstream|fstream)\b|\b(fopen|open|printf|fprintf|write)\s*\(',
     'does I/O'),
    (r'\b(sleep|usleep|nanosleep)\s*\(|\bsleep_for\b', 'sleeps'),
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"(coordinator/([a-z_]+)/[^"]+)"', re.M)
AGENT_INCLUDE = re.compile(r'^\s*#\s*include\s+"(agent/(?:([a-z_]+)/)?[^"/]+)"', re.M)
GRPC_INCLUDE = re.compile(r'^\s*#\s*include\s+[<"](grpc(pp)?/[^">]+|[^">]*\.grpc\.pb\.h)[">]', re.M)


def sources(root, folder):
    out = []
    for dirpath, _, names in os.walk(os.path.join(root, folder)):
        out += [os.path.join(dirpath, n) for n in sorted(names)
                if n.endswith(('.h', '.cc'))]
    return sorted(out)


def check_rooms_of(root, daemon, rooms, include, name):
    """Each room of DAEMON/ includes only the rooms it may (`rooms`), and
    DAEMON/ has no folder that is no room."""
    faults = []
    for room, allowed in rooms.items():
        for path in sources(root, f'{daemon}/{room}'):
            for m in include.finditer(open(path, encoding='utf-8').read()):
                other = m.group(2)
                if other == room:
                    continue
                if other not in rooms:
                    faults.append(f'{rel(root, path)}: includes {m.group(1)}, '
                                  f'in no room of {daemon}/ (rooms: {", ".join(rooms)})')
                elif other not in allowed:
                    faults.append(f'{rel(root, path)}: the {room} room of {daemon}/ '
                                  f'includes {m.group(1)}; {room} may include only '
                                  f'{", ".join(sorted(allowed)) or "no other room"}')
    for folder in os.listdir(os.path.join(root, daemon)):
        if os.path.isdir(os.path.join(root, daemon, folder)) and folder not in rooms:
            faults.append(f'{daemon}/{folder}/: a folder that is no room of {name}')
    return faults


def includes_none(root, folders, include):
    """The sources of `folders` include nothing that `include` matches."""
    return [f'{rel(root, path)}: {folder}/ includes {m.group(1)}'
            for folder in folders for path in sources(root, folder)
            for m in include.finditer(open(path, encoding='utf-8').read())]


def check_order(root):
    return (check_rooms_of(root, 'coordinator', ROOMS, INCLUDE, 'ROOMS')
            + includes_none(root, ('common', 'agent'), INCLUDE))


def check_agent_order(root):
    return (check_rooms_of(root, 'agent', AGENT_ROOMS, AGENT_INCLUDE, 'AGENT_ROOMS')
            + includes_none(root, ['common'] + ['coordinator/' + r for r in ROOMS],
                            AGENT_INCLUDE))


def check_pure_agent_core(root):
    faults = []
    for path in sources(root, 'agent/core'):
        text = open(path, encoding='utf-8').read()
        code = re.sub(r'//[^\n]*', '', text)
        for pattern, what in FORBIDDEN_CODE + [(GRPC_INCLUDE.pattern, 'includes gRPC')]:
            for m in re.finditer(pattern, code, re.M):
                line = code.count('\n', 0, m.start()) + 1
                faults.append(f'{rel(root, path)}:{line}: the agent\'s core {what} '
                              f'({m.group(0).strip()})')
    return faults


def check_pure_job(root, cxx):
    faults = []
    for path in sources(root, 'coordinator/job'):
        text = open(path, encoding='utf-8').read()
        code = re.sub(r'//[^\n]*', '', text)
        for pattern, what in FORBIDDEN_CODE:
            for m in re.finditer(pattern, code):
                line = code.count('\n', 0, m.start()) + 1
                faults.append(f'{rel(root, path)}:{line}: the pure job library {what} '
                              f'({m.group(0).strip()})')
        if not path.endswith('.cc'):
            continue
        run = subprocess.run([cxx, '-std=c++17', '-fsyntax-only', '-H', '-I', root, path],
                             capture_output=True, text=True)
        if run.returncode != 0:
            faults.append(f'{rel(root, path)}: does not compile alone: {run.stderr[:400]}')
            continue
        chain, said = [], set()
        for line in run.stderr.splitlines():
            m = re.match(r'^(\.+) (\S+)$', line)
            if not m:
                continue
            depth, header = len(m.group(1)), os.path.normpath(m.group(2))
            chain = chain[:depth - 1] + [header]
            project = os.path.abspath(header).startswith(os.path.abspath(root) + os.sep)
            if project:
                r = rel(root, header)
                if not (r.startswith('coordinator/job/') or r == 'common/rank_layout.h') \
                        and 'project' not in said:
                    said.add('project')
                    faults.append(f'{rel(root, path)}: pulls in {r} '
                                  f'(through {" -> ".join(rel(root, c) for c in chain)})')
                continue
            for pattern, what in FORBIDDEN_HEADERS:
                if re.search(pattern, header) and what not in said:
                    said.add(what)  # the first way in, not every header after it
                    faults.append(f'{rel(root, path)}: pulls in {what}: {header} '
                                  f'(through {" -> ".join(rel(root, c) for c in chain)})')
    return faults


def rel(root, path):
    p = os.path.abspath(path)
    r = os.path.abspath(root) + os.sep
    return p[len(r):] if p.startswith(r) else path


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else '.'
    cxx = sys.argv[2] if len(sys.argv) > 2 else 'c++'
    order, pure = check_order(root), check_pure_job(root, cxx)
    agent_order, agent_core = check_agent_order(root), check_pure_agent_core(root)
    for f in order + agent_order + agent_core + pure:
        print('FAIL:', f)
    if not order:
        print('ok: every room of coordinator/ includes only the rooms below it')
    if not agent_order:
        print('ok: every room of agent/ includes only the rooms below it')
    if not agent_core:
        print(f'ok: agent/core has no clock, thread, lock, I/O or gRPC '
              f'({len(sources(root, "agent/core"))} files)')
    if not pure:
        print(f'ok: coordinator/job is pure ({len(sources(root, "coordinator/job"))} files)')
    return 1 if order or pure or agent_order or agent_core else 0


if __name__ == '__main__':
    sys.exit(main())

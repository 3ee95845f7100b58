"""The worker of bench/elastic_replace.sh, the same under trl-launch and
torchrun: joins a Gloo process group (timeout --pg_timeout), all-reduces
once so that every rank is known to be there, writes a start marker
(time, generation, rank, world size, host) to MARKS, then all-reduces every
0.05 s, so that a lost peer makes the survivors' collectives fail, until
rank 0 sees MARKS/done; then every rank exits 0. Before it imports torch
it writes a birth marker (born.HOST.PID: the time), for the overlap of a
lost machine's workers with the next generation's."""
import time

BORN = time.time()

import argparse  # noqa: E402
import datetime  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402


def write_birth():
    marks = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    if marks and os.path.isdir(marks):
        name = os.path.join(marks,
                            f"born.{socket.gethostname()}.{os.getpid()}")
        with open(name, "w") as f:
            f.write(f"{BORN:.6f}\n")


write_birth()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("marks")
    parser.add_argument("--pg_timeout", type=float, default=10.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", timeout=datetime.timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    gen = os.environ.get("TRL_GENERATION",
                         os.environ.get("TORCHELASTIC_RESTART_COUNT", "?"))
    tensor = torch.ones(1)
    dist.all_reduce(tensor)
    started = time.time()
    host = socket.gethostname()
    name = os.path.join(args.marks, f"start.{host}.{os.getpid()}")
    with open(name + ".tmp", "w") as f:
        f.write(f"{started:.6f} {gen} {rank} {world} {host}\n")
    os.replace(name + ".tmp", name)
    done = os.path.join(args.marks, "done")
    while True:
        # Rank 0 alone looks for `done` and tells the others in the same
        # all-reduce, so that every rank stops after the same collective.
        flags = torch.tensor([1.0, float(rank == 0 and os.path.exists(done))])
        dist.all_reduce(flags)
        if flags[1].item() > 0:
            break
        time.sleep(0.05)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

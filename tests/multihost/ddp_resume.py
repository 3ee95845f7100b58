"""Data-parallel PyTorch training (Gloo, CPU) that checkpoints and resumes,
for the multi-host tests of elastic membership, spares and cordoning.

A tiny MLP learns a fixed teacher function. Step s trains on a global batch
of --global_batch samples drawn from a generator seeded by (--seed, s), so
the data of every step is the same whatever the world size and however
often the job was interrupted; rank r of W takes samples
[r*B/W, (r+1)*B/W). Rank 0 saves a checkpoint (model, optimizer, step)
every --save_every steps to --ckpt_dir, a directory all hosts share:
written to a temporary file, fsynced, renamed, so a worker killed at any
point leaves either the old or the new checkpoint, never half of one. On
start every rank loads the newest readable checkpoint, so a generation
that was stopped anywhere goes on from the last one saved (the steps after
it are redone with the same data). After --steps steps rank 0 writes the
final weights' SHA-256 and sum to --result (atomically).

--mode exact (default): each rank computes one gradient per sample (a
batch of one each), the ranks all-gather them, and every rank adds the B
gradients in global sample order, one after the other. The arithmetic is
then the same whatever the world size: the final weights are bit-identical
for 4 or 6 ranks, interrupted or not.
--mode ddp: torch.nn.parallel.DistributedDataParallel (bucketed gradient
all-reduce, averaged); the result depends on the world size by float
summation order only (compare to a tolerance), and is bit-identical for
the same world size.

Each rank prints one line as it starts:
  ddp_resume start gen G rank R/W machine M host H resume_step S
and rank 0 prints "ddp_resume done steps N sha256 H sum S" at the end.
"""
import argparse
import datetime
import glob
import hashlib
import os
import socket
import sys
import time

import torch
import torch.distributed as dist

IN, HIDDEN, OUT = 8, 16, 2


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, OUT))


def batch(seed, step, size):
    """The global batch of `step`: the same on every rank and in every run."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    x = torch.randn(size, IN, generator=g)
    teacher = torch.Generator().manual_seed(seed + 7)
    w = torch.randn(IN, OUT, generator=teacher)
    y = torch.sin(x @ w) + 0.1 * x[:, :OUT]
    return x, y


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path, write):
    """write(file) into a temporary file beside path, fsync, rename."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".tmp-{os.path.basename(path)}-{os.getpid()}")
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(directory)


def checkpoints(ckpt_dir):
    """(step, path) of the checkpoints in ckpt_dir, newest first."""
    found = []
    for path in glob.glob(os.path.join(ckpt_dir, "step-*.pt")):
        try:
            found.append((int(os.path.basename(path)[5:-3]), path))
        except ValueError:
            pass
    return sorted(found, reverse=True)


def load_newest(ckpt_dir):
    for step, path in checkpoints(ckpt_dir):
        try:
            state = torch.load(path)
        except Exception as error:  # unreadable: the one before it
            print(f"ddp_resume: skipping unreadable checkpoint {path}: {error}",
                  file=sys.stderr, flush=True)
            continue
        if state.get("step") == step:
            return state
    return None


def save(ckpt_dir, step, model, optimizer, mode, keep=3):
    state = {"step": step, "mode": mode, "model": model.state_dict(),
             "optimizer": optimizer.state_dict()}
    write_atomically(os.path.join(ckpt_dir, f"step-{step:08d}.pt"),
                     lambda f: torch.save(state, f))
    for _, old in checkpoints(ckpt_dir)[keep:]:
        try:
            os.unlink(old)
        except FileNotFoundError:
            pass


def weights_digest(model):
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()
    return digest, float(flat.double().sum())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt_dir", required=True)
    parser.add_argument("--result", required=True)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--global_batch", type=int, default=24)
    parser.add_argument("--save_every", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--step_sleep", type=float, default=0.0,
                        help="seconds of pretend compute per step")
    parser.add_argument("--pg_timeout", type=float, default=30.0,
                        help="process group (Gloo) timeout, seconds")
    parser.add_argument("--mode", choices=["exact", "ddp"], default="exact")
    parser.add_argument("--marker_dir", default="",
                        help="each rank writes a start marker here")
    args = parser.parse_args()

    torch.set_num_threads(1)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    gen = os.environ.get("TRL_GENERATION",
                         os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    machine = os.environ.get("TRL_MACHINE_RANK", os.environ.get("GROUP_RANK", "?"))
    host = socket.gethostname()
    if args.global_batch % world:
        print(f"ddp_resume: global batch {args.global_batch} is not divisible by "
              f"world size {world}", file=sys.stderr)
        return 2
    if "MASTER_ADDR" not in os.environ:  # alone: a job of one
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29599",
                          RANK="0", WORLD_SIZE="1")
    dist.init_process_group(
        "gloo", timeout=datetime.timedelta(seconds=args.pg_timeout))

    os.makedirs(args.ckpt_dir, exist_ok=True)
    model = make_model(args.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    state = load_newest(args.ckpt_dir)
    start = 0
    if state is not None:
        if state["mode"] != args.mode:
            print(f"ddp_resume: checkpoint of mode {state['mode']}, not {args.mode}",
                  file=sys.stderr)
            return 2
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
    # Every rank has read its checkpoint before rank 0 may write the next.
    dist.barrier()
    print(f"ddp_resume start gen {gen} rank {rank}/{world} machine {machine} "
          f"host {host} resume_step {start}", flush=True)
    if args.marker_dir:
        with open(os.path.join(args.marker_dir,
                               f"start.{gen}.{rank}.{host}.{os.getpid()}"), "w") as f:
            f.write(f"{time.time():.6f} gen {gen} rank {rank} world {world} "
                    f"host {host} resume_step {start}\n")

    per_rank = args.global_batch // world
    lo, hi = rank * per_rank, (rank + 1) * per_rank
    loss_fn = torch.nn.MSELoss()
    params = list(model.parameters())
    ddp = None
    if args.mode == "ddp":
        ddp = torch.nn.parallel.DistributedDataParallel(model)

    for step in range(start, args.steps):
        x, y = batch(args.seed, step, args.global_batch)
        optimizer.zero_grad(set_to_none=False)
        if ddp is not None:
            loss = loss_fn(ddp(x[lo:hi]), y[lo:hi])
            loss.backward()  # DDP averages the gradients over the ranks
        else:
            local = []
            for i in range(lo, hi):
                model.zero_grad(set_to_none=False)
                loss_fn(model(x[i:i + 1]), y[i:i + 1]).backward()
                local.append(torch.cat([p.grad.reshape(-1) for p in params]))
            local = torch.stack(local)
            gathered = [torch.empty_like(local) for _ in range(world)]
            dist.all_gather(gathered, local)
            every = torch.cat(gathered)  # global sample order
            total = torch.zeros_like(every[0])
            for k in range(args.global_batch):
                total += every[k]
            total /= args.global_batch
            offset = 0
            for p in params:
                n = p.numel()
                p.grad.copy_(total[offset:offset + n].view_as(p))
                offset += n
        optimizer.step()
        if args.step_sleep:
            time.sleep(args.step_sleep)
        done = step + 1
        if rank == 0 and (done % args.save_every == 0 or done == args.steps):
            save(args.ckpt_dir, done, model, optimizer, args.mode)

    dist.barrier()
    if rank == 0:
        digest, total = weights_digest(model)
        line = f"steps {args.steps} sha256 {digest} sum {total!r}\n"
        write_atomically(args.result, lambda f: f.write(line.encode()))
        print(f"ddp_resume done {line}", end="", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

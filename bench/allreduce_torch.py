"""The reference for bench/allreduce_gloo.sh: the same all-reduce as
trl-allreduce-bench (same size, warm-up, iterations and check), through
torch.distributed with Gloo, under torchrun."""
import argparse
import time

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--floats", type=int, default=8706)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    expected = world * (world + 1) / 2
    buffer = torch.empty(args.floats, dtype=torch.float32)
    micros = []
    for i in range(args.warmup + args.iterations):
        buffer.fill_(rank + 1.0)
        start = time.perf_counter()
        dist.all_reduce(buffer)
        elapsed = time.perf_counter() - start
        if buffer[0].item() != expected or buffer[-1].item() != expected:
            raise SystemExit(f"wrong sum {buffer[0].item()} (want {expected})")
        if i >= args.warmup:
            micros.append(elapsed * 1e6)
    if rank == 0:
        micros.sort()
        median = micros[len(micros) // 2]
        print(f"RESULT allreduce impl=torchrun/gloo world={world} "
              f"floats={args.floats} iterations={args.iterations} "
              f"median_us={median:.1f} min_us={micros[0]:.1f} "
              f"max_us={micros[-1]:.1f} "
              f"algbw_MBps={args.floats * 4 / median:.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

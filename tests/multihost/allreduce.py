"""A real PyTorch client of the worker contract: Gloo rendezvous through
MASTER_ADDR/MASTER_PORT (env://), then an all-reduce every rank checks."""
import os
import socket
import sys

import torch
import torch.distributed as dist


def main() -> int:
    expected_master = sys.argv[1]
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    if os.environ["MASTER_ADDR"] != expected_master:
        print(f"wrong MASTER_ADDR {os.environ['MASTER_ADDR']}, want {expected_master}")
        return 3
    dist.init_process_group("gloo")
    assert dist.get_rank() == rank and dist.get_world_size() == world
    tensor = torch.tensor([float(rank + 1)])
    dist.all_reduce(tensor)
    want = world * (world + 1) / 2
    ok = tensor.item() == want
    print(f"allreduce {'ok' if ok else 'WRONG'}: rank {rank}/{world} on "
          f"{socket.gethostname()} got {tensor.item()} want {want} "
          f"(restart count {os.environ['TORCHELASTIC_RESTART_COUNT']}, "
          f"iface {os.environ['GLOO_SOCKET_IFNAME']})")
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok else 4


if __name__ == "__main__":
    sys.exit(main())

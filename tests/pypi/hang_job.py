# A Gloo job whose rank 1 sleeps before its all-reduce in generation 0
# (tests/pypi/hang_stacks.sh): nothing in it tells trl-launch it hangs.
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1 and os.environ["TRL_GENERATION"] == "0":
    time.sleep(600)  # the hang: rank 0 waits in the all-reduce below
t = torch.ones(4)
dist.all_reduce(t)
print(f"rank {dist.get_rank()}: sum {t[0].item():g}", flush=True)
dist.destroy_process_group()

# A Gloo job over two machines whose rank 3 (machine 1's second rank)
# sleeps before its all-reduce in generation 0
# (tests/pypi/two_hosts_hang.sh): nothing in it tells trl-launch it hangs.
import os
import socket
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 3 and os.environ["TRL_GENERATION"] == "0":
    time.sleep(600)  # the hang: ranks 0-2 wait in the all-reduce below
t = torch.ones(4)
dist.all_reduce(t)
print(f"rank {dist.get_rank()}: sum {t[0].item():g} on {socket.gethostname()}"
      f" with {sys.prefix}", flush=True)
dist.destroy_process_group()

#!/usr/bin/env python3
"""Compares a job run under `accelerate launch` with the same job under trl-launch.

Usage: compare_runs.py CONFIG ACCELERATE_DIR TRL_DIR [--world N] [--environment_only]

Each directory holds what tests/pypi/sft_job.py wrote: rank-R.json for every
rank (its environment, what Accelerate made of it, its losses) and rank 0's
weights.safetensors. For every rank:
- the environments must be the same, variable by variable, apart from the
  deliberate differences listed in DELIBERATE (README, "What a worker
  sees"): a variable set by one launcher and not the other, or set to
  another value, fails the comparison with its name and both values;
- Accelerate's view (distributed type, process indices, backend, device,
  precision, DeepSpeed stage) must be the same;
- the losses must be the same, bit for bit;
and the final weights must be the same tensors, bit for bit.
Prints each check's figure; exits 1 on the first rank or tensor that
differs, after naming every difference.
"""

import argparse
import json
import os
import sys

from safetensors.torch import load_file

# Variables that differ on purpose, each with the reason. A name ending in
# "*" is a prefix.
DELIBERATE = {
    "MASTER_PORT": "a fresh port on machine 0 for each generation; "
                   "main_process_port is the coordinator's",
    "TORCHELASTIC_RUN_ID": "the job's id (torchrun's static rendezvous says 'none')",
    "TORCHELASTIC_ERROR_FILE": "a path in each launcher's own run directory",
    "TORCHELASTIC_USE_AGENT_STORE": "no agent hosts a TCPStore: rank 0 starts it "
                                    "on MASTER_PORT (torchrun's agent does)",
    "GLOO_SOCKET_IFNAME": "the interface of the machine's advertised address",
    "NCCL_SOCKET_IFNAME": "the interface of the machine's advertised address",
    "TRL_*": "trl-launch's own variables (job, generation, store, heartbeat)",
    # PyTorch's NCCL flight recorder, on with its dump and pipe in the run
    # directory (README, "When something fails"): the old and new names.
    "TORCH_FR_BUFFER_SIZE": "the flight recorder's trace buffer",
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "the flight recorder's trace buffer (older name)",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "the flight recorder dumps on a watchdog timeout",
    "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": "the pipe that asks for a dump before a stop",
    "TORCH_FR_DUMP_TEMP_FILE": "the dump's path in the run directory",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "the dump's path (older name)",
}


def deliberate(name):
    for key in DELIBERATE:
        if name == key or (key.endswith("*") and name.startswith(key[:-1])):
            return True
    return False


def load_rank(directory, rank):
    path = os.path.join(directory, f"rank-{rank}.json")
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def compare_environments(rank, accelerate, trl):
    problems = []
    for name in sorted(set(accelerate) | set(trl)):
        if deliberate(name):
            continue
        if accelerate.get(name) != trl.get(name):
            problems.append(f"rank {rank}: {name}: accelerate launch gives "
                            f"{accelerate.get(name)!r}, trl-launch {trl.get(name)!r}")
    return problems


def compare_weights(accelerate_dir, trl_dir):
    reference = load_file(os.path.join(accelerate_dir, "weights.safetensors"))
    ours = load_file(os.path.join(trl_dir, "weights.safetensors"))
    if set(reference) != set(ours):
        return [f"weights: tensors {sorted(set(reference) ^ set(ours))} are in one run only"], 0, 0.0
    problems, worst = [], 0.0
    for name, tensor in reference.items():
        if tensor.shape != ours[name].shape:
            problems.append(f"weights: {name}: shape {tuple(tensor.shape)} vs {tuple(ours[name].shape)}")
            continue
        difference = (tensor - ours[name]).abs().max().item()
        worst = max(worst, difference)
        if difference != 0:
            problems.append(f"weights: {name} differs by up to {difference:.3g}")
    return problems, len(reference), worst


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("accelerate_dir")
    parser.add_argument("trl_dir")
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--environment_only", action="store_true",
                        help="the runs wrote their environments only")
    args = parser.parse_args()

    problems = []
    variables = 0
    for rank in range(args.world):
        accelerate = load_rank(args.accelerate_dir, rank)
        trl = load_rank(args.trl_dir, rank)
        variables += len(accelerate["environment"])
        problems += compare_environments(rank, accelerate["environment"], trl["environment"])
        if args.environment_only:
            continue
        if accelerate["accelerate"] != trl["accelerate"]:
            problems.append(f"rank {rank}: Accelerate's state: {accelerate['accelerate']} "
                            f"vs {trl['accelerate']}")
        if not accelerate["losses"] or accelerate["losses"] != trl["losses"]:
            problems.append(f"rank {rank}: losses {accelerate['losses']} vs {trl['losses']}")
        if rank == 0:
            print(f"{args.config}: Accelerate's state on rank 0: {accelerate['accelerate']}")
            print(f"{args.config}: losses on rank 0: {accelerate['losses']}")
    print(f"{args.config}: {variables} variables compared over {args.world} ranks "
          f"(deliberate differences left out: {', '.join(sorted(DELIBERATE))})")

    if not args.environment_only:
        weight_problems, tensors, worst = compare_weights(args.accelerate_dir, args.trl_dir)
        problems += weight_problems
        print(f"{args.config}: {tensors} weight tensors compared, largest difference {worst:.3g}")

    for problem in problems:
        print(f"FAIL: {args.config}: {problem}")
    if problems:
        sys.exit(1)
    if args.environment_only:
        print(f"{args.config}: the workers' environments are the same")
    else:
        print(f"{args.config}: environments, Accelerate's state, losses and weights are the same")


if __name__ == "__main__":
    main()

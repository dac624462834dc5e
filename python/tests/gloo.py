"""Runs a test body on a gloo process group of CPU processes: spawn(fn,
world, *args) calls fn(rank, world, *args) in `world` processes (rank r of a
fresh gloo group, one thread each) and returns their JSON results by rank.
fn must be a module-level function (the processes import it)."""
import json
import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, world, port, outdir, fn, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    try:
        res = fn(rank, world, *args)
    finally:
        dist.destroy_process_group()
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)


def spawn(fn, world, *args):
    if dist.is_initialized():
        dist.destroy_process_group()
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(_entry, args=(world, _free_port(), d, fn, args), nprocs=world)
        out = []
        for r in range(world):
            with open(os.path.join(d, f"rank{r}.json")) as f:
                out.append(json.load(f))
        return out

#!/usr/bin/env python3
"""measure_h200.py: measurements that check the cost model (estimate/) on GPUs.

Run on a machine with 2 GPUs (NVLink), one process per GPU:

    torchrun --standalone --nproc_per_node=2 measure_h200.py --out OUT.json

Measures, each op alone, CUDA-event timed, median of repeats:
  - NCCL all_gather, reduce_scatter, all_reduce, all_to_all, broadcast and a
    send/recv pair (both ranks send and receive) over the 2 ranks, 64 KiB to
    1 GiB per shard;
  - bf16 / fp32 GEMMs and a bmm at shapes the calibration data
    (tests/data/limits-h200x2.json) does not have;
  - SDPA forward and backward with the flash, efficient and cuDNN backends;
  - interference: a chain of GEMMs beside an all_gather, with the
    all_gather's own duration (so comm and compute slowdowns are both seen).
Rank 0 writes one JSON file. Sizes follow the cost model's conventions
(docs/profile-format.md): all_gather `bytes` is the output, reduce_scatter's
the input, the others the tensor.
"""
import argparse
import json
import os
import statistics
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.nn.functional as F

MiB = 1 << 20


def timed(fn, iters, warmup=3, stream=None, reps=5):
    """Time in us of one fn(): @iters calls back to back between two events
    (as nccl-tests and triton's do_bench time them: the GPU never waits for
    the CPU between calls), median over @reps such batches."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record(stream)
        for _ in range(iters):
            fn()
        e.record(stream)
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) * 1000.0 / iters)
    return statistics.median(out)


def timed_sync(fn, iters, warmup=3):
    """Median time in us of one fn() with the GPU idle before it (includes
    the CPU's launch latency: what an isolated op costs)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) * 1000.0)
    return statistics.median(out)


def iters_for(nbytes):
    return 20 if nbytes <= 64 * MiB else 4


def collectives(rank, world):
    rows = []
    peer = 1 - rank
    for shard in [64 << 10, 256 << 10, 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, 1024 * MiB]:
        n = shard // 2  # bf16 elements
        x = torch.ones(n, dtype=torch.bfloat16, device="cuda")
        big = torch.empty(n * world, dtype=torch.bfloat16, device="cuda")
        it = iters_for(shard)
        dist.barrier()
        r = {"shard_bytes": shard}
        r["all_gather_us"] = timed(lambda: dist.all_gather_into_tensor(big, x), it)
        r["reduce_scatter_us"] = timed(lambda: dist.reduce_scatter_tensor(x, big), it)
        r["all_reduce_us"] = timed(lambda: dist.all_reduce(x), it)
        a2a_out = torch.empty_like(x)
        r["all_to_all_us"] = timed(lambda: dist.all_to_all_single(a2a_out, x), it)
        r["broadcast_us"] = timed(lambda: dist.broadcast(x, src=0), it)
        recv = torch.empty_like(x)

        def pair():
            ops = [dist.P2POp(dist.isend, x, peer), dist.P2POp(dist.irecv, recv, peer)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()

        r["sendrecv_us"] = timed(pair, it)
        rows.append(r)
        del x, big, a2a_out, recv
        torch.cuda.empty_cache()
    return rows


def gemms():
    rows = []
    shapes = [
        ("mm", torch.bfloat16, 1, 512, 512, 512),
        ("mm", torch.bfloat16, 1, 1024, 1024, 1024),
        ("mm", torch.bfloat16, 1, 4096, 4096, 4096),
        ("mm", torch.bfloat16, 1, 8192, 8192, 8192),
        ("mm", torch.bfloat16, 1, 2048, 2048, 2048),
        ("mm", torch.bfloat16, 1, 1024, 4096, 4096),
        ("mm", torch.bfloat16, 1, 4096, 1024, 4096),
        ("mm", torch.bfloat16, 1, 2048, 1024, 2816),
        ("mm", torch.bfloat16, 1, 2048, 2816, 1024),
        ("mm", torch.bfloat16, 1, 8192, 1024, 8192),
        ("mm", torch.bfloat16, 1, 16384, 16384, 16384),
        ("mm", torch.bfloat16, 1, 256, 4096, 4096),
        ("mm", torch.float32, 1, 4096, 4096, 4096),
        ("bmm", torch.bfloat16, 16, 1024, 512, 2048),
        ("bmm", torch.bfloat16, 32, 2048, 128, 2048),
    ]
    torch.backends.cuda.matmul.allow_tf32 = False
    for op, dt, b, m, k, n in shapes:
        if op == "mm":
            a = torch.randn(m, k, dtype=dt, device="cuda")
            w = torch.randn(k, n, dtype=dt, device="cuda")
            fn = lambda: torch.mm(a, w)  # noqa: E731
        else:
            a = torch.randn(b, m, k, dtype=dt, device="cuda")
            w = torch.randn(b, k, n, dtype=dt, device="cuda")
            fn = lambda: torch.bmm(a, w)  # noqa: E731
        us = timed(fn, 20 if m * n * k < 1 << 36 else 3)
        rows.append({"op": op, "dtype": str(dt).replace("torch.", ""), "batch": b, "m": m, "k": k,
                     "n": n, "us": us, "sync_us": timed_sync(fn, 10),
                     "tflops": 2.0 * b * m * n * k / us / 1e6})
    return rows


def memory_bound():
    rows = []
    for mib in [1, 16, 256, 1024]:
        n = mib * MiB // 2
        a = torch.randn(n, dtype=torch.bfloat16, device="cuda")
        b = torch.randn(n, dtype=torch.bfloat16, device="cuda")
        m2 = a.view(-1, 4096)
        for name, fn, moved in [
                ("aten.add.Tensor", lambda: torch.add(a, b), 3 * mib * MiB),
                ("aten.silu.default", lambda: F.silu(a), 2 * mib * MiB),
                ("aten._to_copy.default", lambda: a.float(), 3 * mib * MiB),
                ("aten.sum.dim_IntList", lambda: m2.sum(dim=1), mib * MiB + n // 4096 * 2)]:
            us = timed(fn, 20)
            rows.append({"target": name, "out_bytes": None, "moved_bytes": moved, "us": us,
                         "GBps": moved / us / 1e3})
        del a, b, m2
        torch.cuda.empty_cache()
    return rows


def attention():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = [("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION),
                ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)]
    shapes = [(1, 8, 2048, 128, True), (1, 8, 2048, 128, False), (4, 16, 4096, 128, True),
              (1, 32, 8192, 128, True), (8, 8, 1024, 64, True), (2, 16, 4096, 64, False)]
    rows = []
    for name, be in backends:
        for b, h, s, d, causal in shapes:
            row = {"op": name, "dtype": "bfloat16", "batch": b, "heads": h, "seq_q": s,
                   "seq_kv": s, "head_dim": d, "causal": causal}
            try:
                q, k, v = (torch.randn(b, h, s, d, dtype=torch.bfloat16, device="cuda",
                                       requires_grad=True) for _ in range(3))
                g = torch.randn(b, h, s, d, dtype=torch.bfloat16, device="cuda")
                with sdpa_kernel([be]):
                    fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa
                    row["fwd_us"] = timed(fwd, 10)
                    out = fwd()
                    bwd = lambda: torch.autograd.grad(out, (q, k, v), g, retain_graph=True)  # noqa
                    row["bwd_us"] = timed(bwd, 10)
                    row["fwd_sync_us"] = timed_sync(fwd, 10)
                    row["bwd_sync_us"] = timed_sync(bwd, 10)
                f = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
                row["fwd_tflops"] = f / row["fwd_us"] / 1e6
                row["bwd_tflops"] = 2.5 * f / row["bwd_us"] / 1e6
            except Exception as e:  # a backend may not support a shape
                row["error"] = repr(e)[:300]
            rows.append(row)
            torch.cuda.empty_cache()
    return rows


def interference(rank, world):
    rows = []
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    comp = torch.cuda.Stream()
    comm = torch.cuda.Stream()
    configs = [(5, 128 * MiB), (10, 128 * MiB), (10, 512 * MiB), (5, 16 * MiB), (5, 64 * MiB),
               (2, 4 * MiB)]
    for order, n_mm, shard in [(o, n, b) for o in ("comm_first", "compute_first")
                               for n, b in configs]:
        x = torch.ones(shard // 2, dtype=torch.bfloat16, device="cuda")
        big = torch.empty(shard // 2 * world, dtype=torch.bfloat16, device="cuda")

        def chain():
            for _ in range(n_mm):
                torch.mm(a, w)

        def ag():
            dist.all_gather_into_tensor(big, x)

        trials = []
        for _ in range(5):
            dist.barrier()
            torch.cuda.synchronize()
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(8)]
            # solo chain, solo all_gather, then both at once: paired in time
            ev[4].record()
            chain()
            ev[5].record()
            torch.cuda.synchronize()
            dist.barrier()
            ev[6].record()
            ag()
            ev[7].record()
            torch.cuda.synchronize()
            dist.barrier()
            if order == "comm_first":
                with torch.cuda.stream(comm):
                    ev[0].record(comm)
                    ag()
                    ev[1].record(comm)
            with torch.cuda.stream(comp):
                ev[2].record(comp)
                chain()
                ev[3].record(comp)
            if order == "compute_first":
                # the all_gather is issued while the first GEMM runs
                with torch.cuda.stream(comm):
                    comm.wait_event(ev[2])
                    ev[0].record(comm)
                    ag()
                    ev[1].record(comm)
            torch.cuda.synchronize()
            el = [ev[i].elapsed_time(ev[i + 1]) * 1000 for i in (0, 2, 4, 6)]
            trials.append({"ag_overlapped_us": el[0], "mm_overlapped_us": el[1],
                           "mm_solo_us": el[2], "ag_solo_us": el[3],
                           "ag_start_after_mm_start_us": ev[2].elapsed_time(ev[0]) * 1000,
                           "total_us": max(el[1], ev[2].elapsed_time(ev[1]) * 1000)})
        med = {k: statistics.median(t[k] for t in trials) for k in trials[0]}
        med["mm_extra_us"] = statistics.median(t["mm_overlapped_us"] - t["mm_solo_us"]
                                               for t in trials)
        rows.append({"order": order, "mm_8192": n_mm, "shard_bytes": shard, **med,
                     "trials": trials})
        del x, big
        torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", help="comma-separated sections to run")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    result = {"device": torch.cuda.get_device_name(), "world_size": world,
              "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
              "env": {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "NCCL_ALGO",
                                                      "NCCL_PROTO")}}
    t0 = time.time()
    for name, fn in [("collectives", lambda: collectives(rank, world)),
                     ("interference", lambda: interference(rank, world))]:
        if only and name not in only:
            continue
        try:
            result[name] = fn()
        except Exception:
            result[name + "_error"] = traceback.format_exc()[-2000:]
        dist.barrier()
    if rank == 0:
        for name, fn in [("gemm", gemms), ("attention", attention), ("memory", memory_bound)]:
            if only and name not in only:
                continue
            try:
                result[name] = fn()
            except Exception:
                result[name + "_error"] = traceback.format_exc()[-2000:]
        result["seconds"] = time.time() - t0
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps({k: v for k, v in result.items() if k.endswith("error")}), file=sys.stderr)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""grouped_collectives.py: what one NCCL group of n collectives costs against
n separate calls and one call over their concatenation (issue 14's open
question for copy-free buckets, docs/bucketing.md "Zero-copy buckets").

Run ON THE GPU MACHINE (device tool, kind nvidia-h200-x2) with PyTorch:
  NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc_per_node=2 \
    tools/device/grouped_collectives.py OUTDIR
(tools/device/grouped.sh runs it after its plan checks.)
For all_gather and reduce_scatter (bf16), n = 1, 4, 9, 32 members of one
size per case (64 KiB .. 64 MiB per member and rank), timed with CUDA events
around 10 back-to-back repetitions, 20 samples, slowest rank, median:
  separate  n calls, one after another (no bucket)
  grouped   the same n calls inside one NCCL group (torch's coalescing
            manager: ncclGroupStart / ncclGroupEnd), no copy
  packed    one call over the concatenated buffer (today's bucket, its pack
            and unpack copies excluded)
  copies    the packed bucket's copies alone (the unpacks of an all_gather,
            the interleaving pack of a reduce_scatter), as torch copies
Writes OUTDIR/grouped_collectives.json and prints a markdown table. About
2 minutes.

Calibration (docs/cost-model.md "Coalesced collectives"): the model prices
a group of n calls as overhead + sum over members of (t_i - overhead) +
(n - 1) x coalesced_member_us, with t_i one call's time and overhead the
cluster's collective_overhead_us (OVERHEAD_US, default 18). With t_1 =
separate / n measured here, each row with n > 1 gives
coalesced_member_us = (grouped - overhead - n (t_1 - overhead)) / (n - 1);
the median (at least 0) is the fitted value, written under "fit" and
printed with the model's error per row at 0 (the built-in default) and at
the fit. "flat" is packed + copies: what a flat bucket costs (its copies on
the compute stream), against grouped.
"""
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
REPS, SAMPLES, WARM = 10, 20, 3
SIZES = [64 << 10, 1 << 20, 16 << 20, 64 << 20]  # bytes per member and rank
COUNTS = [1, 4, 9, 32]


def timed(fn):
    for _ in range(WARM):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    ts = []
    for _ in range(SAMPLES):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(REPS):
            fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1000.0 / REPS)
    t = torch.tensor(ts, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return round(statistics.median(t.tolist()), 2)


def main():
    dist.init_process_group("nccl")
    rank, k = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    dev = torch.device("cuda")
    rows = []
    for kind in ("all_gather", "reduce_scatter"):
        for size in SIZES:
            for n in COUNTS:
                if n * size * k > (2 << 30):
                    continue
                numel = size // 2  # bf16
                if kind == "all_gather":
                    ins = [torch.randn(numel, device=dev, dtype=torch.bfloat16) for _ in range(n)]
                    outs = [torch.empty(numel * k, device=dev, dtype=torch.bfloat16) for _ in range(n)]
                    flat_in = torch.cat(ins)
                    flat_out = torch.empty(numel * n * k, device=dev, dtype=torch.bfloat16)

                    def one(o, i):
                        dist.all_gather_into_tensor(o, i)

                    def copies():
                        v = flat_out.view(k, n, numel)
                        for j in range(n):
                            outs[j].view(k, numel).copy_(v[:, j])
                else:
                    ins = [torch.randn(numel * k, device=dev, dtype=torch.bfloat16) for _ in range(n)]
                    outs = [torch.empty(numel, device=dev, dtype=torch.bfloat16) for _ in range(n)]
                    flat_in = torch.empty(numel * k * n, device=dev, dtype=torch.bfloat16)
                    flat_out = torch.empty(numel * n, device=dev, dtype=torch.bfloat16)

                    def one(o, i):
                        dist.reduce_scatter_tensor(o, i)

                    def copies():
                        v = flat_in.view(k, n, numel)
                        for j in range(n):
                            v[:, j].copy_(ins[j].view(k, numel))

                def separate():
                    for o, i in zip(outs, ins):
                        one(o, i)

                def grouped():
                    with dist._coalescing_manager(device=dev):
                        for o, i in zip(outs, ins):
                            one(o, i)

                def packed():
                    one(flat_out, flat_in)

                row = {"kind": kind, "bytes_per_member": size, "members": n, "ranks": k,
                       "separate_us": timed(separate), "grouped_us": timed(grouped),
                       "packed_us": timed(packed), "copies_us": timed(copies)}
                rows.append(row)
                if rank == 0:
                    print(json.dumps(row), flush=True)
    if rank == 0:
        fit = fit_member_us(rows)
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, "grouped_collectives.json"), "w") as f:
            json.dump({"world_size": k, "nccl": list(torch.cuda.nccl.version()), "rows": rows,
                       "fit": fit}, f, indent=1)
        print("| kind | bytes/member | n | separate us | grouped us | packed us | copies us | "
              "flat (packed + copies) us | model grouped us (m = 0 / fit) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            p0, pf = (round(model_grouped(r, m), 2) for m in (0.0, fit["coalesced_member_us"]))
            print(f"| {r['kind']} | {r['bytes_per_member']} | {r['members']} | {r['separate_us']} | "
                  f"{r['grouped_us']} | {r['packed_us']} | {r['copies_us']} | "
                  f"{round(r['packed_us'] + r['copies_us'], 2)} | {p0} / {pf} |")
        print(f"fit: coalesced_member_us = {fit['coalesced_member_us']} (median of {fit['rows']} "
              f"rows, overhead {fit['overhead_us']} us); model error at the fit: median "
              f"{fit['median_error_pct']} %, worst {fit['worst_error_pct']} %")
    dist.destroy_process_group()


OVERHEAD_US = float(os.environ.get("OVERHEAD_US", "18"))


def model_grouped(r, member_us):
    """The model's group of n calls (estimate/'s sg_cost_coalesced_us), from
    one measured call t_1 = separate / n."""
    n = r["members"]
    t1 = r["separate_us"] / n
    return OVERHEAD_US + n * max(t1 - OVERHEAD_US, 0.0) + (n - 1) * member_us


def fit_member_us(rows):
    many = [r for r in rows if r["members"] > 1]
    per = sorted((r["grouped_us"] - model_grouped(r, 0.0)) / (r["members"] - 1) for r in many)
    m = max(0.0, statistics.median(per)) if per else 0.0
    err = [abs(model_grouped(r, m) - r["grouped_us"]) / r["grouped_us"] * 100.0 for r in many
           if r["grouped_us"] > 0]
    return {"coalesced_member_us": round(m, 2), "overhead_us": OVERHEAD_US, "rows": len(per),
            "median_error_pct": round(statistics.median(err), 1) if err else None,
            "worst_error_pct": round(max(err), 1) if err else None}


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""torch_op_classes.py OUTDIR: PyTorch's GPU time per op class on the aten
graph that schedrun runs. Under torchrun (one process per GPU), with
CASE=name:L:H:F:heads:S:dp:tp as ../shared/bench/torch_step.py takes it and
PEER_DIR the folder holding peer_inductor.py: traces the step with make_fx
as peer_inductor.py exports it, runs the GraphModule (torch_step.py's
fx_input) WARM times, then ITERS times under torch.profiler, and sums each
aten op's self device time (the kernels it launched itself) per class of
tools/device/op_classes.py. Writes OUTDIR/torch_ops.<name>.json:
{"name", "iters", "step_us" (median of the profiled iterations, events),
"classes": {class: us per step}, "ops": {aten op: us per step}}."""
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist
from torch.fx.experimental.proxy_tensor import make_fx

sys.path.insert(0, os.environ.get("PEER_DIR", "."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else "."
sys.argv = [sys.argv[0], OUT]
from peer_inductor import make_step, param_shapes  # noqa: E402
from op_classes import CLASSES, op_class  # noqa: E402

ITERS = int(os.environ.get("ITERS", "10"))
WARM = int(os.environ.get("WARM", "3"))


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    nm, L, H, F, heads, S, dp, tp = os.environ["CASE"].split(":")
    L, H, F, heads, S, dp, tp = map(int, (L, H, F, heads, S, dp, tp))
    grp = (None, dist.group.WORLD) if tp == 1 else (dist.group.WORLD, None)
    step = make_step(L, H, F, heads, grp[0], grp[1], tp, seq_parallel=True)
    torch.manual_seed(rank)
    x = torch.randn(S // tp, H, device="cuda", dtype=torch.bfloat16)
    params = [torch.randn(s, device="cuda", dtype=torch.bfloat16) * 0.02
              for s in param_shapes(L, H, F, tp, dp)]
    gm = make_fx(step, tracing_mode="fake")(x, *[p.requires_grad_(True) for p in params])
    pd = [p.detach() for p in params]
    for _ in range(WARM):
        gm(x, *pd)
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    steps = []
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(ITERS):
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            gm(x, *pd)
            e.record()
            torch.cuda.synchronize()
            steps.append(s.elapsed_time(e) * 1000.0)
    ops = {}
    for ev in prof.key_averages():
        us = getattr(ev, "self_device_time_total", None)
        if us is None:
            us = getattr(ev, "self_cuda_time_total", 0)
        if us and ev.key.startswith("aten::"):
            ops[ev.key] = ops.get(ev.key, 0.0) + us / ITERS
    classes = {c: 0.0 for c in CLASSES}
    for k, us in ops.items():
        classes[op_class(k)] += us
    res = {"name": nm, "iters": ITERS, "step_us": round(statistics.median(steps), 1),
           "classes": {k: round(v, 1) for k, v in classes.items()},
           "ops": {k: round(v, 1) for k, v in sorted(ops.items(), key=lambda kv: -kv[1])}}
    if rank == 0:
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, f"torch_ops.{nm}.json"), "w") as f:
            json.dump(res, f, indent=1)
        print("torch_ops", nm, json.dumps(res["classes"]), "profiled step", res["step_us"],
              flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Regenerates the sample graphs of tests/data with the repo's exporter.

    python3 python/tools/export_samples.py OUTDIR [--cases a,b] [--check tests/data]
                                         [--peer-orders]

Each case traces schedgraph.testing's llama-like step (forward and backward
in one make_fx graph, fake tensors, c10d functional collectives on a fake
process group of the case's world size) and writes NAME.json with
schedgraph.export. No GPU is needed: the tensors are fake, the cuDNN
attention op that PyTorch picks for bf16 on H100/H200 is called directly,
and device constants in the graph (the `device` of _to_copy) name cuda:0,
as they do in a trace on the GPU. With a GPU, the trace runs on cuda and
F.scaled_dot_product_attention picks the backend itself.

--check DIR compares every written file with DIR/NAME.json byte for byte
and exits 1 on any difference (naming the first differing node). The
committed files are PyTorch TORCH's (below) traces: other releases trace
differently (2.15 records `alias` where 2.11 records `detach`), so --check
says so when the running torch is another.
--peer-orders also runs Inductor's schedule_overlap_bucketing (no
bucketing) on each graph and writes NAME.peer_order_plain.json, the node
order it chose; it benchmarks matmuls, so it needs a GPU.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import schedgraph  # noqa: E402
from schedgraph import testing  # noqa: E402

# The PyTorch release that wrote tests/data (tests/data/README.md).
TORCH = "2.11"


def same_torch():
    return torch.__version__.split("+")[0].startswith(TORCH + ".")


# name: (world, "L:H:F:heads:S:dp:tp", cluster gpu)
CASES = {
    "dev_fsdp8_L2_h1024": (8, "2:1024:2816:8:2048:8:1", "H100"),
    "dev_fsdp2_tp4_L2_h1024": (8, "2:1024:2816:8:2048:2:4", "H100"),
    "w2_fsdp2_L2_h1024": (2, "2:1024:2816:8:2048:2:1", "H200"),
    "w2_tp2_L2_h1024": (2, "2:1024:2816:8:2048:1:2", "H200"),
    "w2_tiny_fsdp2_L2_h256": (2, "2:256:688:4:256:2:1", "H200"),
    "w2_tiny_tp2_L2_h256": (2, "2:256:688:4:256:1:2", "H200"),
}


def groups_for(world, cfg):
    """(dp_group, tp_group) on a fresh fake process group of `world` ranks:
    one dimension uses WORLD (c10d name "0"); a 2-D mesh creates tp (ranks
    0..tp-1, name "1") then dp (ranks 0, tp, 2tp..., name "2")."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    if cfg.dp > 1 and cfg.tp > 1:
        tp = dist.new_group(list(range(cfg.tp)))
        dp = dist.new_group(list(range(0, world, cfg.tp)))
        return dp, tp
    if cfg.tp > 1:
        return None, dist.group.WORLD
    return dist.group.WORLD, None


def retarget_devices(gm, device):
    """Sets every torch.device constant in the graph's arguments to `device`."""
    def fix(v):
        return device if isinstance(v, torch.device) else v

    for n in gm.graph.nodes:
        n.args = torch.fx.node.map_aggregate(n.args, fix)
        n.kwargs = torch.fx.node.map_aggregate(n.kwargs, fix)


def trace_case(name):
    world, spec, gpu = CASES[name]
    on_gpu = torch.cuda.is_available()
    cfg = testing.Config.parse(spec, attention="sdpa" if on_gpu else "cudnn")
    dp, tp = groups_for(world, cfg)
    gm = testing.trace(cfg, dp_group=dp, tp_group=tp, device="cuda" if on_gpu else "cpu")
    if not on_gpu:
        retarget_devices(gm, torch.device("cuda:0"))
    L, H, F, heads, S, dpn, tpn = spec.split(":")
    extra = {"cluster": {"gpus_per_node": min(world, 8), "nodes": max(1, world // 8), "gpu": gpu},
             "description": f"llama-like L={L} H={H} F={F} heads={heads} S={S} dp={dpn} tp={tpn}, "
                            f"fwd+bwd joint graph, traced with make_fx"}
    return gm, world, extra


def first_difference(a, b):
    ga, gb = json.loads(a), json.loads(b)
    for k in ga:
        if k != "nodes" and ga.get(k) != gb.get(k):
            return f"top-level key '{k}'"
    for x, y in zip(ga["nodes"], gb["nodes"]):
        if x != y:
            return f"node '{x['name']}' (committed: '{y['name']}')"
    return f"{len(ga['nodes'])} nodes, committed {len(gb['nodes'])}"


def peer_order(name, path):
    from torch._inductor.fx_passes import overlap_scheduling as ovs

    gm, _, _ = trace_case(name)
    ovs.schedule_overlap_bucketing(gm, collective_bucketing=False)
    with open(path, "w") as f:
        json.dump([n.name for n in gm.graph.nodes], f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--check", metavar="DIR")
    ap.add_argument("--peer-orders", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    if a.check and not same_torch():
        print(f"note: torch {torch.__version__}; {a.check} was written by {TORCH}: "
              f"differences may be the release's", flush=True)
    bad = 0
    for name in a.cases.split(","):
        if name not in CASES:
            ap.error(f"unknown case '{name}' (known: {', '.join(CASES)})")
        gm, world, extra = trace_case(name)
        path = os.path.join(a.outdir, name + ".json")
        schedgraph.export(gm, path, world_size=world, extra=extra)
        status = "written"
        if a.check:
            with open(path) as f, open(os.path.join(a.check, name + ".json")) as g:
                mine, theirs = f.read(), g.read()
            if mine == theirs:
                status = "identical to the committed file"
            else:
                status = "DIFFERS from the committed file: " + first_difference(mine, theirs)
                bad += 1
        print(f"{name}: {len(gm.graph.nodes)} nodes, {status}", flush=True)
        if a.peer_orders:
            peer_order(name, os.path.join(a.outdir, name + ".peer_order_plain.json"))
    if dist.is_initialized():
        dist.destroy_process_group()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

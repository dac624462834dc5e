"""schedgraph from inside PyTorch (docs/python.md).

    import schedgraph
    schedgraph.export(gm, "step.json")         # fx graph -> graph format
    gm = schedgraph.schedule(gm)               # reorder + bucket, applied to gm
    torch._inductor.config.post_grad_custom_post_pass = schedgraph.InductorPass()
    schedgraph.apply(gm, final)                # a final graph the CLI wrote, applied to gm
    gm2 = schedgraph.to_fx(graph)              # graph format -> a new GraphModule

Torch is imported only by the functions that need it: the binary runner
(binary.py) and the plan logic (plan.py) work without it.
"""
from .binary import SchedgraphError, find_binary
from .plan import PlanError, make_plan

__all__ = ["SchedgraphError", "PlanError", "find_binary", "make_plan", "export",
           "to_graph_json", "schedule", "apply", "to_fx", "InductorPass"]
__version__ = "0.1.0"


def export(gm, path=None, world_size=None, groups=None, rank=None, extra=None):
    """Writes the fx graph `gm` in schedgraph's graph format (export.py)."""
    from .exporter import export as _export
    return _export(gm, path, world_size=world_size, groups=groups, rank=rank, extra=extra)


def to_graph_json(gm, world_size=None, groups=None, rank=None, extra=None):
    from .exporter import to_graph_json as _to
    return _to(gm, world_size=world_size, groups=groups, rank=rank, extra=extra)


def schedule(gm, world_size=None, groups=None, rank=None, binary=None, reorder=True,
             bucket=True, cluster=None, profile=None, bucket_cap=None, options=(),
             workdir=None, timeout=None):
    """Schedules `gm` (a GraphModule or a Graph) with schedgraph and applies
    the result in place: the scheduled node order, buckets as c10d
    collectives over concatenated inputs, decomposed collective matmuls as
    chunked mms with point-to-point steps (docs/python.md). Returns gm.

    world_size, groups, rank: as for export(). binary: the schedgraph
    executable (else binary.py's rule). reorder, bucket, cluster, profile,
    bucket_cap, options: schedgraph's options (`schedgraph --help`).
    workdir: keep graph.json, final.json and report.json there. On a
    GraphModule, gm.meta["schedgraph"] gets the buckets and the summary."""
    import json
    import os
    import tempfile

    import torch

    from . import binary as _bin
    from .exporter import to_graph_json as _to

    graph = gm.graph if isinstance(gm, torch.fx.GraphModule) else gm
    exported = _to(graph, world_size=world_size, groups=groups, rank=rank)
    opts = _bin.option_args(reorder=reorder, bucket=bucket, cluster=cluster, profile=profile,
                            bucket_cap=bucket_cap, extra=options)
    with tempfile.TemporaryDirectory(prefix="schedgraph-") as tmp:
        d = workdir or tmp
        os.makedirs(d, exist_ok=True)
        paths = {k: os.path.join(d, k + ".json") for k in ("graph", "final", "report")}
        with open(paths["graph"], "w") as f:
            json.dump(exported, f)
        summary = _bin.run(paths["graph"], opts, binary=binary, report=paths["report"],
                           emit_graph=paths["final"], timeout=timeout)
        with open(paths["final"]) as f:
            final = json.load(f)
        with open(paths["report"]) as f:
            report = json.load(f)
    apply(gm, final, exported)
    if isinstance(gm, torch.fx.GraphModule):
        gm.meta["schedgraph"].update(summary=summary, report=report)
    return gm


def apply(gm, final, exported=None, world_size=None, groups=None, rank=None):
    """Applies `final` (a graph-format dict: what `schedgraph --emit-graph`
    wrote for `exported`) to `gm` (a GraphModule or a Graph) in place, as
    schedule() does; returns gm. exported: the graph-format dict of gm that
    schedgraph read (else to_graph_json(gm, world_size, groups, rank)).
    schedgraph's rank-dependent ops are lowered for final's `rank` and
    `groups`. On a GraphModule, gm.meta["schedgraph"] gets the buckets and
    the removed nodes."""
    import torch

    from .exporter import to_graph_json as _to
    from .rewrite import apply_plan, can_lower

    graph = gm.graph if isinstance(gm, torch.fx.GraphModule) else gm
    if exported is None:
        exported = _to(graph, world_size=world_size, groups=groups, rank=rank)
    plan = make_plan(exported, final, can_lower)
    apply_plan(graph, plan, final)
    if isinstance(gm, torch.fx.GraphModule):
        gm.recompile()
        gm.meta["schedgraph"] = {"buckets": plan.buckets, "removed": plan.removed}
    return gm


def to_fx(graph, device="cpu"):
    """A new GraphModule computing `graph` (a graph-format dict), every node
    built as schedule() builds new nodes (importer.py)."""
    from .importer import to_fx as _to_fx
    return _to_fx(graph, device=device)


def InductorPass(**kwargs):
    """A torch._inductor CustomGraphPass running schedule() on each post-grad
    graph (hooks.py); keyword arguments go to schedule()."""
    from .hooks import SchedgraphPass
    return SchedgraphPass(**kwargs)

"""schedgraph from inside PyTorch (docs/python.md).

    import schedgraph
    schedgraph.export(gm, "step.json")         # fx graph -> graph format
    gm = schedgraph.schedule(gm)               # reorder + bucket, applied to gm
    torch._inductor.config.post_grad_custom_post_pass = schedgraph.InductorPass()

Torch is imported only by the functions that need it: the binary runner
(binary.py) and the plan logic (plan.py) work without it.
"""
from .binary import SchedgraphError, find_binary
from .plan import PlanError, make_plan

__all__ = ["SchedgraphError", "PlanError", "find_binary", "make_plan", "export",
           "to_graph_json", "schedule", "InductorPass"]
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
    collectives over concatenated inputs. Returns gm.

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
    from .rewrite import apply_plan, can_lower

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
    plan = make_plan(exported, final, can_lower)
    apply_plan(graph, plan)
    if isinstance(gm, torch.fx.GraphModule):
        gm.recompile()
        gm.meta["schedgraph"] = {"buckets": plan.buckets, "removed": plan.removed,
                                 "summary": summary, "report": report}
    return gm


def InductorPass(**kwargs):
    """A torch._inductor CustomGraphPass running schedule() on each post-grad
    graph (hooks.py); keyword arguments go to schedule()."""
    from .hooks import SchedgraphPass
    return SchedgraphPass(**kwargs)

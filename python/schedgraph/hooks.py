"""The torch.compile hook: schedgraph as Inductor's post-grad custom pass.

    torch._inductor.config.post_grad_custom_post_pass = schedgraph.InductorPass()

Inductor (torch/_inductor/fx_passes/post_grad.py, post_grad_passes) calls
the pass on every post-grad graph (forward and backward graphs, or the one
graph of a compiled joint graph) after its pattern passes, before its
stable topological sort (which keeps a valid order as it is), its optional
bucketing and overlap passes, and before reinplacing: the graph is still
functional, which the exporter requires. uuid() makes the FX graph cache
key (and AOTAutograd's, which extends it) depend on this package's sources,
the binary, the options, and this process's rank and process groups: the
cache key is computed from the graph before post-grad passes, and the pass
may make it rank-specific (decomposed collective matmuls bake in the group
rank, rewrite.py), so a graph compiled on one rank must never be served to
another from a cache they share.

Inductor's own scheduler may still move kernels (reorder_for_peak_memory,
fusion); set torch._inductor.config.reorder_for_peak_memory = False to keep
schedgraph's order as close as Inductor allows.

A graph schedgraph or the exporter refuses is left unchanged, with a
warning naming the node (strict=True raises instead).
"""
import hashlib
import os
import warnings

from torch._inductor.custom_graph_pass import CustomGraphPass

from . import binary as _bin
from .binary import SchedgraphError


def _process_groups():
    """This process's rank, world size and every c10d group (name, ranks):
    what the rank-specific parts of a rewritten graph depend on."""
    try:
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            return "no process group"
        names = dist.distributed_c10d._world.pg_names
        groups = sorted((str(name), tuple(dist.get_process_group_ranks(pg)))
                        for pg, name in names.items())
        return repr((dist.get_rank(), dist.get_world_size(), groups))
    except Exception as e:  # an unknown registry: no cache sharing at all
        return f"unknown process groups {e!r} {os.getpid()}"


class SchedgraphPass(CustomGraphPass):
    def __init__(self, strict=False, **schedule_kwargs):
        self.strict = strict
        self.kwargs = schedule_kwargs
        self.calls = []  # per call: node count, buckets, or the refusal

    def __call__(self, graph):
        from . import schedule

        n = len(graph.nodes)
        try:
            schedule(graph, **self.kwargs)
        except SchedgraphError as e:
            if self.strict:
                raise
            warnings.warn(f"schedgraph: graph left unchanged: {e}")
            self.calls.append({"nodes": n, "refused": str(e)})
            return
        self.calls.append({"nodes": n, "nodes_after": len(graph.nodes)})

    def uuid(self):
        h = hashlib.sha256()
        here = os.path.dirname(os.path.abspath(__file__))
        for f in sorted(os.listdir(here)):
            if f.endswith(".py"):
                with open(os.path.join(here, f), "rb") as fh:
                    h.update(fh.read())
        try:
            exe = _bin.find_binary(self.kwargs.get("binary"))
            st = os.stat(exe)
            h.update(f"{exe}:{st.st_size}:{st.st_mtime_ns}".encode())
        except (SchedgraphError, OSError):
            h.update(b"no-binary")
        h.update(_process_groups().encode())
        h.update(repr(sorted(self.kwargs.items())).encode())
        h.update(repr(self.strict).encode())
        return h.hexdigest()

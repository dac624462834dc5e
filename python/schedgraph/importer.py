"""Graph format -> a new torch.fx GraphModule (docs/graph-format.md), the
reverse of exporter.py: runs any graph schedgraph reads or writes in
PyTorch, e.g. `--emit-graph`'s final graph or the ring decompositions of
tests/runtime/mkring, against the graph they came from.

Placeholders get fake values of their meta's shape, stride (contiguous
when absent) and dtype on `device`; every call_function node is built by
rewrite.build_node, the lowerings schedule() uses (schedgraph's own ops
included; rank-dependent ones for the graph's `rank`); the output returns
what the graph's output lists. Group names in arguments are c10d group
names, as the exporter writes them: running the module needs those groups.

Refused (SchedgraphError naming the node): get_attr nodes (the format has
no values for them), placeholders without a tensor meta, whatever a
lowering refuses.
"""
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from .binary import SchedgraphError
from .exporter import DTYPES
from .rewrite import LowerCtx, resolve_refs, build_node

_TORCH_DTYPES = {v: k for k, v in DTYPES.items()}


def _contiguous(shape):
    stride, acc = [], 1
    for d in reversed(shape):
        stride.append(acc)
        acc *= max(d, 1)
    return list(reversed(stride))


def _placeholder(graph, fake, node, device):
    m = node.get("meta") or {}
    if "shape" not in m or m.get("dtype") not in _TORCH_DTYPES:
        raise SchedgraphError(f"node '{node['name']}': a placeholder needs a tensor meta "
                              f"(shape, dtype)")
    p = graph.placeholder(node["name"])
    with fake:
        p.meta["val"] = torch.empty_strided(m["shape"], m.get("stride") or
                                            _contiguous(m["shape"]),
                                            dtype=_TORCH_DTYPES[m["dtype"]], device=device)
    return p


def to_fx(graph, device="cpu"):
    """A GraphModule computing `graph` (a graph-format dict): forward(*inputs)
    takes the placeholders in order and returns the output's list."""
    g = torch.fx.Graph()
    fake = FakeTensorMode()
    ctx = LowerCtx(g, fake, graph)
    env = {}
    for node in graph["nodes"]:
        op, name = node.get("op"), node["name"]
        if op == "placeholder":
            env[name] = _placeholder(g, fake, node, device)
        elif op == "call_function":
            env[name] = build_node(ctx, node, env)
        elif op == "output":
            g.output(resolve_refs(node.get("args", [None])[0], env))
        else:
            raise SchedgraphError(f"node '{name}': op '{op}' cannot be built (the graph "
                                  f"format holds no value for it)")
    g.lint()
    return torch.fx.GraphModule(torch.nn.Module(), g)

"""torch.fx graph -> schedgraph's graph format (docs/graph-format.md).

Takes any fx graph of aten ops and c10d functional collectives whose nodes
carry metadata: make_fx graphs (real, fake or symbolic tracing with static
shapes), AOTAutograd joint graphs, Inductor post-grad graphs. Per node:
name, op, target (`str(node.target)`), args/kwargs with node references as
{"node": NAME}, and meta from node.meta["val"] (or ShapeProp's
"tensor_meta"): shape, stride, dtype, or a tuple of those.

Group names map to ranks through the `groups` argument where it lists
them, else through the process group registry (the real or fake process
group the graph was traced with). Refused, with ExportError naming the node: call_module and
call_method nodes, targets that are not aten/c10d ops (Python functions,
higher-order ops), ops that mutate an argument (schedgraph orders by data
dependencies only), c10d ops other than the five functional collectives
and wait_tensor, symbolic shapes, dtypes the format lacks, arguments that
are not JSON-expressible (tensors, callables, ...), collectives whose
group cannot be resolved.
"""
import json
import math
import operator

import torch

from .binary import SchedgraphError

FORMAT = "schedgraph.graph"
VERSION = 1

DTYPES = {
    torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16",
    torch.float16: "float16", torch.float8_e4m3fn: "float8_e4m3fn",
    torch.float8_e5m2: "float8_e5m2", torch.int64: "int64", torch.int32: "int32",
    torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool",
}

# The collectives schedgraph models (graph/ops.c) and their wait.
COLLECTIVES = {
    "_c10d_functional.all_gather_into_tensor.default",
    "_c10d_functional.reduce_scatter_tensor.default",
    "_c10d_functional.all_reduce.default",
    "_c10d_functional.all_to_all_single.default",
    "_c10d_functional.broadcast.default",
    # coalesced: a list in, a list out, each element read through getitem
    # (docs/graph-format.md); schedgraph's grouped buckets are these too
    "_c10d_functional.all_gather_into_tensor_coalesced.default",
    "_c10d_functional.reduce_scatter_tensor_coalesced.default",
    "_c10d_functional.all_reduce_coalesced.default",
}
WAIT = "_c10d_functional.wait_tensor.default"
# The legacy wait (Inductor's bucketer emits it) is the same op under
# another namespace: exported under the functional name.
LEGACY_WAIT = "c10d_functional.wait_tensor.default"


class ExportError(SchedgraphError):
    """The graph holds something the graph format cannot express."""


def _fail(node, what):
    raise ExportError(f"node '{node.name}': {what}")


def target_name(node):
    """The graph format's `target` for an fx node (refuses what is not an op)."""
    t = node.target
    if node.op != "call_function":
        return str(t)
    if t is operator.getitem:
        return str(t)
    if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        name = str(t)
        if name == LEGACY_WAIT:
            return WAIT
        ns = name.split(".", 1)[0]
        if ns in ("_c10d_functional", "c10d_functional") and name not in COLLECTIVES | {WAIT}:
            _fail(node, f"target {name}: schedgraph models only "
                        f"{', '.join(sorted(COLLECTIVES))} and wait_tensor")
        schema = getattr(t, "_schema", None)
        if schema is not None and any(a.alias_info is not None and a.alias_info.is_write
                                      for a in schema.arguments):
            _fail(node, f"target {name} mutates an argument; schedgraph orders nodes by "
                        f"data dependencies only (export the functional graph, before "
                        f"reinplacing)")
        return name
    if isinstance(t, torch._ops.HigherOrderOperator):
        _fail(node, f"higher-order op {t.name()} (a subgraph) has no graph-format form")
    _fail(node, f"target {getattr(t, '__qualname__', t)!r} is not an aten or c10d op "
                f"(trace with make_fx to get aten ops)")


def encode(value, node, where):
    """A node argument as graph-format JSON."""
    if isinstance(value, torch.fx.Node):
        return {"node": value.name}
    if isinstance(value, (list, tuple)):
        return [encode(v, node, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {str(k): encode(v, node, f"{where}.{k}") for k, v in value.items()}
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    if isinstance(value, (torch.device, torch.memory_format, torch.layout)):
        return str(value)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        _fail(node, f"{where}: symbolic value {value}; schedgraph needs static shapes "
                    f"(trace without dynamic shapes)")
    _fail(node, f"{where}: a {type(value).__name__} argument has no graph-format form")


def _tensor_meta(node, shape, stride, dtype, where):
    if dtype not in DTYPES:
        _fail(node, f"{where}: dtype {dtype} is not in the graph format")
    dims = list(shape) + list(stride)
    if any(isinstance(d, torch.SymInt) for d in dims):
        _fail(node, f"{where}: symbolic shape {list(shape)}; schedgraph needs static shapes "
                    f"(trace without dynamic shapes)")
    dims = [int(d) for d in dims]
    n = len(shape)
    return {"shape": dims[:n], "stride": dims[n:], "dtype": DTYPES[dtype]}


def _value_meta(node, v, where):
    if isinstance(v, torch.Tensor):
        return _tensor_meta(node, v.shape, v.stride(), v.dtype, where)
    tm = v
    if hasattr(tm, "shape") and hasattr(tm, "stride") and hasattr(tm, "dtype"):
        return _tensor_meta(node, tm.shape, tm.stride, tm.dtype, where)
    return None


def node_meta(node):
    """meta for one node, or None when its value is not a tensor (scalars,
    None, the output node) or not known."""
    if node.op == "output":
        return None
    v = node.meta.get("val", node.meta.get("tensor_meta"))
    if v is None:
        # getitem of a None element, ops returning None; but inputs and
        # collectives must say what they hold
        if node.op == "placeholder" or target_name(node) in COLLECTIVES | {WAIT}:
            _fail(node, "no meta['val'] (trace with make_fx, or run FakeTensorProp or "
                        "ShapeProp first)")
        return None
    if isinstance(v, (list, tuple)) and not hasattr(v, "dtype"):
        return {"tuple": [_value_meta(node, x, f"meta[{i}]") for i, x in enumerate(v)]}
    return _value_meta(node, v, "meta")


def _group_arg(node):
    schema = node.target._schema
    for i, a in enumerate(schema.arguments):
        if a.name == "group_name":
            return node.args[i] if i < len(node.args) else node.kwargs.get("group_name")
    _fail(node, "collective without a group_name argument")


def _resolve_group(name):
    """Ranks of the c10d group `name` from the process-group registry, or None."""
    try:
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_initialized():
            return None
        pg = dist.distributed_c10d._resolve_process_group(name)
        return list(dist.get_process_group_ranks(pg))
    except Exception:
        return None


def _group_entry(spec):
    if isinstance(spec, dict):
        e = {"ranks": [int(r) for r in spec["ranks"]]}
        if spec.get("partition") is not None:
            e["partition"] = [[int(r) for r in row] for row in spec["partition"]]
        return e
    return {"ranks": [int(r) for r in spec]}


def _world(world_size, rank):
    try:
        import torch.distributed as dist
        live = dist.is_available() and dist.is_initialized()
    except Exception:
        live = False
    if world_size is None:
        world_size = dist.get_world_size() if live else 1
    if rank is None:
        rank = dist.get_rank() if live else 0
    return int(world_size), int(rank)


def to_graph_json(gm, world_size=None, groups=None, rank=None, extra=None):
    """The graph-format dict of `gm` (a GraphModule or a Graph).

    world_size, rank: default to the initialized process group's, else 1, 0.
    groups: {c10d group name: ranks list, or {"ranks": [...], "partition":
    [[...], ...]}}; used instead of the process-group registry for the
    names it lists, and the only source of `partition`. extra: more top-level keys
    (cluster, description)."""
    graph = gm.graph if isinstance(gm, torch.fx.GraphModule) else gm
    world_size, rank = _world(world_size, rank)
    groups = dict(groups or {})
    out_groups = {}
    nodes = []
    for node in graph.nodes:
        if node.op not in ("placeholder", "get_attr", "call_function", "output"):
            _fail(node, f"op '{node.op}' has no graph-format form (trace with make_fx)")
        d = {"name": node.name, "op": node.op, "target": target_name(node),
             "args": encode(node.args, node, "args"), "kwargs": encode(node.kwargs, node, "kwargs")}
        m = node_meta(node)
        if m is not None:
            d["meta"] = m
        nodes.append(d)
        if d["target"] in COLLECTIVES:
            gname = _group_arg(node)
            if gname not in out_groups:
                if gname in groups:
                    out_groups[gname] = _group_entry(groups[gname])
                else:
                    ranks = _resolve_group(gname)
                    if ranks is None:
                        _fail(node, f"group '{gname}' is not a live process group; pass "
                                    f"groups={{'{gname}': [ranks...]}}")
                    out_groups[gname] = {"ranks": ranks}
    g = {"format": FORMAT, "version": VERSION, "world_size": world_size, "rank": rank,
         "groups": out_groups, "nodes": nodes}
    g.update(extra or {})
    return g


def export(gm, path=None, world_size=None, groups=None, rank=None, extra=None):
    """Writes `gm` in the graph format to `path` (when given, as json.dump
    writes it) and returns the dict. Arguments: to_graph_json()."""
    g = to_graph_json(gm, world_size=world_size, groups=groups, rank=rank, extra=extra)
    if path is not None:
        with open(path, "w") as f:
            json.dump(g, f)
    return g

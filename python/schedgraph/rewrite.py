"""Carries out a RewritePlan (plan.py) on a torch.fx graph, in place.

1. New nodes are built where the final graph has them, each by the lowering
   of its target (LOWERINGS below, else the generic one: any torch op the
   target string names, arguments decoded by the op's schema). Every new
   node gets meta["val"], computed under the graph's fake mode. Until step
   2 nothing reads them: a lowering that fails erases them and the graph is
   as it was (SchedgraphError naming the node).
2. Kept nodes whose references changed (users of a bucket member's wait)
   are rewired.
3. The dropped nodes (bucket members and their waits) are erased.
4. Nodes are moved into the final order: placeholders and get_attr first in
   their original order, then every other node as the final graph lists
   it, the output last. graph.lint() checks the result.

Lowerings of schedgraph's own ops follow what Inductor's bucketer emits
(torch/_inductor/fx_passes/bucketing.py, *_merge_fn_to_trace): the lowering
is a small Python function over tensors, traced with make_fx under the
graph's fake mode and inlined, so its nodes are plain aten ops.

- schedgraph.bucket_pack(ins, k, interleave): cat of the flattened inputs;
  interleaved (reduce_scatter): cat of each input viewed as [k, -1] along
  dim 1, flattened: rank r's segment holds every member's chunk r.
- schedgraph.bucket_unpack(flat, k, offset, numel): k = 1: a slice viewed
  to the member's shape; k > 1 (all_gather): flat viewed as [k, F/k],
  columns offset..offset+numel of every row, reshaped.
- the bucket's collective and its wait are the c10d functional ops
  themselves (generic lowering); the `schedgraph_bucket` kwarg moves to
  node.meta["schedgraph_bucket"].

A node kind schedgraph adds later (the decomposition of collective matmuls,
issue 13: a point-to-point ring step) is one more entry of LOWERINGS: a
function that builds its torch ops (e.g. torch.distributed.
_functional_collectives.permute_tensor, an all_to_all_single under the
hood, or the symmetric-memory ops). Chunked matmuls need nothing: their
slices, mms and cats are aten ops the generic lowering builds.
"""
import functools
import itertools
import operator

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.node import map_arg

from .binary import SchedgraphError

BUCKET_PACK = "schedgraph.bucket_pack"
BUCKET_UNPACK = "schedgraph.bucket_unpack"


def _pack(k, interleave, *ins):
    if interleave:
        return torch.cat([x.reshape(k, -1) for x in ins], dim=1).flatten()
    return torch.cat([x.reshape(-1) for x in ins])


def _unpack(k, offset, numel, shape, flat):
    if k == 1:
        return flat[offset: offset + numel].view(shape)
    return flat.view(k, flat.numel() // k)[:, offset: offset + numel].reshape(shape)


def _lower_pack(ctx, node, args):
    ins, k, interleave = args
    return ctx.trace(functools.partial(_pack, k, bool(interleave)), list(ins))


def _lower_unpack(ctx, node, args):
    flat, k, offset, numel = args
    shape = tuple(node["meta"]["shape"])
    return ctx.trace(functools.partial(_unpack, k, offset, numel, shape), [flat])


# target -> lowering(ctx, graph-format node, args with references resolved to
# fx nodes) -> the fx node holding the value
LOWERINGS = {
    BUCKET_PACK: _lower_pack,
    BUCKET_UNPACK: _lower_unpack,
}


def resolve_target(target):
    """The torch callable a graph-format target names, or None."""
    if target == str(operator.getitem):
        return operator.getitem
    parts = target.split(".")
    if len(parts) != 3:
        return None
    try:
        op = getattr(getattr(getattr(torch.ops, parts[0]), parts[1]), parts[2])
    except (AttributeError, RuntimeError):
        return None
    return op if isinstance(op, torch._ops.OpOverload) else None


def can_lower(target):
    return target in LOWERINGS or resolve_target(target) is not None


def _decode_leaf(v, typ):
    t = str(typ)
    if v is None or not isinstance(v, str):
        return v
    if "ScalarType" in t:
        return getattr(torch, v)
    if "Device" in t:
        return torch.device(v)
    if "MemoryFormat" in t or "Layout" in t:
        return getattr(torch, v.split(".")[-1])
    return v


class _Ctx:
    def __init__(self, graph, fake_mode):
        self.graph = graph
        self.fake_mode = fake_mode
        self.created = []

    def val(self, n):
        """n's value as a fake tensor of this graph's fake mode."""
        v = n.meta.get("val", n.meta.get("tensor_meta"))
        if isinstance(v, FakeTensor) and v.fake_mode is self.fake_mode:
            return v
        if isinstance(v, torch.Tensor):  # real, or fake of another mode (real-mode make_fx)
            with self.fake_mode:
                return torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device)
        if v is not None and hasattr(v, "stride") and hasattr(v, "dtype"):  # ShapeProp's
            with self.fake_mode:
                return torch.empty_strided(v.shape, v.stride, dtype=v.dtype)
        return v

    def call(self, target, args, kwargs, name=None):
        n = self.graph.create_node("call_function", target, tuple(args), kwargs, name=name)
        with self.fake_mode:
            n.meta["val"] = target(*map_arg(tuple(args), self.val), **map_arg(kwargs, self.val))
        self.created.append(n)
        return n

    def trace(self, fn, inputs):
        """Traces fn(*input values) with make_fx and inlines its nodes."""
        from torch._dispatch.python import enable_python_dispatcher
        from torch.fx.experimental.proxy_tensor import make_fx

        with self.fake_mode, enable_python_dispatcher():
            sub = make_fx(fn)(*[self.val(n) for n in inputs])
        env = {}
        placeholders = iter(inputs)
        result = None
        for sn in sub.graph.nodes:
            if sn.op == "placeholder":
                env[sn] = next(placeholders)
            elif sn.op == "output":
                result = env[sn.args[0]]
            elif sn.target is torch.ops.aten.detach.default:
                env[sn] = env[sn.args[0]]
            else:
                n = self.graph.node_copy(sn, lambda x: env[x])
                env[sn] = n
                self.created.append(n)
        return result


def _generic(ctx, node, args, kwargs):
    target = resolve_target(node["target"])
    schema = getattr(target, "_schema", None)
    if schema is not None:
        types = {a.name: a.type for a in schema.arguments}
        args = [_decode_leaf(v, a.type) for v, a in zip(args, schema.arguments)]
        kwargs = {k: _decode_leaf(v, types.get(k, "")) for k, v in kwargs.items()}
    return ctx.call(target, args, kwargs, name=node["name"])


def _resolve_refs(value, env):
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("node"), str):
        return env[value["node"]]
    if isinstance(value, list):
        return [_resolve_refs(v, env) for v in value]
    if isinstance(value, dict):
        return {k: _resolve_refs(v, env) for k, v in value.items()}
    return value


def _fake_mode(graph):
    """The fake mode the graph was traced under, when its inputs share one
    (make_fx fake tracing, Inductor); else a new one."""
    modes = {id(v.fake_mode): v.fake_mode for v in
             (n.meta.get("val") for n in graph.nodes if n.op == "placeholder")
             if isinstance(v, FakeTensor)}
    return next(iter(modes.values())) if len(modes) == 1 else FakeTensorMode()


def apply_plan(graph, plan):
    """Rewrites `graph` (a torch.fx.Graph) by `plan`, in place."""
    by_name = {n.name: n for n in graph.nodes}
    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    ctx = _Ctx(graph, _fake_mode(graph))
    env = dict(by_name)
    seq = []
    with graph.inserting_before(output):
        for step in plan.steps:
            if step.keep:
                seq.append(by_name[step.name])
                continue
            node = step.node
            first = len(ctx.created)
            try:
                args = _resolve_refs(node.get("args", []), env)
                kwargs = _resolve_refs(node.get("kwargs", {}), env)
                extra = {k: kwargs.pop(k) for k in list(kwargs) if k.startswith("schedgraph_")}
                lower = LOWERINGS.get(node["target"])
                value = lower(ctx, node, args) if lower else _generic(ctx, node, args, kwargs)
            except Exception as e:
                # nothing read the new nodes yet: erasing them restores the graph
                for n in reversed(ctx.created):
                    graph.erase_node(n)
                raise SchedgraphError(f"node '{step.name}': cannot build {node['target']} in "
                                      f"PyTorch: {e}") from e
            value.meta.update(extra)
            env[step.name] = value
            seq.extend(ctx.created[first:])
    for name, sub in plan.subs.items():
        n = by_name[name]
        count = itertools.count()

        def swap(ref, sub=sub, count=count):
            i = next(count)
            return env[sub[i]] if i in sub else ref

        n.args = map_arg(n.args, swap)
        n.kwargs = map_arg(n.kwargs, swap)
    for name in reversed(plan.removed):
        n = by_name[name]
        if n.users:
            raise SchedgraphError(f"node '{name}': dropped by schedgraph but still used by "
                                  f"{', '.join(u.name for u in n.users)}")
        graph.erase_node(n)
    for n in seq:
        if n.op not in ("placeholder", "get_attr", "output"):
            output.prepend(n)
    graph.lint()

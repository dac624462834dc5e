"""Carries out a RewritePlan (plan.py) on a torch.fx graph, in place.

1. New nodes are built where the final graph has them, each by the lowering
   of its target (LOWERINGS below, else the generic one: any torch op the
   target string names, arguments decoded by the op's schema). Every new
   node gets meta["val"], computed under the graph's fake mode. Until step
   2 nothing reads them: a lowering that fails erases them and the graph is
   as it was (SchedgraphError naming the node).
2. Kept nodes whose references changed (users of a bucket member's wait,
   of a decomposed mm) are rewired.
3. The dropped nodes (bucket members, the nodes a decomposition replaces,
   their waits) are erased.
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

The decomposition of collective matmuls (issue 13, docs/ops.md "Ring
decompositions") adds two ops of schedgraph's own; chunked matmuls need
nothing (their slices, mms and cats are aten ops the generic lowering
builds):

- schedgraph.collective_permute(IN, pairs, GROUP): the c10d functional
  all_to_all_single over GROUP on IN flattened, with split sizes that send
  IN whole to the rank this rank's pair targets and receive it whole from
  the rank whose pair targets this rank, all other splits 0: NCCL runs it as
  the grouped send/recv of those pairs (torch.distributed.
  _functional_collectives.permute_tensor does the same for full
  permutations). The `transport` kwarg changes no value and moves to
  node.meta["schedgraph_transport"] (c10d has no copy-engine transport).
- its `_c10d_functional.wait_tensor`: the wait, then the received data
  viewed to IN's shape; a rank no pair targets receives nothing and gets
  zeros instead (cat of the empty result and the zeros, so that the zeros
  still follow the wait).
- schedgraph.rank_roll(IN, SHIFT, SIGN, GROUP): IN viewed as [k, -1]
  blocks, cat of blocks s.. and ..s with s = (SHIFT + SIGN * r) mod k.

Both bake in r, the group rank of the graph being lowered (plan.group_rank:
the graph's `rank`, the live process group's when exported from one), so the
rewritten graph is one rank's: each rank traces and schedules its own.
"""
import functools
import itertools
import operator

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.node import map_arg

from .binary import SchedgraphError
from .plan import group_rank

BUCKET_PACK = "schedgraph.bucket_pack"
BUCKET_UNPACK = "schedgraph.bucket_unpack"
PERMUTE = "schedgraph.collective_permute"
RANK_ROLL = "schedgraph.rank_roll"
WAIT = "_c10d_functional.wait_tensor.default"


def _pack(k, interleave, *ins):
    if interleave:
        return torch.cat([x.reshape(k, -1) for x in ins], dim=1).flatten()
    return torch.cat([x.reshape(-1) for x in ins])


def _unpack(k, offset, numel, shape, flat):
    if k == 1:
        return flat[offset: offset + numel].view(shape)
    return flat.view(k, flat.numel() // k)[:, offset: offset + numel].reshape(shape)


def _lower_pack(ctx, node, args, kwargs):
    ins, k, interleave = args
    return ctx.trace(functools.partial(_pack, k, bool(interleave)), list(ins))


def _lower_unpack(ctx, node, args, kwargs):
    flat, k, offset, numel = args
    shape = tuple(node["meta"]["shape"])
    return ctx.trace(functools.partial(_unpack, k, offset, numel, shape), [flat])


def _send(sizes_out, sizes_in, group, x):
    flat = x.reshape(-1)[: sum(sizes_in)]  # a rank that sends nothing sends an empty tensor
    return torch.ops._c10d_functional.all_to_all_single(flat, sizes_out, sizes_in, group)


def _arrive(shape, numel, received, flat):
    if received:
        return flat.view(shape)
    return torch.cat([flat, flat.new_zeros(numel)]).view(shape)


def _roll(k, s, shape, x):
    b = x.reshape(k, x.numel() // k)
    return torch.cat([b[s:], b[:s]]).view(shape)


def _lower_permute(ctx, node, args, kwargs):
    x, pairs, group = args
    r, k = ctx.group_rank(group)
    shape = tuple(node["meta"]["shape"])
    numel = 1
    for d in shape:
        numel *= d
    sizes_out, sizes_in = [0] * k, [0] * k
    for i, (s, t) in enumerate(pairs):
        if not (0 <= s < k and 0 <= t < k):
            raise ValueError(f"args[1][{i}]: pair [{s}, {t}] is outside group '{group}' "
                             f"of {k} ranks")
        if s == r:
            sizes_in[t] = numel
        if t == r:
            sizes_out[s] = numel
    sent = ctx.trace(functools.partial(_send, sizes_out, sizes_in, group), [x])
    sent.meta["schedgraph_transport"] = kwargs.get("transport", "nccl")
    received = any(sizes_out)
    ctx.after_wait[sent] = lambda w: ctx.trace(
        functools.partial(_arrive, shape, numel, received), [w])
    return sent


def _lower_wait(ctx, node, args, kwargs):
    w = _generic(ctx, node, args, kwargs)
    after = ctx.after_wait.pop(args[0], None)
    return after(w) if after else w


def _lower_rank_roll(ctx, node, args, kwargs):
    x, shift, sign, group = args
    r, k = ctx.group_rank(group)
    shape = tuple(node["meta"]["shape"])
    return ctx.trace(functools.partial(_roll, k, (shift + sign * r) % k, shape), [x])


# target -> lowering(ctx, graph-format node, args, kwargs with references
# resolved to fx nodes, schedgraph_* kwargs taken out) -> the fx node holding
# the value; other targets: _generic
LOWERINGS = {
    BUCKET_PACK: _lower_pack,
    BUCKET_UNPACK: _lower_unpack,
    PERMUTE: _lower_permute,
    RANK_ROLL: _lower_rank_roll,
    WAIT: _lower_wait,
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


class LowerCtx:
    def __init__(self, graph, fake_mode, header):
        self.graph = graph
        self.fake_mode = fake_mode
        self.header = header  # the graph-format graph being lowered: its rank, groups
        self.created = []
        self.after_wait = {}  # a permute's fx node -> what its wait's lowering adds

    def group_rank(self, key):
        return group_rank(self.header, key)

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


def resolve_refs(value, env):
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("node"), str):
        return env[value["node"]]
    if isinstance(value, list):
        return [resolve_refs(v, env) for v in value]
    if isinstance(value, dict):
        return {k: resolve_refs(v, env) for k, v in value.items()}
    return value


def _fake_mode(graph):
    """The fake mode the graph was traced under, when its inputs share one
    (make_fx fake tracing, Inductor); else a new one."""
    modes = {id(v.fake_mode): v.fake_mode for v in
             (n.meta.get("val") for n in graph.nodes if n.op == "placeholder")
             if isinstance(v, FakeTensor)}
    return next(iter(modes.values())) if len(modes) == 1 else FakeTensorMode()


def build_node(ctx, node, env):
    """Builds the graph-format node `node` in ctx's fx graph (at its insertion
    point), its references resolved through env (name -> fx node); returns
    the fx node holding its value, which also gets the node's schedgraph_*
    kwargs as meta (and its sm_count as meta["schedgraph_sm_count"]). On
    failure every node ctx created so far is erased
    (nothing else reads them yet) and SchedgraphError names the node."""
    try:
        args = resolve_refs(node.get("args", []), env)
        kwargs = resolve_refs(node.get("kwargs", {}), env)
        extra = {k: kwargs.pop(k) for k in list(kwargs) if k.startswith("schedgraph_")}
        value = LOWERINGS.get(node["target"], _generic)(ctx, node, args, kwargs)
    except Exception as e:
        for n in reversed(ctx.created):
            ctx.graph.erase_node(n)
        raise SchedgraphError(f"node '{node['name']}': cannot build {node['target']} in "
                              f"PyTorch: {e}") from e
    value.meta.update(extra)
    if "sm_count" in node:  # c10d and aten have no per-GEMM SM target: kept as a note
        value.meta["schedgraph_sm_count"] = node["sm_count"]
    return value


def apply_plan(graph, plan, header):
    """Rewrites `graph` (a torch.fx.Graph) by `plan`, in place. header: the
    final graph (graph format) the plan came from: the rank and groups
    its rank-dependent ops are lowered for."""
    by_name = {n.name: n for n in graph.nodes}
    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    ctx = LowerCtx(graph, _fake_mode(graph), header)
    env = dict(by_name)
    seq = []
    with graph.inserting_before(output):
        for step in plan.steps:
            if step.keep:
                seq.append(by_name[step.name])
                continue
            first = len(ctx.created)
            env[step.name] = build_node(ctx, step.node, env)
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

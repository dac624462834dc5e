"""What applying a schedule means, on plain data (no torch needed).

Input: the graph this package exported (graph format, a dict) and the final
graph schedgraph wrote for it (`--emit-graph`: the same format, nodes in the
scheduled order, bucket ops added, bucket members gone). Output: a
RewritePlan that the torch side (rewrite.py) carries out on the fx graph:

- `steps`: the final order. A step either keeps an original node (by name)
  or creates a new one from its graph-format node (bucket pack, bucketed
  collective, its wait, unpacks; later the decomposition's nodes).
- `subs`: for a kept node, which of its node references now name another
  node (the users of a bucket member's wait read the member's unpack
  instead), by the reference's index in traversal order: args first, then
  kwargs, depth first, lists in order, dict values in key order; the same
  order as torch.fx.node.map_arg and as the exporter writes them.
- `removed`: the original nodes schedgraph dropped.
- `buckets`: each new collective's members (kwargs `schedgraph_bucket`).

Every rule is checked; a broken one raises PlanError naming the node: a kept
node whose target, op or non-reference arguments changed, a dropped node
that no new node replaces (kwargs `schedgraph_bucket` or
`schedgraph_replaces`) and that is not the wait of a replaced collective, a
new node whose target the caller cannot lower.

group_rank() is the one rule for which group rank a graph runs as (the
rank-dependent ops of the decomposition, docs/ops.md, need it).
"""
from dataclasses import dataclass, field


class PlanError(ValueError):
    """The final graph cannot be applied to the exported one."""


@dataclass
class Step:
    name: str
    node: dict = None  # the graph-format node for a new node; None: keep the original

    @property
    def keep(self):
        return self.node is None


@dataclass
class RewritePlan:
    steps: list = field(default_factory=list)
    subs: dict = field(default_factory=dict)     # kept name -> {ref index: new name}
    removed: list = field(default_factory=list)  # original names, original order
    buckets: list = field(default_factory=list)  # {"collective", "target", "members"}


def is_ref(v):
    return isinstance(v, dict) and len(v) == 1 and isinstance(v.get("node"), str)


def refs(value):
    """The node names referenced in a graph-format value, in traversal order."""
    out = []

    def walk(v):
        if is_ref(v):
            out.append(v["node"])
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(value)
    return out


def _same_leaf(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        # schedgraph keeps numbers as doubles: 0.0 may come back as 0, and
        # integers past 2^53 rounded
        return a == b or float(a) == float(b)
    return a == b


def _same_shape(a, b):
    """a and b equal with every node reference treated as a wildcard."""
    if is_ref(a) or is_ref(b):
        return is_ref(a) and is_ref(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_shape(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same_shape(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    return _same_leaf(a, b)


def _node_value(n):
    return [n.get("args", []), n.get("kwargs", {})]


def bucket_members(node):
    kw = node.get("kwargs") or {}
    m = kw.get("schedgraph_bucket")
    return list(m) if isinstance(m, list) else []


def replaced(node):
    """Original nodes a new node stands for: its bucket's members, and the
    names in its `schedgraph_replaces` kwarg (the way a pass that drops
    nodes other than bucket members, such as the decomposition of
    collective matmuls, says which)."""
    kw = node.get("kwargs") or {}
    r = kw.get("schedgraph_replaces")
    return bucket_members(node) + (list(r) if isinstance(r, list) else [])


def make_plan(exported, final, can_lower):
    """The RewritePlan that turns `exported` into `final` (both graph-format
    dicts). can_lower(target) says whether a new node of that target can be
    built in the caller's framework."""
    orig = {n["name"]: n for n in exported["nodes"]}
    fin_names = [n["name"] for n in final["nodes"]]
    if len(set(fin_names)) != len(fin_names):
        raise PlanError("the final graph names a node twice")
    plan = RewritePlan()
    for n in final["nodes"]:
        name = n["name"]
        o = orig.get(name)
        if o is None:
            if n.get("op") != "call_function":
                raise PlanError(f"node '{name}': schedgraph added a node of op '{n.get('op')}'")
            if not can_lower(n["target"]):
                raise PlanError(f"node '{name}': schedgraph created a node of target "
                                f"'{n['target']}', which this package cannot express in PyTorch")
            plan.steps.append(Step(name, n))
            members = bucket_members(n)
            if members:
                plan.buckets.append({"collective": name, "target": n["target"],
                                     "members": members})
            continue
        for key in ("op", "target"):
            if o.get(key) != n.get(key):
                raise PlanError(f"node '{name}': {key} changed from '{o.get(key)}' to "
                                f"'{n.get(key)}'")
        ov, nv = _node_value(o), _node_value(n)
        if not _same_shape(ov, nv):
            raise PlanError(f"node '{name}': schedgraph changed an argument that is not a "
                            f"node reference")
        sub = {i: b for i, (a, b) in enumerate(zip(refs(ov), refs(nv))) if a != b}
        if sub:
            plan.subs[name] = sub
        plan.steps.append(Step(name))
    kept = set(fin_names)
    gone = {r for s in plan.steps if not s.keep for r in replaced(s.node)}
    for n in exported["nodes"]:
        name = n["name"]
        if name in kept:
            continue
        waited = refs(n.get("args", []))[:1]
        if name not in gone and not (n.get("target", "").endswith("wait_tensor.default")
                                     and waited and waited[0] in gone):
            raise PlanError(f"node '{name}': schedgraph dropped it, but no new node replaces "
                            f"it (schedgraph_bucket, schedgraph_replaces) nor its collective")
        plan.removed.append(name)
    return plan


def group_rank(graph, key):
    """(group rank, group size) of the graph's `rank` in group `key`: its
    position in the ascending rank list of the group's instance that holds
    it (docs/ops.md; c10d numbers a group's ranks the same way). The
    instance is the `partition` row holding `rank` when there is one, else
    `ranks`, which must hold it (graph-format.md)."""
    g = (graph.get("groups") or {}).get(key)
    if not isinstance(g, dict) or not isinstance(g.get("ranks"), list):
        raise PlanError(f"group '{key}' is not in the graph's groups")
    rank = graph.get("rank", 0)
    rows = [row for row in g.get("partition") or [] if rank in row] or [g["ranks"]]
    ranks = sorted(rows[0])
    if rank not in ranks:
        raise PlanError(f"group '{key}': rank {rank} is not among its ranks {ranks} "
                        f"(and no partition row holds it)")
    return ranks.index(rank), len(ranks)

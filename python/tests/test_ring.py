"""Tests that need torch: schedgraph's ring decompositions of collective
matmuls (docs/ops.md "Ring decompositions") lowered into PyTorch
(rewrite.py: collective_permute, its wait, rank_roll) and run on gloo
groups of 2 and 4 CPU processes.

- tests/runtime/mkring's graphs, built with to_fx: the ring forms equal
  their reference graphs (all_gather -> mm bitwise, in float32 and
  bfloat16; mm -> reduce_scatter within 1e-5 relative, docs/ops.md), the
  partial permutation gives zeros where no pair targets a rank, and
  Inductor compiles them to the same bits;
- make_fx graphs of all_gather -> mm and mm -> reduce_scatter with the
  ring spliced in as schedgraph's final graph would have it
  (schedgraph_replaces), applied with schedgraph.apply: the rewritten
  GraphModule computes the traced one's values, eagerly and compiled.

mkring: $SCHEDGRAPH_MKRING, else tests/runtime/mkring of the build that
holds $SCHEDGRAPH; without it these tests are skipped, saying so.
"""
import copy
import json
import os
import subprocess
import tempfile
import unittest

import torch
import torch.distributed as dist

import gloo
import schedgraph
import schedgraph.hooks
from schedgraph import rewrite


def _mkring():
    p = os.environ.get("SCHEDGRAPH_MKRING")
    if not p and os.environ.get("SCHEDGRAPH"):
        build = os.path.dirname(os.path.dirname(os.path.dirname(os.environ["SCHEDGRAPH"])))
        p = os.path.join(build, "tests", "runtime", "mkring")
    return p if p and os.access(p, os.X_OK) else None


MKRING = _mkring()
DTYPES = ("float32", "bfloat16")  # of the all_gather graphs; the rs graphs are float32


def _graphs(k):
    """{dtype: {name: graph}} as mkring writes them for one group of k."""
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for dt in DTYPES:
            sub = os.path.join(d, dt)
            os.makedirs(sub)
            subprocess.run([MKRING, sub, str(k), str(k), dt], check=True)
            out[dt] = {}
            for f in sorted(os.listdir(sub)):
                with open(os.path.join(sub, f)) as fh:
                    out[dt][f[:-5]] = json.load(fh)
    return out


def _for_rank(graph, rank, group_name):
    """mkring's graph as rank `rank` runs it, its group "tp" named as the
    live c10d group."""
    g = json.loads(json.dumps(graph).replace('"tp"', json.dumps(group_name)))
    g["rank"] = rank
    return g


def _inputs(gm, seed):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(n.meta["val"].shape, generator=gen).to(n.meta["val"].dtype)
            for n in gm.graph.nodes if n.op == "placeholder"]


def _rel(a, b):
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def _mkring_worker(rank, world, graphs, compile_, corrupt):
    if corrupt:  # ag_ring's rank_roll rolled as on rank 0: must be caught
        orig = rewrite._roll
        rewrite._roll = lambda k, s, shape, x: orig(k, (s + rank) % k, shape, x)
    name = dist.group.WORLD.group_name
    res = {}
    for dt, gs in graphs.items():
        run = {n: schedgraph.to_fx(_for_rank(g, rank, name)) for n, g in gs.items()}
        ag_in, rs_in = _inputs(run["ag_ref"], rank), _inputs(run["rs_ref"], rank)
        ag, rs = run["ag_ring"](*ag_in)[0], run["rs_ring"](*rs_in)[0]
        r = {"ag_bitwise": torch.equal(ag, run["ag_ref"](*ag_in)[0]),
             "rs_rel": _rel(rs, run["rs_ref"](*rs_in)[0])}
        # part: 'one' is [[k-1, 0]], 'back' the ring i -> i-1; x of rank s is seeded s
        xs = [_inputs(run["part"], s)[0] for s in range(world)]
        one, back = run["part"](xs[rank])
        r["part_one"] = torch.equal(one, xs[world - 1] if rank == 0 else torch.zeros_like(one))
        r["part_back"] = torch.equal(back, xs[(rank + 1) % world])
        r["ops"] = sorted({str(n.target) for n in run["ag_ring"].graph.nodes
                           if n.op == "call_function"})
        if compile_:
            torch._dynamo.reset()
            r["compiled_bitwise"] = all(
                all(torch.equal(a, b) for a, b in zip(run[n](*x), torch.compile(run[n])(*x)))
                for n, x in (("ag_ring", ag_in), ("rs_ring", rs_in), ("part", [xs[rank]])))
        res[dt] = r
    return res


@unittest.skipUnless(MKRING, "tests/runtime/mkring not found (set SCHEDGRAPH_MKRING)")
class MkringGraphs(unittest.TestCase):
    def check(self, world, compile_):
        res = gloo.spawn(_mkring_worker, world, _graphs(world), compile_, False)
        for rank, by_dt in enumerate(res):
            for dt, r in by_dt.items():
                with self.subTest(world=world, rank=rank, dtype=dt):
                    self.assertTrue(r["ag_bitwise"])
                    self.assertLess(r["rs_rel"], 1e-5)
                    self.assertTrue(r["part_one"])
                    self.assertTrue(r["part_back"])
                    self.assertIn("_c10d_functional.all_to_all_single.default", r["ops"])
                    self.assertNotIn("_c10d_functional.all_gather_into_tensor.default", r["ops"])
                    if compile_:
                        self.assertTrue(r["compiled_bitwise"])

    def test_rings_of_2_compute_the_reference_values_eager_and_compiled(self):
        self.check(2, compile_=True)

    def test_rings_of_4_compute_the_reference_values(self):
        self.check(4, compile_=False)

    def test_a_rank_roll_that_ignores_the_rank_changes_the_values(self):
        res = gloo.spawn(_mkring_worker, 2, _graphs(2), False, True)
        self.assertTrue(res[0]["float32"]["ag_bitwise"])  # rank 0 rolls by 0 either way
        self.assertFalse(res[1]["float32"]["ag_bitwise"])


def _trace(kind, group, k):
    """make_fx (fake) of all_gather -> mm ('ag') or mm -> reduce_scatter
    ('rs') over `group`, with mkring's shapes."""
    from torch.fx.experimental.proxy_tensor import make_fx

    c10d, name = torch.ops._c10d_functional, group.group_name
    if kind == "ag":
        def f(x, w):
            return [c10d.wait_tensor(c10d.all_gather_into_tensor(x, k, name)) @ w]
        shapes = [(3, 8), (8, 5)]
    else:
        def f(a, w2):
            return [c10d.wait_tensor(c10d.reduce_scatter_tensor(a @ w2, "sum", k, name))]
        shapes = [(2 * k, 6), (6, 4)]
    return make_fx(f, tracing_mode="fake")(*[torch.empty(s) for s in shapes])


def splice(exported, ring, replaces):
    """The final graph schedgraph's decomposition would write for `exported`
    (a traced ag or rs graph): its placeholders, the call_function nodes of
    mkring's `ring` (placeholders renamed to exported's, nodes prefixed
    'sg_'), the last of them replacing the nodes whose targets end with
    `replaces`, and the output reading it."""
    ph = [n["name"] for n in exported["nodes"] if n["op"] == "placeholder"]
    rph = [n["name"] for n in ring["nodes"] if n["op"] == "placeholder"]
    names = dict(zip(rph, ph))
    calls = [n for n in ring["nodes"] if n["op"] == "call_function"]
    names.update({n["name"]: "sg_" + n["name"] for n in calls})

    def ren(v):
        if isinstance(v, dict) and set(v) == {"node"}:
            return {"node": names[v["node"]]}
        if isinstance(v, list):
            return [ren(x) for x in v]
        if isinstance(v, dict):
            return {k: ren(x) for k, x in v.items()}
        return v

    nodes = [n for n in exported["nodes"] if n["op"] == "placeholder"]
    for n in calls:
        nodes.append(dict(n, name=names[n["name"]], args=ren(n["args"]), kwargs=ren(n["kwargs"])))
    gone = [n["name"] for n in exported["nodes"] if n["target"].endswith(replaces)]
    nodes[-1]["kwargs"]["schedgraph_replaces"] = gone
    out = copy.deepcopy(exported["nodes"][-1])
    out["args"] = [[{"node": nodes[-1]["name"]}]]
    final = dict(exported, nodes=nodes + [out])
    return final


def _apply_worker(rank, world, graphs):
    name = dist.group.WORLD.group_name
    res = {}
    for kind, replaces in (("ag", ("all_gather_into_tensor.default", "mm.default")),
                           ("rs", ("reduce_scatter_tensor.default", "mm.default"))):
        gm = _trace(kind, dist.group.WORLD, world)
        inputs = _inputs(gm, rank)
        ref = gm(*inputs)[0]
        exported = schedgraph.to_graph_json(gm)
        ring = _for_rank(graphs["float32"][kind + "_ring"], rank, name)
        schedgraph.apply(gm, splice(exported, ring, replaces), exported)
        out = gm(*inputs)[0]
        torch._dynamo.reset()
        compiled = torch.compile(gm)(*inputs)[0]
        res[kind] = {"bitwise": torch.equal(out, ref), "rel": _rel(out, ref),
                     "compiled_bitwise": torch.equal(compiled, out),
                     "removed": sorted(gm.meta["schedgraph"]["removed"]),
                     "replaces": [n.meta["schedgraph_replaces"] for n in gm.graph.nodes
                                  if "schedgraph_replaces" in n.meta],
                     "transport": sorted({n.meta["schedgraph_transport"] for n in gm.graph.nodes
                                          if "schedgraph_transport" in n.meta})}
    return res


@unittest.skipUnless(MKRING, "tests/runtime/mkring not found (set SCHEDGRAPH_MKRING)")
class AppliedRings(unittest.TestCase):
    def test_traced_graphs_with_a_ring_applied_keep_their_values(self):
        for rank, res in enumerate(gloo.spawn(_apply_worker, 2, _graphs(2))):
            with self.subTest(rank=rank):
                self.assertTrue(res["ag"]["bitwise"])
                self.assertLess(res["rs"]["rel"], 1e-5)
                for kind in ("ag", "rs"):
                    self.assertTrue(res[kind]["compiled_bitwise"], kind)
                    self.assertEqual(len(res[kind]["removed"]), 3)  # collective, wait, mm
                    self.assertEqual(len(res[kind]["replaces"]), 1)
                self.assertEqual(res["ag"]["transport"], ["ce"])
                self.assertEqual(res["rs"]["transport"], ["nccl"])


def _decomposes():
    """Whether this schedgraph has the decomposition pass (--decompose)."""
    try:
        exe = schedgraph.find_binary()
    except schedgraph.SchedgraphError:
        return False
    return "--decompose" in subprocess.run([exe, "--help"], capture_output=True,
                                           text=True).stdout


A2A = torch.ops._c10d_functional.all_to_all_single.default


def _step_worker(rank, world, cases):
    """The TP llama-like step (schedgraph.testing, sequence parallel over
    WORLD) traced, run, scheduled with each (mode, dtype) of `cases`
    decomposed, and run again."""
    from schedgraph import testing

    res = {}
    for mode, dtype in cases:
        cfg = testing.Config(layers=1, tp=world, dtype=getattr(torch, dtype))
        gm = testing.trace(cfg, tp_group=dist.group.WORLD)
        inputs = cfg.inputs(seed=rank)
        ref = gm(*inputs)
        schedgraph.schedule(gm, options=["--decompose", mode])
        out = gm(*inputs)
        res[f"{mode}/{dtype}"] = {
            "p2p": sum(n.target is A2A for n in gm.graph.nodes),
            "bitwise": [torch.equal(a, b) for a, b in zip(ref, out)],
            "rel": max(_rel(a, b) for a, b in zip(out, ref))}
    return res


class _CountingPass(schedgraph.hooks.SchedgraphPass):
    def __call__(self, graph):
        super().__call__(graph)
        self.calls[-1]["p2p"] = sum(n.target is A2A for n in graph.nodes)


def _compiled_step_worker(rank, world):
    import torch._inductor.config as icfg
    from schedgraph import testing

    cfg = testing.Config(layers=1, tp=world, dtype=torch.float32)
    gm = testing.trace(cfg, tp_group=dist.group.WORLD)
    inputs = cfg.inputs(seed=rank)
    ref = gm(*inputs)
    p = _CountingPass(strict=True, options=["--decompose", "all"])
    with icfg.patch(post_grad_custom_post_pass=p, fx_graph_cache=False):
        out = torch.compile(gm)(*inputs)
    return {"calls": p.calls, "rel": max(_rel(a, b) for a, b in zip(out, ref))}


def _all_reduce_worker(rank, world):
    """wait(all_reduce(a @ b)) traced, then scheduled with every site
    decomposed (no buckets, which could merge the chunks again)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    c10d, name = torch.ops._c10d_functional, dist.group.WORLD.group_name

    def f(a, b):
        return [c10d.wait_tensor(c10d.all_reduce(a @ b, "sum", name))]

    gm = make_fx(f, tracing_mode="fake")(torch.empty(64, 32), torch.empty(32, 16))
    inputs = _inputs(gm, rank)
    ref = gm(*inputs)[0]
    schedgraph.schedule(gm, bucket=False, options=["--decompose", "all"])
    return {"all_reduces": sum(n.target is c10d.all_reduce.default for n in gm.graph.nodes),
            "bitwise": torch.equal(gm(*inputs)[0], ref)}


@unittest.skipUnless(_decomposes(), "this schedgraph has no decomposition pass (--decompose)")
class DecomposedStep(unittest.TestCase):
    """schedule() with schedgraph's decomposition on the TP step, run on
    gloo: all_gather -> mm rings alone (--decompose all-gather) give the
    traced graph's bits; every site decomposed (--decompose all) is within
    rounding: the ring adds partial sums in ring order, rounding after each
    add (docs/ops.md: float32 within 1e-5; bfloat16 by up to (k - 1) x 2^-8,
    here after the step's whole backward)."""

    def check(self, world, cases, bitwise, bounds):
        for rank, res in enumerate(gloo.spawn(_step_worker, world, cases)):
            for case, r in res.items():
                with self.subTest(world=world, rank=rank, case=case):
                    self.assertGreater(r["p2p"], 0)
                    if case in bitwise:
                        self.assertTrue(all(r["bitwise"]), r)
                    else:
                        self.assertLess(r["rel"], bounds[case])

    def test_two_ranks(self):
        # k = 2: one add per ring, rounded as the reduce_scatter rounds
        self.check(2, [("all-gather", "float32"), ("all", "bfloat16")],
                   {"all-gather/float32", "all/bfloat16"}, {})

    def test_four_ranks(self):
        self.check(4, [("all-gather", "bfloat16"), ("all", "float32"), ("all", "bfloat16")],
                   {"all-gather/bfloat16"},
                   {"all/float32": 1e-5, "all/bfloat16": 3 * 2 ** -8})

    def test_mm_all_reduce_in_row_chunks_keeps_the_bits(self):
        # each element is still one sum over the ranks, whatever the chunk
        for r in gloo.spawn(_all_reduce_worker, 2):
            self.assertGreater(r["all_reduces"], 1)
            self.assertTrue(r["bitwise"])

    def test_inductor_compiles_the_decomposed_step(self):
        for r in gloo.spawn(_compiled_step_worker, 2):
            self.assertEqual(len(r["calls"]), 1, r)
            self.assertGreater(r["calls"][0]["p2p"], 0)
            self.assertLess(r["rel"], 1e-5)  # Inductor's fusions against eager


class Lowerings(unittest.TestCase):
    """One process, no group: what the lowerings build."""

    def graph(self, node):
        return {"format": "schedgraph.graph", "version": 1, "world_size": 4, "rank": 2,
                "groups": {"g": {"ranks": [0, 1, 2, 3]}},
                "nodes": [{"name": "x", "op": "placeholder", "target": "x", "args": [],
                           "kwargs": {}, "meta": {"shape": [8, 3], "dtype": "float32"}},
                          node, {"name": "output", "op": "output", "target": "output",
                                 "args": [[{"node": node["name"]}]], "kwargs": {}}]}

    def test_rank_roll_moves_blocks_by_the_group_rank(self):
        for shift, sign in ((0, -1), (-1, 1), (3, 1)):
            with self.subTest(shift=shift, sign=sign):
                gm = schedgraph.to_fx(self.graph(
                    {"name": "rr", "op": "call_function", "target": "schedgraph.rank_roll",
                     "args": [{"node": "x"}, shift, sign, "g"], "kwargs": {},
                     "meta": {"shape": [8, 3], "dtype": "float32"}}))
                x = torch.arange(24.0).view(8, 3)
                out = gm(x)[0].view(4, 2, 3)
                for b in range(4):  # docs/ops.md: block b is input block (b + SHIFT + SIGN r) mod k
                    self.assertTrue(torch.equal(out[b], x.view(4, 2, 3)[(b + shift + sign * 2) % 4]))

    def test_a_pair_outside_the_group_is_refused_naming_the_node(self):
        g = self.graph({"name": "p", "op": "call_function",
                        "target": "schedgraph.collective_permute",
                        "args": [{"node": "x"}, [[0, 4]], "g"], "kwargs": {},
                        "meta": {"shape": [8, 3], "dtype": "float32"}})
        with self.assertRaisesRegex(schedgraph.SchedgraphError,
                                    r"node 'p': .*args\[1\]\[0\]: pair \[0, 4\] is outside"):
            schedgraph.to_fx(g)

    def test_a_rank_outside_the_group_is_refused(self):
        g = self.graph({"name": "rr", "op": "call_function", "target": "schedgraph.rank_roll",
                        "args": [{"node": "x"}, 0, 1, "g"], "kwargs": {},
                        "meta": {"shape": [8, 3], "dtype": "float32"}})
        g["rank"] = 5
        with self.assertRaisesRegex(schedgraph.SchedgraphError,
                                    r"node 'rr': .*group 'g': rank 5 is not among"):
            schedgraph.to_fx(g)


if __name__ == "__main__":
    unittest.main()

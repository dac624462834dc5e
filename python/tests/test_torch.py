"""Tests that need torch (CPU is enough): the exporter against the committed
samples and its refusals, schedule() on fake process groups, values of
scheduled + bucketed steps on a 2-process gloo group, and the Inductor hook."""
import json
import os
import sys
import tempfile
import unittest

import torch
import torch.distributed as dist
from torch.fx.experimental.proxy_tensor import make_fx

import gloo
import schedgraph
from schedgraph import rewrite, testing
from schedgraph.exporter import ExportError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")
sys.path.insert(0, os.path.join(ROOT, "python", "tools"))
import export_samples  # noqa: E402


def funcol_wait(t):
    return torch.ops._c10d_functional.wait_tensor(t)


def fake_world(world):
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)


def tearDownModule():
    if dist.is_initialized():
        dist.destroy_process_group()


class Export(unittest.TestCase):
    @unittest.skipUnless(export_samples.same_torch(),
                         f"tests/data are PyTorch {export_samples.TORCH}'s traces; "
                         f"this is {torch.__version__}")
    def test_samples_regenerate_byte_for_byte(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name in export_samples.CASES:
                with self.subTest(name):
                    gm, world, extra = export_samples.trace_case(name)
                    path = os.path.join(tmp, name + ".json")
                    schedgraph.export(gm, path, world_size=world, extra=extra)
                    with open(path) as a, open(os.path.join(DATA, name + ".json")) as b:
                        self.assertTrue(a.read() == b.read(), name)

    def test_groups_argument_names_ranks_and_partition(self):
        fake_world(4)
        gm = testing.trace(testing.Config(layers=1, dp=4), dp_group=dist.group.WORLD)
        g = schedgraph.to_graph_json(gm, groups={"0": {"ranks": [0, 1, 2, 3],
                                                       "partition": [[0, 1, 2, 3]]}})
        self.assertEqual(g["groups"], {"0": {"ranks": [0, 1, 2, 3], "partition": [[0, 1, 2, 3]]}})
        self.assertEqual((g["world_size"], g["rank"]), (4, 0))
        dist.destroy_process_group()
        with self.assertRaisesRegex(ExportError, "node 'all_gather_into_tensor': group '0' is "
                                                 "not a live process group; pass groups="):
            schedgraph.to_graph_json(gm, world_size=4)
        g = schedgraph.to_graph_json(gm, world_size=4, groups={"0": [0, 1, 2, 3]})
        self.assertEqual(g["groups"], {"0": {"ranks": [0, 1, 2, 3]}})

    def test_refusals_name_the_node(self):
        def mutate(x):
            y = x * 2
            y.add_(1)
            return y

        gm = make_fx(mutate)(torch.ones(4))
        with self.assertRaisesRegex(ExportError, "node 'add_': target aten.add_.Tensor mutates"):
            schedgraph.to_graph_json(gm)

        class M(torch.nn.Module):
            def forward(self, x):
                return x.relu()

        from torch.fx.passes.shape_prop import ShapeProp

        gm = torch.fx.symbolic_trace(M())
        with self.assertRaisesRegex(ExportError, "node 'x': no meta"):
            schedgraph.to_graph_json(gm)
        ShapeProp(gm).propagate(torch.ones(3))  # tensor_meta: the placeholder passes
        with self.assertRaisesRegex(ExportError, "node 'relu': op 'call_method'"):
            schedgraph.to_graph_json(gm)

        gm = torch.fx.symbolic_trace(lambda x: torch.nn.functional.relu(x))
        ShapeProp(gm).propagate(torch.ones(3))
        with self.assertRaisesRegex(ExportError, "node 'relu': .*not an aten or c10d op"):
            schedgraph.to_graph_json(gm)

        gm = make_fx(lambda x: x * 2, tracing_mode="symbolic")(torch.ones(4, 3))
        with self.assertRaisesRegex(ExportError, "node 'x_1': meta: symbolic shape"):
            schedgraph.to_graph_json(gm)

        gm = make_fx(lambda x: x * 2)(torch.ones(4, dtype=torch.complex64))
        with self.assertRaisesRegex(ExportError, "node 'x_1': meta: dtype torch.complex64"):
            schedgraph.to_graph_json(gm)

        fake_world(2)
        gm = make_fx(lambda x: torch.ops._c10d_functional.all_gather_into_tensor_out(
            x, 2, "0", out=torch.empty(8)))(torch.ones(4))
        with self.assertRaisesRegex(ExportError, "all_gather_into_tensor_out.*models only"):
            schedgraph.to_graph_json(gm)

    def test_coalesced_collectives_are_exported_as_they_are(self):
        fake_world(2)
        gm = make_fx(lambda x, y: [funcol_wait(t) for t in
                                   torch.ops._c10d_functional.all_gather_into_tensor_coalesced(
                                       [x, y], 2, "0")])(torch.ones(4), torch.ones(2, 3))
        g = schedgraph.to_graph_json(gm)
        c = next(n for n in g["nodes"] if n["target"].endswith("_coalesced.default"))
        self.assertEqual([len(c["args"][0]), c["args"][1]], [2, 2])
        self.assertEqual([m["shape"] for m in c["meta"]["tuple"]], [[8], [4, 3]])
        items = [n for n in g["nodes"] if n["target"] == "<built-in function getitem>"]
        self.assertEqual([n["args"] for n in items], [[{"node": c["name"]}, 0],
                                                      [{"node": c["name"]}, 1]])


class Schedule(unittest.TestCase):
    def setUp(self):
        fake_world(2)

    def test_buckets_become_c10d_collectives_over_packed_inputs(self):
        gm = testing.trace(testing.Config(dp=2), dp_group=dist.group.WORLD)
        n_colls = sum("all_gather_into_tensor" in str(n.target) for n in gm.graph.nodes)
        schedgraph.schedule(gm)
        info = gm.meta["schedgraph"]
        self.assertGreater(len(info["buckets"]), 0)
        colls = [n for n in gm.graph.nodes
                 if n.target is torch.ops._c10d_functional.all_gather_into_tensor.default]
        self.assertLess(len(colls), n_colls)
        bucketed = [n for n in colls if "schedgraph_bucket" in n.meta]
        self.assertTrue(bucketed)
        for n in bucketed:
            self.assertIs(n.args[0].target, torch.ops.aten.cat.default)
        for n in gm.graph.nodes:
            if n.op != "output":
                self.assertIn("val", n.meta, n.name)
        names = [n.name for n in gm.graph.nodes]
        first_compute = min(i for i, n in enumerate(gm.graph.nodes) if n.op == "call_function")
        self.assertTrue(all(n.op == "placeholder" for n in list(gm.graph.nodes)[:first_compute]))
        self.assertEqual(len(names), len(set(names)))

    def test_grouped_buckets_become_coalesced_collectives(self):
        gm = testing.trace(testing.Config(dp=2), dp_group=dist.group.WORLD)
        schedgraph.schedule(gm, options=["--bucket-lowering", "grouped"])
        info = gm.meta["schedgraph"]
        self.assertGreater(len(info["buckets"]), 0)
        colls = [n for n in gm.graph.nodes if n.target in (
            torch.ops._c10d_functional.all_gather_into_tensor_coalesced.default,
            torch.ops._c10d_functional.reduce_scatter_tensor_coalesced.default)]
        self.assertTrue(colls)
        for c in colls:
            self.assertIn("schedgraph_bucket", c.meta)
            self.assertEqual(len(c.args[0]), len(c.meta["val"]))
            for u in c.users:  # each element through getitem, then its wait
                self.assertEqual(str(u.target), "<built-in function getitem>")
                self.assertEqual([str(w.target) for w in u.users],
                                 ["_c10d_functional.wait_tensor.default"])
        self.assertFalse(any(str(n.target).startswith("aten.cat") for n in gm.graph.nodes))
        gm.graph.lint()

    def test_no_reorder_no_bucket_leaves_the_code_unchanged(self):
        gm = testing.trace(testing.Config(dp=2), dp_group=dist.group.WORLD)
        before = gm.code
        schedgraph.schedule(gm, reorder=False, bucket=False)
        self.assertEqual(gm.code, before)

    def test_a_graph_is_rewritten_in_place(self):
        gm = testing.trace(testing.Config(layers=1, dp=2), dp_group=dist.group.WORLD)
        graph = gm.graph
        self.assertIs(schedgraph.schedule(graph), graph)
        self.assertTrue(any("schedgraph_bucket" in n.meta for n in graph.nodes))

    def test_a_real_mode_trace_gets_fake_values_for_new_nodes(self):
        cfg = testing.Config(layers=1, dp=2, dtype=torch.float32)
        gm = make_fx(testing.Step(cfg, dist.group.WORLD))(
            *[t.requires_grad_(i > 0) for i, t in enumerate(cfg.inputs())])
        schedgraph.schedule(gm)
        new = [n for n in gm.graph.nodes if "schedgraph_bucket" in n.meta]
        self.assertTrue(new)
        self.assertTrue(all(isinstance(n.meta["val"], torch.Tensor) for n in new))

    def test_aot_autograd_forward_and_backward_graphs(self):
        import torch.distributed._functional_collectives as funcol
        from functorch.compile import aot_function, make_boxed_func

        graphs = []

        def capture(gm, example_inputs):
            graphs.append(gm)
            return make_boxed_func(gm.forward)

        def f(x, w1, w2):
            w = [funcol.all_gather_tensor_autograd(v, 0, dist.group.WORLD) for v in (w1, w2)]
            return (torch.relu(x @ w[0].t()) @ w[1].t()).sum()

        ws = [torch.randn(64, 128, requires_grad=True), torch.randn(64, 128, requires_grad=True)]
        aot_function(f, fw_compiler=capture, bw_compiler=capture)(torch.randn(32, 128), *ws).backward()
        self.assertEqual(len(graphs), 2)
        for gm in graphs:
            g = schedgraph.to_graph_json(gm)
            self.assertTrue(any(n["target"].startswith("_c10d_functional") for n in g["nodes"]))
            schedgraph.schedule(gm)
            gm.graph.lint()

    def test_a_failing_lowering_leaves_the_graph_as_it_was(self):
        gm = testing.trace(testing.Config(layers=1, dp=2), dp_group=dist.group.WORLD)
        before = gm.code

        def broken(ctx, node, args, kwargs):
            raise RuntimeError("no such op here")

        old = rewrite.LOWERINGS[rewrite.BUCKET_UNPACK]
        rewrite.LOWERINGS[rewrite.BUCKET_UNPACK] = broken
        try:
            with self.assertRaisesRegex(schedgraph.SchedgraphError,
                                        "node 'bucket_unpack_.*schedgraph.bucket_unpack.*no such"):
                schedgraph.schedule(gm)
        finally:
            rewrite.LOWERINGS[rewrite.BUCKET_UNPACK] = old
        gm.recompile()
        self.assertEqual(gm.code, before)

    def test_workdir_keeps_the_files(self):
        gm = testing.trace(testing.Config(layers=1, dp=2), dp_group=dist.group.WORLD)
        with tempfile.TemporaryDirectory() as d:
            schedgraph.schedule(gm, workdir=d)
            self.assertEqual(sorted(os.listdir(d)), ["final.json", "graph.json", "report.json"])
            with open(os.path.join(d, "report.json")) as f:
                self.assertEqual(json.load(f)["format"], "schedgraph.report")


CASES = {  # name: (dp, tp, dtype, schedgraph options)
    "fsdp2_f32": (2, 1, "float32", ()),
    "fsdp2_bf16": (2, 1, "bfloat16", ()),
    "tp2_f32": (1, 2, "float32", ()),
    "fsdp2_f32_grouped": (2, 1, "float32", ("--bucket-lowering", "grouped")),
}


def _values_worker(rank, world, corrupt):
    if corrupt:  # all_gather members unpacked as contiguous slices: must be caught
        orig = rewrite._unpack
        rewrite._unpack = lambda k, off, numel, shape, flat: orig(1, off, numel * k, shape, flat)
    res = {}
    for name, (dp, tp, dtype, options) in CASES.items():
        if corrupt and name != "fsdp2_f32":
            continue
        cfg = testing.Config(dp=dp, tp=tp, dtype=getattr(torch, dtype))
        grp = dist.group.WORLD
        gm = testing.trace(cfg, dp_group=grp if dp > 1 else None, tp_group=grp if tp > 1 else None)
        inputs = cfg.inputs(seed=rank)
        ref = gm(*inputs)
        schedgraph.schedule(gm, options=options)
        out = gm(*inputs)
        res[name] = {"equal": [bool(torch.equal(a, b)) for a, b in zip(ref, out)],
                     "buckets": len(gm.meta["schedgraph"]["buckets"])}
    return res


class Values(unittest.TestCase):
    """Two CPU processes over gloo: the scheduled, bucketed step computes
    the very same bits as the traced one."""

    def test_scheduled_and_bucketed_steps_compute_the_same_values(self):
        for rank, res in enumerate(gloo.spawn(_values_worker, 2, False)):
            for name, r in res.items():
                with self.subTest(rank=rank, case=name):
                    self.assertTrue(all(r["equal"]), r)
            self.assertGreater(res["fsdp2_f32"]["buckets"], 0)
            self.assertGreater(res["fsdp2_bf16"]["buckets"], 0)
            self.assertGreater(res["fsdp2_f32_grouped"]["buckets"], 0)

    def test_a_wrong_bucket_layout_changes_the_values(self):
        for res in gloo.spawn(_values_worker, 2, True):
            self.assertFalse(all(res["fsdp2_f32"]["equal"]))


def _hook_worker(rank, world):
    import torch._inductor.config as icfg

    cfg = testing.Config(layers=1, dp=world, dtype=torch.float32)
    gm = testing.trace(cfg, dp_group=dist.group.WORLD)
    inputs = cfg.inputs(seed=rank)
    ref = gm(*inputs)
    p = schedgraph.InductorPass(strict=True)
    with icfg.patch(post_grad_custom_post_pass=p, fx_graph_cache=False):
        out = torch.compile(gm)(*inputs)
    return {"calls": p.calls, "maxdiff": max(float((a - b).abs().max()) for a, b in zip(ref, out)),
            "uuid": p.uuid(), "uuid_stable": p.uuid() == schedgraph.InductorPass(strict=True).uuid()}


class InductorHook(unittest.TestCase):
    def test_compiled_step_runs_the_pass_and_keeps_its_values(self):
        res = gloo.spawn(_hook_worker, 2)
        for r in res:
            self.assertEqual(len(r["calls"]), 1, r)
            self.assertGreater(r["calls"][0]["nodes_after"], r["calls"][0]["nodes"])
            self.assertLess(r["maxdiff"], 1e-5)
            self.assertTrue(r["uuid_stable"])
        # the pass may make a graph rank-specific: no cache key is shared across ranks
        self.assertNotEqual(res[0]["uuid"], res[1]["uuid"])


class Scripts(unittest.TestCase):
    """The documented examples and the device script's CPU dry run."""

    def run_py(self, args, env=None, timeout=600):
        import subprocess

        e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), **(env or {}))
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([sys.executable] + args, cwd=d, env=e, capture_output=True,
                               text=True, timeout=timeout)
            self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
            return p.stdout, sorted(os.listdir(d))

    def test_examples_run_as_documented(self):
        docs = []
        for f in ("README.md", os.path.join("docs", "python.md")):
            with open(os.path.join(ROOT, f)) as fh:
                docs.append(fh.read())
        ex = os.path.join(ROOT, "python", "examples")
        for name in sorted(os.listdir(ex)):
            with self.subTest(name):
                with open(os.path.join(ex, name)) as fh:
                    text = fh.read()
                for d in docs:
                    self.assertIn(text, d)
                # a cached compilation would not call the pass again
                out, files = self.run_py([os.path.join(ex, name)],
                                         env={"TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"})
                if name == "make_fx_step.py":
                    self.assertIn("all_gather_into_tensor", out)
                    self.assertEqual(files, ["step.json"])
                else:
                    self.assertIn("'nodes_after'", out)

    def test_device_script_dry_run_on_cpu(self):
        with tempfile.TemporaryDirectory() as out:
            stdout, _ = self.run_py(
                [os.path.join(ROOT, "tools", "device", "torch_roundtrip.py")],
                env={"DEVICE": "cpu", "CASE": "1:256:688:4:256", "ITERS": "1", "WARM": "0",
                     "OUT": out})
            self.assertIn("round trip: passed", stdout)
            with open(os.path.join(out, "torch_roundtrip.json")) as f:
                rows = json.load(f)["rows"]
            got = {(r["phase"], r["variant"]) for r in rows}
            # the decomposition forced off and on, where the binary can
            forced = {("tp2fake", "sg_nd"), ("tp2fake", "sg_da"), ("w2tp", "sg_ag"),
                      ("w2tp", "sg_da")}
            self.assertEqual(got - forced,
                             {(p, v) for p in ("w1", "w2fake", "tp2fake")
                              for v in ("input", "sg", "sg_b")} | {("w2tp", "input"),
                                                                  ("w2tp", "sg")})
            import subprocess

            help_text = subprocess.run([schedgraph.find_binary(), "--help"],
                                       capture_output=True, text=True).stdout
            self.assertEqual(forced <= got, "--decompose" in help_text)
            da = [r for r in rows if r["variant"] in ("sg_da", "sg_ag")]
            self.assertTrue(all("p2p steps" in r["note"] for r in da), da)


if __name__ == "__main__":
    unittest.main()

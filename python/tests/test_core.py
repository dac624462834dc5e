"""Tests that need no torch: finding the binary, the --emit-graph contract
on the sample graphs, and the plan logic (plan.py) on plain data."""
import copy
import json
import os
import stat
import tempfile
import unittest
from unittest import mock

from schedgraph import binary, plan
from schedgraph.plan import PlanError, make_plan

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")
SAMPLES = ["w2_tiny_fsdp2_L2_h256", "w2_tiny_tp2_L2_h256", "w2_fsdp2_L2_h1024",
           "w2_tp2_L2_h1024", "dev_fsdp8_L2_h1024", "dev_fsdp2_tp4_L2_h1024"]
# What the torch side lowers: schedgraph's own ops and the c10d ops.
LOWERABLE = {"schedgraph.bucket_pack", "schedgraph.bucket_unpack",
             "schedgraph.collective_permute", "schedgraph.rank_roll",
             "_c10d_functional.all_gather_into_tensor.default",
             "_c10d_functional.reduce_scatter_tensor.default",
             "_c10d_functional.all_reduce.default", "_c10d_functional.wait_tensor.default",
             "_c10d_functional.all_gather_into_tensor_coalesced.default",
             "_c10d_functional.reduce_scatter_tensor_coalesced.default",
             "_c10d_functional.all_reduce_coalesced.default", "<built-in function getitem>",
             # the aten ops of the decomposition's forms (docs/decompose.md), which
             # the generic lowering builds by their schemas under torch
             "aten.mm.default", "aten.cat.default", "aten.slice.Tensor",
             "aten.add.Tensor", "aten.view.default"}
COALESCED = {"_c10d_functional.all_gather_into_tensor_coalesced.default",
             "_c10d_functional.reduce_scatter_tensor_coalesced.default",
             "_c10d_functional.all_reduce_coalesced.default"}


def load(name):
    with open(os.path.join(DATA, name + ".json")) as f:
        return json.load(f)


_finals = {}


def final_of(name):
    """schedgraph's --emit-graph output for a sample (cached per run)."""
    if name not in _finals:
        _finals[name] = binary.schedule_file(os.path.join(DATA, name + ".json"))
    return _finals[name]


def apply_to_json(exported, p):
    """Oracle: the plan carried out on the graph-format dicts (what
    rewrite.apply_plan does on an fx graph)."""
    orig = {n["name"]: n for n in exported["nodes"]}
    out = []
    for step in p.steps:
        if not step.keep:
            out.append(step.node)
            continue
        n = copy.deepcopy(orig[step.name])
        sub = p.subs.get(step.name, {})
        count = iter(range(1 << 30))

        def swap(v):
            if plan.is_ref(v):
                i = next(count)
                return {"node": sub.get(i, v["node"])}
            if isinstance(v, list):
                return [swap(x) for x in v]
            if isinstance(v, dict):
                return {k: swap(x) for k, x in v.items()}
            return v

        n["args"], n["kwargs"] = swap(n.get("args", [])), swap(n.get("kwargs", {}))
        out.append(n)
    return out


class BinaryLookup(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def fake_exe(self, sub):
        d = os.path.join(self.tmp.name, sub)
        os.makedirs(d)
        p = os.path.join(d, "schedgraph")
        with open(p, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(p, os.stat(p).st_mode | stat.S_IXUSR)
        return p

    def test_argument_wins_over_environment_and_path(self):
        arg, env, path = self.fake_exe("a"), self.fake_exe("e"), self.fake_exe("p")
        with mock.patch.dict(os.environ, {"SCHEDGRAPH": env, "PATH": os.path.dirname(path)}):
            self.assertEqual(binary.find_binary(arg), arg)
            self.assertEqual(binary.find_binary(), env)

    def test_path_is_used_without_environment(self):
        path = self.fake_exe("p")
        env = {k: v for k, v in os.environ.items() if k != "SCHEDGRAPH"}
        env["PATH"] = os.path.dirname(path)
        with mock.patch.dict(os.environ, env, clear=True):
            self.assertEqual(binary.find_binary(), path)

    def test_repository_build_is_the_last_resort(self):
        env = {k: v for k, v in os.environ.items() if k != "SCHEDGRAPH"}
        env["PATH"] = self.tmp.name
        with mock.patch.dict(os.environ, env, clear=True):
            cands = binary._repo_candidates()
            self.assertEqual(cands[0], os.path.join(ROOT, "build", "tools", "schedgraph",
                                                    "schedgraph"))
            built = [c for c in cands if os.access(c, os.X_OK)]
            if built:
                self.assertEqual(binary.find_binary(), built[0])
            else:
                with self.assertRaisesRegex(binary.SchedgraphError, "not found"):
                    binary.find_binary()

    def test_non_executable_is_refused_naming_it(self):
        p = os.path.join(self.tmp.name, "nothing")
        with self.assertRaisesRegex(binary.SchedgraphError, "nothing.*binary="):
            binary.find_binary(p)
        with mock.patch.dict(os.environ, {"SCHEDGRAPH": p}):
            with self.assertRaisesRegex(binary.SchedgraphError, r"\$SCHEDGRAPH="):
                binary.find_binary()

    def test_schedgraph_errors_come_back_with_its_message(self):
        bad = os.path.join(self.tmp.name, "bad.json")
        with open(bad, "w") as f:
            f.write('{"format": "torch.fx"}')
        with self.assertRaisesRegex(binary.SchedgraphError, "bad.json: .*format"):
            binary.schedule_file(bad)

    def test_option_args(self):
        self.assertEqual(binary.option_args(reorder=False, bucket=False, cluster="h100-sxm",
                                            bucket_cap="64M", extra=["--prefetch-limit", 2]),
                         ["--no-reorder", "--no-bucket", "--cluster", "h100-sxm",
                          "--bucket-cap", "64M", "--prefetch-limit", "2"])


class EmitGraphContract(unittest.TestCase):
    """What rewrite.py relies on in schedgraph's --emit-graph output."""

    def test_final_graph_keeps_the_header_and_adds_only_lowerable_nodes(self):
        for name in SAMPLES:
            with self.subTest(name):
                g, f = load(name), final_of(name)
                self.assertEqual((f["format"], f["version"], f["world_size"]),
                                 (g["format"], g["version"], g["world_size"]))
                self.assertEqual({k: v["ranks"] for k, v in f["groups"].items()},
                                 {k: v["ranks"] for k, v in g["groups"].items()})
                names = [n["name"] for n in f["nodes"]]
                self.assertEqual(len(names), len(set(names)))
                self.assertEqual(f["nodes"][-1]["op"], "output")
                orig = {n["name"] for n in g["nodes"]}
                new = [n for n in f["nodes"] if n["name"] not in orig]
                self.assertTrue({n["target"] for n in new} <= LOWERABLE)

    def test_bucket_ops_have_the_documented_arguments(self):
        # docs/ops.md: pack [[refs], k, interleave]; the collective's
        # schedgraph_bucket lists its members; unpack [ref, k, offset, numel]
        # with offset + numel within one rank's segment
        seen = 0
        for name in SAMPLES:
            f = final_of(name)
            by = {n["name"]: n for n in f["nodes"]}
            for n in f["nodes"]:
                if n["target"] == "schedgraph.bucket_pack":
                    ins, k, inter = n["args"]
                    self.assertTrue(all(plan.is_ref(r) for r in ins) and k >= 1)
                    self.assertIsInstance(inter, bool)
                    seen += 1
                elif n["target"] == "schedgraph.bucket_unpack":
                    ref, k, off, numel = n["args"]
                    flat = by[ref["node"]]["meta"]["shape"][0]
                    self.assertLessEqual(off + numel, flat // k)
                    shape = n["meta"]["shape"]
                    count = 1
                    for s in shape:
                        count *= s
                    self.assertEqual(count, k * numel)
                elif plan.bucket_members(n) and n["target"] in COALESCED:  # grouped
                    self.assertEqual(len(n["args"][0]), len(plan.bucket_members(n)))
                elif plan.bucket_members(n):
                    self.assertEqual(by[n["args"][0]["node"]]["target"], "schedgraph.bucket_pack")
        self.assertGreater(seen, 0)

    def test_no_reorder_no_bucket_gives_back_the_input(self):
        g = load("w2_tiny_fsdp2_L2_h256")
        f = binary.schedule_file(os.path.join(DATA, "w2_tiny_fsdp2_L2_h256.json"),
                                 binary.option_args(reorder=False, bucket=False))
        self.assertEqual([n["name"] for n in f["nodes"]], [n["name"] for n in g["nodes"]])
        p = make_plan(g, f, LOWERABLE.__contains__)
        self.assertEqual((p.subs, p.removed, p.buckets), ({}, [], []))


class GroupedBuckets(unittest.TestCase):
    """Grouped buckets (--bucket-lowering grouped) in the --emit-graph output:
    PyTorch's own coalesced collectives, no new op for rewrite.py."""

    NAME = "w2_tiny_fsdp2_L2_h256"

    def final(self):
        return binary.schedule_file(os.path.join(DATA, self.NAME + ".json"),
                                    binary.option_args(extra=["--bucket-lowering", "grouped"]))

    def test_members_become_one_coalesced_call_whose_elements_their_waits_read(self):
        g, f = load(self.NAME), self.final()
        orig = {n["name"]: n for n in g["nodes"]}
        by = {n["name"]: n for n in f["nodes"]}
        calls = [n for n in f["nodes"] if n["target"] in COALESCED]
        self.assertGreater(len(calls), 0)
        self.assertFalse(any(n["target"].startswith("schedgraph.bucket_") for n in f["nodes"]))
        for c in calls:
            members = plan.bucket_members(c)
            ins = c["args"][0]
            self.assertEqual(len(ins), len(members))
            self.assertEqual(len(c["meta"]["tuple"]), len(members))
            for i, m in enumerate(members):
                # the member's input, in member order; the member is gone
                self.assertEqual(ins[i], orig[m]["args"][0])
                self.assertNotIn(m, by)
                self.assertEqual(c["meta"]["tuple"][i]["shape"], orig[m]["meta"]["shape"])
                # the member's wait is kept and reads element i through getitem
                wait = next(n for n in g["nodes"]
                            if n["target"] == "_c10d_functional.wait_tensor.default"
                            and plan.refs(n["args"]) == [m])
                item = by[plan.refs(by[wait["name"]]["args"])[0]]
                self.assertEqual(item["target"], "<built-in function getitem>")
                self.assertEqual(item["args"], [{"node": c["name"]}, i])

    def test_plan_reproduces_the_grouped_graph(self):
        g, f = load(self.NAME), self.final()
        p = make_plan(g, f, LOWERABLE.__contains__)
        members = [m for b in p.buckets for m in b["members"]]
        self.assertEqual(sorted(p.removed), sorted(members))  # the waits stay
        got = apply_to_json(g, p)
        self.assertEqual([n["name"] for n in got], [n["name"] for n in f["nodes"]])
        for a, b in zip(got, f["nodes"]):
            self.assertEqual(plan.refs([a["args"], a["kwargs"]]),
                             plan.refs([b["args"], b["kwargs"]]), a["name"])


class Plans(unittest.TestCase):
    def test_plan_reproduces_the_final_graph(self):
        for name in SAMPLES:
            with self.subTest(name):
                g, f = load(name), final_of(name)
                p = make_plan(g, f, LOWERABLE.__contains__)
                got = apply_to_json(g, p)
                self.assertEqual([n["name"] for n in got], [n["name"] for n in f["nodes"]])
                for a, b in zip(got, f["nodes"]):
                    va, vb = [a["args"], a["kwargs"]], [b["args"], b["kwargs"]]
                    self.assertEqual(plan.refs(va), plan.refs(vb), a["name"])
                    self.assertTrue(plan._same_shape(va, vb), a["name"])

    def test_bucket_members_and_their_waits_are_removed(self):
        g, f = load("w2_tiny_fsdp2_L2_h256"), final_of("w2_tiny_fsdp2_L2_h256")
        p = make_plan(g, f, LOWERABLE.__contains__)
        members = [m for b in p.buckets for m in b["members"]]
        self.assertGreater(len(p.buckets), 0)
        self.assertEqual(len(p.removed), 2 * len(members))
        waits = {n["name"]: plan.refs(n["args"])[0] for n in g["nodes"]
                 if n["target"] == "_c10d_functional.wait_tensor.default"}
        for r in p.removed:
            self.assertTrue(r in members or waits.get(r) in members, r)
        # every reference to a removed wait now names an unpack
        new = {s.name: s.node for s in p.steps if not s.keep}
        for sub in p.subs.values():
            for ref in sub.values():
                self.assertEqual(new[ref]["target"], "schedgraph.bucket_unpack")

    def test_refs_follow_args_then_kwargs_depth_first(self):
        v = [[{"node": "a"}, [1, {"node": "b"}], {"k": {"node": "c"}, "j": [{"node": "d"}]}],
             {"x": {"node": "e"}}]
        self.assertEqual(plan.refs(v), ["a", "b", "c", "d", "e"])
        self.assertFalse(plan.is_ref({"node": "a", "other": 1}))

    def small(self):
        g = load("w2_tiny_fsdp2_L2_h256")
        return g, binary.schedule_file(os.path.join(DATA, "w2_tiny_fsdp2_L2_h256.json"),
                                       binary.option_args(bucket=False))

    def test_numbers_may_come_back_reformatted(self):
        g, f = self.small()
        sdpa = next(n for n in f["nodes"] if n["target"].startswith("aten._scaled_dot_product"))
        sdpa["args"][5] = 0  # 0.0 printed as 0
        make_plan(g, f, LOWERABLE.__contains__)

    def test_a_changed_argument_is_refused_naming_the_node(self):
        g, f = self.small()
        next(n for n in f["nodes"] if n["name"] == "add")["args"][1] = 2e-06
        with self.assertRaisesRegex(PlanError, "node 'add': .*not a node reference"):
            make_plan(g, f, LOWERABLE.__contains__)

    def test_a_changed_target_is_refused(self):
        g, f = self.small()
        next(n for n in f["nodes"] if n["name"] == "mm")["target"] = "aten.bmm.default"
        with self.assertRaisesRegex(PlanError, "node 'mm': target changed"):
            make_plan(g, f, LOWERABLE.__contains__)

    def test_a_dropped_node_that_is_no_bucket_member_is_refused(self):
        g, f = self.small()
        g["nodes"].insert(1, {"name": "extra", "op": "placeholder", "target": "extra"})
        with self.assertRaisesRegex(PlanError, "node 'extra': schedgraph dropped it, but no new node replaces"):
            make_plan(g, f, LOWERABLE.__contains__)

    def test_a_node_listed_in_schedgraph_replaces_may_go(self):
        g, f = self.small()
        g["nodes"].insert(1, {"name": "extra", "op": "placeholder", "target": "extra"})
        f["nodes"].insert(-1, {"name": "new", "op": "call_function",
                               "target": "aten.clone.default", "args": [{"node": "mm"}],
                               "kwargs": {"schedgraph_replaces": ["extra"]}})
        p = make_plan(g, f, lambda t: True)
        self.assertEqual(p.removed, ["extra"])

    def test_a_new_target_that_cannot_be_lowered_is_refused(self):
        g, f = load("w2_tiny_fsdp2_L2_h256"), final_of("w2_tiny_fsdp2_L2_h256")
        with self.assertRaisesRegex(PlanError, "target 'schedgraph.bucket_pack'.*cannot express"):
            make_plan(g, f, lambda t: t != "schedgraph.bucket_pack")


class GroupRank(unittest.TestCase):
    """plan.group_rank: the rank the decomposition's ops are lowered for."""

    def graph(self, rank, group):
        return {"rank": rank, "groups": {"g": group}}

    def test_position_in_the_ascending_ranks(self):
        self.assertEqual(plan.group_rank(self.graph(5, {"ranks": [7, 5, 3]}), "g"), (1, 3))

    def test_the_partition_row_holding_the_rank(self):
        g = self.graph(6, {"ranks": [0, 4], "partition": [[0, 4], [1, 5], [2, 6], [3, 7]]})
        self.assertEqual(plan.group_rank(g, "g"), (1, 2))

    def test_a_rank_outside_the_group_and_an_unknown_group_are_refused(self):
        with self.assertRaisesRegex(PlanError, r"group 'g': rank 2 is not among its ranks \[0, 1\]"):
            plan.group_rank(self.graph(2, {"ranks": [0, 1]}), "g")
        with self.assertRaisesRegex(PlanError, "group 'h' is not in the graph's groups"):
            plan.group_rank(self.graph(0, {"ranks": [0, 1]}), "h")


if __name__ == "__main__":
    unittest.main()

"""tools/device/torch_roundtrip.py: run ON THE GPU MACHINE (one GPU; w2tp
needs two), from the repo root, through tools/device/torch-roundtrip.sh
(which sets the paths).

The PyTorch round trip of schedgraph on the llama-like step
(python/schedgraph/testing.py, the model of tests/data's samples), and
PyTorch running schedgraph's order against its own order and Inductor's.

Phase w1: a real NCCL group of one rank; the step traced with make_fx (fake
  tensors) with every weight all-gathered and every gradient reduce-scattered
  over that group (collectives of one rank: copies). Variants of the same
  graph, each an fx GraphModule run eagerly:
    input    the traced order (every collective right before its wait)
    sg       schedgraph's order (schedule(bucket=False))
    sg_b     schedgraph's order and buckets (schedule())
    peer     Inductor's schedule_overlap_bucketing, no bucketing
    peer_b   ... with its bucketing
  Values: every output of sg and sg_b against input's, bitwise; where not
  bitwise, the difference must stay within input's own run-to-run
  variation on that output (3 runs); `ok` says whether it did.
Phase w2fake: the same step traced on a fake process group of 2 ranks
  (the graph of tests/data/w2_fsdp2_L2_h1024.json at the default CASE), so
  schedgraph and Inductor schedule it for 2 ranks; run on this one GPU the
  fake collectives do nothing: a compute-only comparison of the orders and
  of the bucket copies (no values: gathered tensors are uninitialised).
Phase tp2fake: the step with tensor (sequence) parallelism over a fake
  group of 2 (tests/data/w2_tp2_L2_h1024.json at the default CASE), where
  schedgraph decomposes all_gather -> mm and mm -> reduce_scatter sites
  into rings (docs/ops.md) where its model predicts a gain: sg and sg_b
  run the graph as PyTorch lowers it (python/schedgraph/rewrite.py:
  all_to_all_single point-to-point steps, chunked mms, rank_roll copies;
  the note counts the steps), sg_nd without decomposition
  (--decompose off), sg_da with every site decomposed (--decompose all);
  those two when the binary has --decompose. Compute only, as w2fake: it
  prices the chunked GEMMs
  and the copies on this GPU. A ring needs 2 ranks, so values of the
  decomposed graph are checked on the CPU (python-torch tests on gloo), not
  here; w1's group of one rank has no ring.
Phase w2tp (two GPUs, else skipped; in the CPU dry run two gloo
  processes): the TP step in float32 over a real group of 2 (NCCL), one
  process per GPU: the traced graph against schedgraph's (no buckets)
  with its own choice of sites (sg), only all_gather -> mm sites
  decomposed (sg_ag) and every site (sg_da), the two when the binary has
  --decompose. Values of every output against the traced graph's (ok:
  within its run-to-run spread or 1e-5 relative, docs/ops.md; on the GPU a
  chunked GEMM need not give a whole one's bits), step times the slower
  rank's.
With COMPILE=1, phase w1 also times torch.compile of the input graph with
and without schedgraph.InductorPass (two compilations, minutes).

Timing: CUDA events around one call, WARM untimed calls first, median of
ITERS. Env: CASE=L:H:F:heads:S (default 2:1024:2816:8:2048), ITERS (20),
WARM (5), PHASES (w1,w2fake,tp2fake,w2tp), COMPILE (0), BUDGET_S (480: phases not
started past it are skipped), DEVICE (cuda; cpu runs the same logic on gloo
with wall-clock timing, for a dry run without a GPU). Writes
$OUT/torch_roundtrip.json; the table is printed last.
"""
import json
import os
import socket
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import schedgraph  # noqa: E402
from schedgraph import testing  # noqa: E402

T0 = time.time()
ITERS = int(os.environ.get("ITERS", "20"))
WARM = int(os.environ.get("WARM", "5"))
BUDGET = float(os.environ.get("BUDGET_S", "480"))
OUT = os.environ.get("OUT", "/tmp/sg-out")
DEV = os.environ.get("DEVICE", "cuda")
CUDA = DEV == "cuda"
rows = []
results = {"torch": torch.__version__, "case": os.environ.get("CASE", "2:1024:2816:8:2048"),
           "iters": ITERS, "warm": WARM}


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


def timeit(fn):
    for _ in range(WARM):
        fn()
    if CUDA:
        torch.cuda.synchronize()
    ts = []
    for _ in range(ITERS):
        if not CUDA:
            t = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t) * 1e6)
            continue
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1000.0)
    return round(statistics.median(ts), 1)


def config(dp, tp=1):
    L, H, F, heads, S = (int(v) for v in results["case"].split(":"))
    return testing.Config(layers=L, hidden=H, ffn=F, heads=heads, seq=S, dp=dp, tp=tp)


SG_VARIANTS = (("sg", {"bucket": False}), ("sg_b", {}))


def trace(cfg, group):
    """The step over `group`: FSDP (w1: a group of one, w2fake), or TP."""
    tp = cfg.tp > 1
    return testing.trace(cfg, dp_group=None if tp else group, tp_group=group if tp else None,
                         device=DEV)


def decomposed(gm):
    """The note's count of what the decomposition left in a scheduled graph."""
    p2p = sum(n.target is torch.ops._c10d_functional.all_to_all_single.default
              for n in gm.graph.nodes)
    return f", {p2p} p2p steps" if p2p else ""


def variants(cfg, group, sg=SG_VARIANTS):
    """name -> (GraphModule, note) for the orders of one traced graph: the
    input, schedgraph's (sg: name -> schedule() arguments), Inductor's."""
    from torch._inductor.fx_passes import overlap_scheduling as ovs

    out = {}
    gm = trace(cfg, group)
    out["input"] = (gm, f"{len(gm.graph.nodes)} nodes")
    for name, kw in sg:
        g = trace(cfg, group)
        t = time.time()
        schedgraph.schedule(g, **kw)
        rep = g.meta["schedgraph"]["report"]
        out[name] = (g, f"schedule {time.time() - t:.2f}s, {len(g.meta['schedgraph']['buckets'])} "
                        f"buckets{decomposed(g)}, predicted {rep['input']['step_us']:.0f}->"
                        f"{rep['scheduled']['step_us']:.0f} us")
    for name, b in (("peer", False), ("peer_b", True)):
        g = trace(cfg, group)
        t = time.time()
        try:
            ovs.schedule_overlap_bucketing(g, collective_bucketing=b)
            g.recompile()
            out[name] = (g, f"pass {time.time() - t:.2f}s")
        except Exception as e:  # keep the other variants
            results[f"{name}_error"] = repr(e)[:300]
            log(name, "failed:", repr(e)[:300])
    return out


def compare(ref_runs, out):
    """(bitwise outputs, outputs within run-to-run spread, total, max diff)."""
    ref = ref_runs[0]
    bitwise = within = 0
    maxdiff = 0.0
    for i, (a, b) in enumerate(zip(ref, out)):
        if torch.equal(a, b):
            bitwise += 1
            within += 1
            continue
        d = float((a.float() - b.float()).abs().max())
        spread = max(float((a.float() - r[i].float()).abs().max()) for r in ref_runs[1:])
        maxdiff = max(maxdiff, d)
        within += d <= spread
    return bitwise, within, len(ref), maxdiff


def phase_w1():
    if CUDA:
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1,
                                device_id=torch.device("cuda", 0))
    else:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    cfg = config(dp=1)
    inputs = cfg.inputs(device=DEV, seed=1)
    vs = variants(cfg, dist.group.WORLD)
    ref_runs = [[t.clone() for t in vs["input"][0](*inputs)] for _ in range(3)]
    for name, (gm, note) in vs.items():
        row = {"phase": "w1", "variant": name, "note": note}
        if name != "input":
            out = gm(*inputs)
            bw, within, n, md = compare(ref_runs, out)
            row.update(bitwise=f"{bw}/{n}", ok=within == n, maxdiff=md)
        row["step_us"] = timeit(lambda gm=gm: gm(*inputs))
        rows.append(row)
        log(row)
    if os.environ.get("COMPILE", "0") == "1" and time.time() - T0 < BUDGET:
        import torch._inductor.config as icfg
        gm = trace(cfg, dist.group.WORLD)
        for name, p in (("compiled", None), ("compiled_sg", schedgraph.InductorPass())):
            torch._dynamo.reset()
            with icfg.patch(post_grad_custom_post_pass=p, fx_graph_cache=False):
                t = time.time()
                cg = torch.compile(gm)
                out = cg(*inputs)
                note = f"compile {time.time() - t:.0f}s" + (f", pass calls {p.calls}" if p else "")
                bw, within, n, md = compare(ref_runs, out)
                row = {"phase": "w1", "variant": name, "note": note, "bitwise": f"{bw}/{n}",
                       "ok": None, "maxdiff": md, "step_us": timeit(lambda: cg(*inputs))}
            rows.append(row)
            log(row)
    dist.destroy_process_group()


def fake2(phase, cfg, sg=SG_VARIANTS):
    """Times the variants of cfg's step traced on a fake group of 2 ranks."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    inputs = cfg.inputs(device=DEV, seed=1)
    for name, (gm, note) in variants(cfg, dist.group.WORLD, sg).items():
        row = {"phase": phase, "variant": name, "note": note,
               "step_us": timeit(lambda gm=gm: gm(*inputs))}
        rows.append(row)
        log(row)
    dist.destroy_process_group()


def phase_w2fake():
    fake2("w2fake", config(dp=2))


def phase_tp2fake():
    sg = SG_VARIANTS
    if _has_decompose():
        sg += (("sg_nd", {"bucket": False, "options": ["--decompose", "off"]}),
               ("sg_da", {"bucket": False, "options": ["--decompose", "all"]}))
    else:
        results["tp2fake_note"] = "this schedgraph has no --decompose: no sg_nd, sg_da"
    fake2("tp2fake", config(dp=1, tp=2), sg)


def _has_decompose():
    import subprocess

    return "--decompose" in subprocess.run([schedgraph.find_binary(), "--help"],
                                           capture_output=True, text=True).stdout


def _rel(ref, out):
    return max(float((a.double() - b.double()).abs().max() / a.double().abs().max().clamp_min(1e-30))
               for a, b in zip(ref, out))


def _w2tp_worker(rank, world, port, path, sg):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dev = f"cuda:{rank}" if CUDA else "cpu"
    if CUDA:
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device(dev))
    else:
        dist.init_process_group("gloo", rank=rank, world_size=world)
        torch.set_num_threads(1)
    cfg = config(dp=1, tp=world)
    cfg.dtype = torch.float32
    grp = dist.group.WORLD
    inputs = cfg.inputs(device=dev, seed=rank)
    gm = testing.trace(cfg, tp_group=grp, device=dev)
    ref_runs = [[t.clone() for t in gm(*inputs)] for _ in range(3)]
    out = [{"variant": "input", "note": f"{len(gm.graph.nodes)} nodes",
            "step_us": timeit(lambda: gm(*inputs))}]
    for name, opts in sg:
        g = testing.trace(cfg, tp_group=grp, device=dev)
        t = time.time()
        schedgraph.schedule(g, bucket=False, options=opts)
        note = f"schedule {time.time() - t:.2f}s{decomposed(g)}"
        res = g(*inputs)
        bw, within, n, md = compare(ref_runs, res)
        rel = _rel(ref_runs[0], res)
        out.append({"variant": name, "note": note, "bitwise": f"{bw}/{n}", "maxdiff": md,
                    "rel": rel, "ok": within == n or rel <= 1e-5,
                    "step_us": timeit(lambda g=g: g(*inputs))})
    with open(path % rank, "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()


def phase_w2tp():
    import torch.multiprocessing as mp

    world = 2
    if CUDA and torch.cuda.device_count() < world:
        results["w2tp_skipped"] = "one GPU: a ring needs 2 ranks"
        log("w2tp skipped: one GPU (a ring needs 2 ranks)")
        return
    sg = [("sg", [])]
    if _has_decompose():
        sg += [("sg_ag", ["--decompose", "all-gather"]), ("sg_da", ["--decompose", "all"])]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rank%d.json")
        mp.spawn(_w2tp_worker, args=(world, port, path, sg), nprocs=world)
        per_rank = []
        for r in range(world):
            with open(path % r) as f:
                per_rank.append(json.load(f))
    for same in zip(*per_rank):  # one variant on every rank
        row = dict(same[0], phase="w2tp", step_us=max(x["step_us"] for x in same))
        if "ok" in row:
            row.update(ok=all(x["ok"] for x in same), rel=max(x["rel"] for x in same))
        rows.append(row)
        log(row)


def main():
    os.makedirs(OUT, exist_ok=True)
    results["gpu"] = torch.cuda.get_device_name() if CUDA else "cpu"
    log("torch", torch.__version__, results["gpu"], "case", results["case"],
        "schedgraph", schedgraph.find_binary())
    phases = {"w1": phase_w1, "w2fake": phase_w2fake, "tp2fake": phase_tp2fake,
              "w2tp": phase_w2tp}
    for p in os.environ.get("PHASES", "w1,w2fake,tp2fake,w2tp").split(","):
        if time.time() - T0 > BUDGET:
            results[f"{p}_skipped"] = "budget"
            log("skipping", p, "(BUDGET_S)")
            continue
        try:
            phases[p]()
        except Exception as e:
            import traceback
            traceback.print_exc()
            results[f"{p}_error"] = repr(e)[:500]
    results["rows"] = rows
    with open(os.path.join(OUT, "torch_roundtrip.json"), "w") as f:
        json.dump(results, f, indent=1)
    base = {r["phase"]: r["step_us"] for r in rows if r["variant"] == "input"}
    print(f"\n{'phase':7} {'variant':12} {'step_us':>9} {'vs input':>9} {'bitwise':>8} "
          f"{'values':>7}  note")
    for r in rows:
        rel = (f"{100 * (r['step_us'] / base[r['phase']] - 1):+.1f}%"
               if r["phase"] in base else "")
        ok = {True: "ok", False: "DIFFER", None: "-"}[r.get("ok")]
        print(f"{r['phase']:7} {r['variant']:12} {r['step_us']:9.1f} {rel:>9} "
              f"{r.get('bitwise', '-'):>8} {ok:>7}  {r['note']}")
    bad = [r for r in rows if r.get("ok") is False]
    checked = ("w1", "w2tp")  # the phases with values
    print("round trip:", "FAILED" if bad or any(f"{p}_error" in results for p in checked)
          else "passed" if any(r["phase"] in checked for r in rows) else "not run")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""bench_summary.py WORK_DIR "NAME ...": the table of
tools/device/bench_torch_step.sh per case (WORK_DIR/NAME/): schedrun's step
(profile plan, launch graph) against PyTorch's on the same
aten graph (torch_step.py: eager, fx_input = the aten graph as traced,
compiled = torch.compile of it), then GPU time per op class on both sides
(schedrun: per-kernel events, SG_CUDA_KERNEL_TIMES; PyTorch: profiler self
device time, torch_ops.NAME.json) beside schedgraph's estimates per class
(model alone and with the profile), and both plans' predicted step against
the measured one (one GPU: no collective to overlap, the two plans run the
same kernels). Markdown on stdout; a missing piece reads "-"."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from op_classes import CLASSES, op_class  # noqa: E402


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def fmt(v, d=0):
    return "-" if v is None else f"{v:.{d}f}"


def ratio(a, b):
    return "-" if not a or not b else f"{a / b:.2f}"


def err(pred, meas):
    return "-" if not pred or not meas else f"{100 * (pred - meas) / meas:+.1f}%"


def kernel_classes(path):
    """Per class: the sum over KERNEL instructions of their median times."""
    if not os.path.exists(path):
        return None
    out = {c: 0.0 for c in CLASSES}
    for line in open(path).read().splitlines()[1:]:
        parts = line.split("\t")
        if len(parts) == 5:
            out[op_class(parts[2])] += float(parts[4])
    return out


def cost_classes(path):
    """Per class: schedgraph --costs estimates (rows: name kind shape... est_us source)."""
    if not os.path.exists(path):
        return None
    out = {c: 0.0 for c in CLASSES}
    for line in open(path):
        p = line.split()
        if line.startswith("#") or len(p) < 4:
            continue
        try:
            us = float(p[-2])
        except ValueError:
            continue
        if p[-1] in ("graph", "profile", "model"):
            out[op_class(p[1])] += us
    return out


def planned_step(sg):
    """The step schedgraph predicts for the plan it wrote (its report)."""
    if not sg:
        return None
    b = (sg.get("bucket") or {}).get("step_us")
    if b and b.get("bucketed") is not None:
        return b["bucketed"]
    return (sg.get("scheduled") or {}).get("step_us")


def step_of(report, key):
    if not report or not isinstance(report.get(key), dict):
        return None
    return report[key].get("step_us")


def case(work, name):
    d = os.path.join(work, name)
    ts = load(os.path.join(d, f"torch_step.{name}.json")) or {}
    to = load(os.path.join(d, f"torch_ops.{name}.json")) or {}
    rp = load(os.path.join(d, "profile.report.json"))
    g = load(os.path.join(d, f"{name}.json")) or {}
    fx, comp, eager = ts.get("fx_input_us"), ts.get("compiled_us"), ts.get("eager_us")
    sp = step_of(rp, "measured")
    print(f"\n## {name}: {g.get('description', '')}\n")
    if rp and rp.get("kernels"):
        print(f"schedrun: {rp['kernels']}\n")
    print("| run | step us | / aten graph | / torch.compile |")
    print("|---|---:|---:|---:|")
    print(f"| schedrun, profile plan (graph launch) | {fmt(sp)} | {ratio(sp, fx)} | {ratio(sp, comp)} |")
    print(f"| PyTorch eager (autograd) | {fmt(eager)} | {ratio(eager, fx)} | {ratio(eager, comp)} |")
    print(f"| PyTorch aten graph (fx_input) | {fmt(fx)} | 1.00 | {ratio(fx, comp)} |")
    print(f"| torch.compile of the aten graph | {fmt(comp)} | {ratio(comp, fx)} | 1.00 |")
    for k in ("eager", "fx_input", "compiled"):
        if ts.get(k + "_error"):
            print(f"\n{k}: {ts[k + '_error']}")
    kc = kernel_classes(os.path.join(d, "ktimes.tsv"))
    tc = to.get("classes")
    cm = cost_classes(os.path.join(d, "costs.model.txt"))
    cp = cost_classes(os.path.join(d, "costs.profile.txt"))
    print("\n| op class | schedrun us | PyTorch us | schedrun / PyTorch | model est us | profile est us |")
    print("|---|---:|---:|---:|---:|---:|")
    tot = [0.0, 0.0, 0.0, 0.0]
    for c in CLASSES:
        v = [kc.get(c) if kc else None, tc.get(c) if tc else None,
             cm.get(c) if cm else None, cp.get(c) if cp else None]
        for i, x in enumerate(v):
            tot[i] += x or 0.0
        print(f"| {c} | {fmt(v[0])} | {fmt(v[1])} | {ratio(v[0], v[1])} | {fmt(v[2])} | {fmt(v[3])} |")
    print(f"| all | {fmt(tot[0])} | {fmt(tot[1])} | {ratio(tot[0], tot[1])} | {fmt(tot[2])} | {fmt(tot[3])} |")
    print("\n| plan | predicted step us | measured step us (profile plan) | error |")
    print("|---|---:|---:|---:|")
    for pf, label in (("model", "model (no profile)"), ("profile", "with the profile")):
        pr = planned_step(load(os.path.join(d, f"{pf}.sgreport.json")))
        print(f"| {label} | {fmt(pr)} | {fmt(sp)} | {err(pr, sp)} |")
    if to.get("ops"):
        top = list(to["ops"].items())[:12]
        print("\nPyTorch's largest ops (us per step): " +
              ", ".join(f"{k.replace('aten::', '')} {v:.0f}" for k, v in top))


def main():
    work, names = sys.argv[1], sys.argv[2].split()
    print("# schedrun vs PyTorch on the same aten graph (one GPU)")
    for n in names:
        case(work, n)


if __name__ == "__main__":
    main()

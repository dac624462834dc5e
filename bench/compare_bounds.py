#!/usr/bin/env python3
"""compare_bounds.py: whether two sets of schedgraph outputs differ only in
the lower bound, for a change that makes the bound stronger on purpose.

Usage: KEEP=DIR bench/compare_plans.sh OLD NEW ...; bench/compare_bounds.py DIR

Reads DIR/old and DIR/new (compare_plans.sh's plans, reports without pass
timings, traces and outputs, by name). For every pair that is not byte
identical: drops the lower-bound fields from both sides (plans: `hash`, a
function of the content, and `pred.lower_bound_us`; reports:
`lower_bound_us`, `lower_bound` (the terms and the binding one) and `gap`
of each order) and requires the rest to be equal; requires each new bound
to be at least the old one (1e-9 relative) and at most the step of its
order. Prints one line per output that differs, then "N outputs, M differ
(bound only: B), largest change X (relative R)"; exit 1 when anything but
the bound differs or a bound check fails.
"""
import json
import os
import sys

DROP = {"lower_bound_us", "lower_bound", "gap"}


def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in DROP}
    if isinstance(o, list):
        return [strip(v) for v in o]
    return o


def bounds(name, o):
    """(label, lower_bound_us, step_us) of each order an output reports."""
    if name.endswith(".plan"):
        p = o.get("pred", {})
        return [("pred", p.get("lower_bound_us"), p.get("step_us"))]
    out = []
    for k, v in o.items():
        if isinstance(v, dict) and "lower_bound_us" in v:
            out.append((k, v["lower_bound_us"], v.get("step_us")))
    return out


def main():
    root = sys.argv[1]
    old_dir, new_dir = os.path.join(root, "old"), os.path.join(root, "new")
    names = sorted(set(os.listdir(old_dir)) | set(os.listdir(new_dir)))
    n = differ = bound_only = 0
    bad = False
    largest = (0.0, 0.0, "")
    for name in names:
        if not name.endswith((".plan", ".report", ".trace", ".out")):
            continue
        n += 1
        a, b = os.path.join(old_dir, name), os.path.join(new_dir, name)
        if not (os.path.exists(a) and os.path.exists(b)):
            print(f"only one side: {name}")
            differ += 1
            bad = True
            continue
        ta, tb = open(a, "rb").read(), open(b, "rb").read()
        if ta == tb:
            continue
        differ += 1
        if not name.endswith((".plan", ".report")):
            print(f"differs beyond the bound: {name}")
            bad = True
            continue
        ja, jb = json.loads(ta), json.loads(tb)
        if name.endswith(".plan"):
            ja.pop("hash", None)
            jb.pop("hash", None)
        if strip(ja) != strip(jb):
            print(f"differs beyond the bound: {name}")
            bad = True
            continue
        bound_only += 1
        for (label, lo, step), (_, ln, _) in zip(bounds(name, ja), bounds(name, jb)):
            change = ln - lo
            rel = change / lo if lo else 0.0
            note = ""
            if ln < lo * (1 - 1e-9):
                note = " WEAKER"
                bad = True
            if step is not None and step >= 0 and ln > step * (1 + 1e-9):
                note += " ABOVE THE STEP"
                bad = True
            if change:
                print(f"bound: {name} {label} {lo} -> {ln} (step {step}){note}")
            if abs(change) > abs(largest[0]):
                largest = (change, rel, f"{name} {label}")
    print(f"{n} outputs, {differ} differ (bound only: {bound_only}), largest change "
          f"{largest[0]:.3f} us (relative {largest[1]:.4g}, {largest[2] or '-'})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

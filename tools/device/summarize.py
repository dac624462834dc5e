#!/usr/bin/env python3
"""summarize.py WORK_DIR "GRAPH ...": the GPU measurement table (markdown)
from run.sh's schedrun timing reports (t.GRAPH.{model,profile}.VARIANT.report.json).

Per graph and plan: predicted vs measured step time and exposed communication
(error = (predicted - measured) / measured), measured compute-stream busy
time, and the median error of the per-collective duration estimates.
"""
import json
import os
import statistics
import sys

VARIANTS = [("input", "input order"), ("sched", "schedule"), ("schedb", "schedule+bucket")]


def err(p, m):
    return f"{100.0 * (p - m) / m:+.1f}%" if m > 0 and p >= 0 else "n/a"


def main():
    work, graphs = sys.argv[1], sys.argv[2].split()
    print("| graph | costs | plan | colls | pred step us | meas step us | step err | "
          "pred exposed us | meas exposed us | meas compute us | coll est err (median) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for g in graphs:
        for pf in ("model", "profile"):
            for v, label in VARIANTS:
                f = os.path.join(work, f"t.{g}.{pf}.{v}.report.json")
                if not os.path.exists(f):
                    print(f"| {g} | {pf} | {label} | missing | | | | | | | |")
                    continue
                r = json.load(open(f))
                s, p = r.get("measured", r.get("summary")), r["predicted"]
                est = [(c.get("estimated_us", c.get("est_us", -1)), c["measured_us"])
                       for c in r["collectives"]]
                errs = [abs(e - m) / m for e, m in est if m > 0 and e >= 0]
                ce = f"{100 * statistics.median(errs):.0f}%" if errs else "n/a"
                print(f"| {g} | {pf} | {label} | {s['collectives']} | {p['step_us']:.0f} | "
                      f"{s['step_us']:.0f} | {err(p['step_us'], s['step_us'])} | "
                      f"{p['exposed_us']:.0f} | {s['exposed_us']:.0f} | {s['compute_us']:.0f} | "
                      f"{ce} |")


def contention(work, graphs):
    """Overlap's cost, measured: compute-stream busy time and collective
    durations of the schedule (overlapped) against the input order (each
    collective alone), both planned with the profile."""
    print("\n| graph | compute busy: input order -> schedule | "
          "collective time: input order -> schedule |")
    print("|---|---|---|")
    for g in graphs:
        try:
            a = json.load(open(os.path.join(work, f"t.{g}.profile.input.report.json")))
            b = json.load(open(os.path.join(work, f"t.{g}.profile.sched.report.json")))
        except OSError:
            continue
        ma, mb = a.get("measured", a.get("summary")), b.get("measured", b.get("summary"))
        print(f"| {g} | {ma['compute_us']:.0f} -> {mb['compute_us']:.0f} us "
              f"({100 * (mb['compute_us'] / ma['compute_us'] - 1):+.1f}%) | "
              f"{ma['comm_us']:.0f} -> {mb['comm_us']:.0f} us "
              f"({100 * (mb['comm_us'] / ma['comm_us'] - 1):+.1f}%) |")


if __name__ == "__main__":
    main()
    contention(sys.argv[1], sys.argv[2].split())

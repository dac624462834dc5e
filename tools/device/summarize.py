#!/usr/bin/env python3
"""summarize.py WORK_DIR "GRAPH ...": the GPU measurement table (markdown)
from run.sh's schedrun timing reports: t.GRAPH.{model,profile}.VARIANT.report.json
(launch graph, the default) and t.GRAPH.profile.VARIANT.eager.report.json
(the same plans issued eagerly by the host).

Per graph and plan: predicted vs measured step time and exposed communication
(error = (predicted - measured) / measured), measured compute-stream busy
time, idle (instrumented step - compute - exposed: the compute stream
waiting for neither a kernel nor a collective: the host, event nodes, wait
latency), and the median error of the per-collective duration estimates.
The step is timed without measurement events (schedrun's step_us), the
breakdown in the instrumented run of the same step (instrumented_step_us). Then what overlap costs: collective
durations against their solo estimates, input order vs schedule.
"""
import json
import os
import statistics
import sys

VARIANTS = [("input", "input order"), ("sched", "schedule"), ("schedb", "schedule+bucket")]


def err(p, m):
    return f"{100.0 * (p - m) / m:+.1f}%" if m > 0 and p >= 0 else "n/a"


def load(work, g, pf, v, launch=""):
    f = os.path.join(work, f"t.{g}.{pf}.{v}{launch}.report.json")
    return json.load(open(f)) if os.path.exists(f) else None


def main():
    work, graphs = sys.argv[1], sys.argv[2].split()
    print("| graph | costs | plan | launch | colls | pred step us | meas step us | step err | "
          "instrumented step us | pred exposed us | meas exposed us | meas compute us | idle us | "
          "coll est err (median) |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for g in graphs:
        for pf in ("model", "profile"):
            for launch in ("", ".eager"):
                if pf == "model" and launch:
                    continue
                for v, label in VARIANTS:
                    r = load(work, g, pf, v, launch)
                    if r is None:
                        print(f"| {g} | {pf} | {label} | {launch[1:] or 'graph'} | missing "
                              "| | | | | | | | | |")
                        continue
                    s, p = r["measured"], r["predicted"]
                    est = [(c.get("estimated_us", -1), c["measured_us"]) for c in r["collectives"]]
                    errs = [abs(e - m) / m for e, m in est if m > 0 and e >= 0]
                    ce = f"{100 * statistics.median(errs):.0f}%" if errs else "n/a"
                    inst = s.get("instrumented_step_us", s["step_us"])
                    idle = inst - s["compute_us"] - s["exposed_us"]
                    print(f"| {g} | {pf} | {label} | {r.get('launch', '?')} | "
                          f"{s['collectives']} | {p['step_us']:.0f} | "
                          f"{s['step_us']:.0f} | {err(p['step_us'], s['step_us'])} | "
                          f"{inst:.0f} | {p['exposed_us']:.0f} | {s['exposed_us']:.0f} | "
                          f"{s['compute_us']:.0f} | {idle:.0f} | {ce} |")


def ratio(r, hidden):
    """Median measured / estimated duration over the collectives that the
    plan predicted hidden (overlapped: hidden=True) or not."""
    xs = [c["measured_us"] / c["estimated_us"] for c in r["collectives"]
          if c.get("estimated_us", 0) > 0 and
          (c.get("predicted_exposed_us", 0) < 0.5 * c["estimated_us"]) == hidden]
    return statistics.median(xs) if xs else float("nan")


def contention(work, graphs):
    """Overlap's cost, measured (profile plans, launch graph): compute-stream
    busy time and collective time of the schedule (overlapped) against the
    input order; per-collective measured / profiled duration."""
    print("\n| graph | compute busy: input order -> schedule | "
          "collective time: input order -> schedule | "
          "meas/est, collectives predicted exposed (input order) | "
          "meas/est, collectives predicted hidden (schedule) |")
    print("|---|---|---|---:|---:|")
    for g in graphs:
        a, b = load(work, g, "profile", "input"), load(work, g, "profile", "sched")
        if a is None or b is None:
            continue
        ma, mb = a["measured"], b["measured"]
        print(f"| {g} | {ma['compute_us']:.0f} -> {mb['compute_us']:.0f} us "
              f"({100 * (mb['compute_us'] / ma['compute_us'] - 1):+.1f}%) | "
              f"{ma['comm_us']:.0f} -> {mb['comm_us']:.0f} us "
              f"({100 * (mb['comm_us'] / ma['comm_us'] - 1):+.1f}%) | "
              f"{ratio(a, False):.2f} | {ratio(b, True):.2f} |")


if __name__ == "__main__":
    main()
    contention(sys.argv[1], sys.argv[2].split())

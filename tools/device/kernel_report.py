#!/usr/bin/env python3
"""kernel_report.py WORK_DIR "GRAPH ...": per op kind, the profile-based
estimates (schedgraph --costs --profile) against the per-kernel GPU times of
a timing run (SG_CUDA_KERNEL_TIMES, ktimes.GRAPH.VARIANT.tsv), summed over
the graph's nodes: where a prediction error comes from. For the input order
(kernels mostly alone) and the schedule (kernels beside collectives): the
difference between the two is what overlap costs the compute stream.
Markdown on stdout."""
import collections
import os
import sys


def main():
    work, graphs = sys.argv[1], sys.argv[2].split()
    for g in graphs:
        for v in ("input", "sched"):
            table(work, g, v)


def table(work, g, v):
    kt_path = os.path.join(work, f"ktimes.{g}.{v}.tsv")
    cost_path = os.path.join(work, f"costs.{g}.txt")
    if not (os.path.exists(kt_path) and os.path.exists(cost_path)):
        return
    kt = {}
    for line in open(kt_path).read().splitlines()[1:]:
        _, name, op, _target, us = line.split("\t")
        kt[name] = (op, float(us))
    est = {}
    for line in open(cost_path):
        parts = line.split()
        if line.startswith("#") or len(parts) < 4:
            continue
        try:
            est[parts[0]] = (float(parts[-2]), parts[-1])
        except ValueError:
            continue
    agg = collections.defaultdict(lambda: [0, 0.0, 0.0, set()])
    for name, (op, us) in kt.items():
        if name not in est:
            continue
        e, src = est[name]
        a = agg[op]
        a[0] += 1
        a[1] += e
        a[2] += us
        a[3].add(src)
    print(f"\n{g}: per-kernel GPU time ({v}, events around each kernel) "
          f"vs the estimate with its profile\n")
    print("| op | nodes | estimated us | measured us | error | source |")
    print("|---|---:|---:|---:|---:|---|")
    te = tm = 0.0
    for op, (n, e, m, src) in sorted(agg.items(), key=lambda x: -x[1][2]):
        te += e
        tm += m
        print(f"| {op} | {n} | {e:.0f} | {m:.0f} | {100 * (e - m) / m:+.0f}% | "
              f"{','.join(sorted(src))} |")
    print(f"| all | | {te:.0f} | {tm:.0f} | {100 * (te - tm) / tm:+.0f}% | |")


if __name__ == "__main__":
    main()

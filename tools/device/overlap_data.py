#!/usr/bin/env python3
"""overlap_data.py OUT.json RUN_DIR... : the calibration data of the cost
model's reduce_slowdown (tests/estimate/data/overlap_h200x2.json) from
tools/device/run.sh results (t.GRAPH.profile.{input,sched}.report.json,
launch graph). Per run, graph and plan: each collective's kind, bytes, solo
estimate (the profile), predicted start/end (the simulator, with the
contention then in force) and measured duration (CUDA events).
tests/estimate/test_measured.c derives the slowdown from it."""
import json
import os
import sys

GRAPHS = ["w2_fsdp2_L2_h1024", "w2_tp2_L2_h1024", "gg_fsdp2_L4_h2048"]


def main():
    out, runs = sys.argv[1], sys.argv[2:]
    doc = {"source": "schedrun --backend cuda --mode timing --iters 30 --warmup 5 (launch graph) "
                     "on 2x H200 (nvidia-h200-x2), plans made by schedgraph --profile; "
                     "tools/device/run.sh full, tools/device/overlap_data.py",
           "runs": []}
    for run in runs:
        for g in GRAPHS:
            for plan in ("input", "sched"):
                f = os.path.join(run, f"t.{g}.profile.{plan}.report.json")
                r = json.load(open(f))
                if r.get("launch") != "graph":
                    sys.exit(f"{f}: launch {r.get('launch')}, want graph")
                doc["runs"].append({
                    "run": os.path.basename(os.path.normpath(run)), "graph": g, "plan": plan,
                    "collectives": [[c["kind"], c["bytes"], c["estimated_us"],
                                     c["predicted_start_us"], c["predicted_end_us"],
                                     c["measured_us"]] for c in r["collectives"]]})
    doc["columns"] = ["kind", "bytes", "estimated_us", "predicted_start_us",
                      "predicted_end_us", "measured_us"]
    # the contention the predictions were made with (argv: none; edit when it changes)
    doc["predicted_with"] = {"comm_slowdown": 1.05, "reduce_slowdown": 1.05,
                             "compute_slowdown": 1.22, "comm_start_wait": 1}
    with open(out, "w") as fh:
        json.dump(doc, fh, separators=(",", ":"))
        fh.write("\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""compare_dumps.py REF_DIR TEST_DIR [--tol T]: outputs of two schedrun
--dump-outputs folders (CPU reference vs CUDA backend), within bf16 accuracy.

Per output: the relative L2 error ||test - ref|| / ||ref|| (the measure
PyTorch's own GPU-vs-CPU tests of reduced-precision training steps use), the
largest absolute error and the element where it is. Fails (exit 1) when an
output is missing, differs in shape/dtype, has a NaN/Inf the reference lacks,
or its relative L2 error exceeds --tol (default 2e-2: a few bf16 roundings,
2^-8 each, accumulated over a forward+backward of two layers).
"""
import array
import json
import math
import os
import sys

# dtype -> array typecode (plain Python: runs where numpy is missing)
DT = {"float32": "f", "float64": "d", "int64": "q", "int32": "i", "int8": "b",
      "uint8": "B", "bool": "B"}


def load(d, e):
    raw = open(os.path.join(d, e["file"]), "rb").read()
    if e["dtype"] == "bfloat16":
        u = array.array("H", raw)
        w = array.array("I", (x << 16 for x in u))
        return list(array.array("f", w.tobytes()))
    if e["dtype"] == "float16":
        import struct
        return [struct.unpack("<e", raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
    return list(array.array(DT[e["dtype"]], raw))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    tol = 2e-2
    if "--tol" in sys.argv:
        tol = float(sys.argv[sys.argv.index("--tol") + 1])
        args.remove(sys.argv[sys.argv.index("--tol") + 1])
    ref_dir, test_dir = args
    ref = json.load(open(os.path.join(ref_dir, "outputs.json")))
    test = {e["index"]: e for e in json.load(open(os.path.join(test_dir, "outputs.json")))}
    bad, worst = 0, 0.0
    for e in ref:
        t = test.get(e["index"])
        name = e["name"]
        if t is None or t["shape"] != e["shape"] or t["dtype"] != e["dtype"]:
            print(f"FAIL {name}: missing or different shape/dtype")
            bad += 1
            continue
        if "file" not in e:
            continue
        a, b = load(ref_dir, e), load(test_dir, t)
        diff_fin = sum(math.isfinite(x) != math.isfinite(y) for x, y in zip(a, b))
        if diff_fin or len(a) != len(b):
            print(f"FAIL {name}: {diff_fin} non-finite elements differ")
            bad += 1
            continue
        pairs = [(x, y) for x, y in zip(a, b) if math.isfinite(x)]
        na = math.sqrt(sum(x * x for x, _ in pairs))
        err = math.sqrt(sum((y - x) ** 2 for x, y in pairs))
        rel = err / na if na > 0 else err
        maxabs = max((abs(y - x) for x, y in pairs), default=0.0)
        worst = max(worst, rel)
        ok = rel <= tol
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name:24s} {str(e['shape']):18s} {e['dtype']:9s} "
              f"rel_l2 {rel:.2e} max_abs {maxabs:.2e}")
    print(f"compare: {len(ref)} outputs, worst rel_l2 {worst:.2e}, tol {tol:g}, "
          f"{'PASS' if bad == 0 else f'{bad} FAILED'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""op_classes.py: the op classes of the PyTorch-vs-schedrun benchmark
(tools/device/bench_torch_step.sh), one rule for both sides: an aten op name
("aten::mm", "aten.mm.default", "mm") -> attention, gemm, reductions,
copies, comm or maps (everything else that runs a kernel: pointwise ops and
fills)."""

CLASSES = ("attention", "gemm", "maps", "reductions", "copies", "comm")

GEMM = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addmv", "mv"}
REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "norm", "var", "std",
              "linalg_vector_norm", "prod"}
COMM = {"all_gather_into_tensor", "reduce_scatter_tensor", "all_reduce", "wait_tensor",
        "all_gather", "reduce_scatter", "all_to_all", "broadcast", "wait"}
COPIES = {"_to_copy", "copy_", "copy", "clone", "cat", "contiguous", "to",
          "_copy_from", "_copy_from_and_resize", "bucket_pack", "bucket_unpack"}


def base_name(op):
    """'aten::mm' / 'aten.mm.default' / 'mm' -> 'mm'."""
    op = op.split("::")[-1]
    if op.startswith("aten."):
        op = op[5:]
    return op.split(".")[0]


def op_class(op):
    full = op.lower()
    b = base_name(op).lower()
    if "attention" in full or "sdpa" in full or "flash" in full or "fmha" in full:
        return "attention"
    if "c10d" in full or "nccl" in full or b in COMM:
        return "comm"
    if b in GEMM:
        return "gemm"
    if b in REDUCTIONS or b.startswith(("sum_", "mean_")):
        return "reductions"
    if b in COPIES or b.startswith("to_copy"):
        return "copies"
    return "maps"

/* ops.c: the op-property table, the parameter names and the dtype and
 * tensor-option tables (see ops.h).
 *
 * One row per SgOpKind, in enum order; the first lookup checks that.
 * Each row lists the op's positional parameters as its schema does:
 * ATen's native_functions.yaml for aten ops (SDPA's included), the c10d
 * functional signatures for collectives (graph-format.md), docs/ops.md for
 * schedgraph's own (bucket_pack, bucket_unpack, collective_permute,
 * rank_roll). Every reader of an argument position (graph/, estimate/,
 * codegen/, the runtime's kernels) asks sg_op_param_pos().
 */
#include "ops.h"

#include <glib.h>
#include <string.h>

/* ROWP (kind, target, name, class, PARAM...): a row with its positional
 * parameters, written without the SG_PARAM_ prefix. */
#define P1(a) SG_PARAM_##a
#define P2(a, ...) SG_PARAM_##a, P1 (__VA_ARGS__)
#define P3(a, ...) SG_PARAM_##a, P2 (__VA_ARGS__)
#define P4(a, ...) SG_PARAM_##a, P3 (__VA_ARGS__)
#define P5(a, ...) SG_PARAM_##a, P4 (__VA_ARGS__)
#define P6(a, ...) SG_PARAM_##a, P5 (__VA_ARGS__)
#define P7(a, ...) SG_PARAM_##a, P6 (__VA_ARGS__)
#define P8(a, ...) SG_PARAM_##a, P7 (__VA_ARGS__)
#define P9(a, ...) SG_PARAM_##a, P8 (__VA_ARGS__)
#define P10(a, ...) SG_PARAM_##a, P9 (__VA_ARGS__)
#define P11(a, ...) SG_PARAM_##a, P10 (__VA_ARGS__)
#define P12(a, ...) SG_PARAM_##a, P11 (__VA_ARGS__)
#define P13(a, ...) SG_PARAM_##a, P12 (__VA_ARGS__)
#define P14(a, ...) SG_PARAM_##a, P13 (__VA_ARGS__)
#define P15(a, ...) SG_PARAM_##a, P14 (__VA_ARGS__)
#define PN(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, N, ...) N
#define PARAMS(...)                                                                                \
  ((const SgParam[]){ PN (__VA_ARGS__, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3,  \
                          P2, P1) (__VA_ARGS__),                                                   \
                      SG_PARAM_NONE })
#define ROW(k, t, s, c) { k, t, s, c, NULL }
#define ROWP(k, t, s, c, ...) { k, t, s, c, PARAMS (__VA_ARGS__) }

const SgOpInfo sg_op_table[SG_OP_N_KINDS] = {
  ROW (SG_OP_UNKNOWN, NULL, "unknown", SG_CLASS_UNKNOWN),
  ROW (SG_OP_PLACEHOLDER, NULL, "placeholder", SG_CLASS_INPUT),
  ROW (SG_OP_GET_ATTR, NULL, "get_attr", SG_CLASS_INPUT),
  ROW (SG_OP_OUTPUT, NULL, "output", SG_CLASS_OUTPUT),
  ROWP (SG_OP_GETITEM, "<built-in function getitem>", "getitem", SG_CLASS_GETITEM,
        SELF, INDEX),
  ROWP (SG_OP_MM, "aten.mm.default", "mm", SG_CLASS_MATMUL,
        SELF, MAT2),
  ROWP (SG_OP_ADDMM, "aten.addmm.default", "addmm", SG_CLASS_MATMUL,
        SELF, MAT1, MAT2),
  ROWP (SG_OP_BMM, "aten.bmm.default", "bmm", SG_CLASS_MATMUL,
        SELF, MAT2),
  ROWP (SG_OP_BADDBMM, "aten.baddbmm.default", "baddbmm", SG_CLASS_MATMUL,
        SELF, BATCH1, BATCH2),
  ROWP (SG_OP_SDPA_FLASH, "aten._scaled_dot_product_flash_attention.default",
        "sdpa_flash", SG_CLASS_ATTENTION,
        QUERY, KEY, VALUE, DROPOUT_P, IS_CAUSAL, RETURN_DEBUG_MASK),
  ROWP (SG_OP_SDPA_FLASH_BWD, "aten._scaled_dot_product_flash_attention_backward.default",
        "sdpa_flash_backward", SG_CLASS_ATTENTION,
        GRAD_OUT, QUERY, KEY, VALUE, OUT, LOGSUMEXP, CUM_SEQ_Q, CUM_SEQ_K, MAX_Q, MAX_K, DROPOUT_P,
        IS_CAUSAL, PHILOX_SEED, PHILOX_OFFSET),
  ROWP (SG_OP_SDPA_EFFICIENT, "aten._scaled_dot_product_efficient_attention.default",
        "sdpa_efficient", SG_CLASS_ATTENTION,
        QUERY, KEY, VALUE, ATTN_BIAS, COMPUTE_LOG_SUMEXP, DROPOUT_P, IS_CAUSAL),
  ROWP (SG_OP_SDPA_EFFICIENT_BWD, "aten._scaled_dot_product_efficient_attention_backward.default",
        "sdpa_efficient_backward", SG_CLASS_ATTENTION,
        GRAD_OUT, QUERY, KEY, VALUE, ATTN_BIAS, OUT, LOGSUMEXP, PHILOX_SEED, PHILOX_OFFSET,
        DROPOUT_P, GRAD_INPUT_MASK, IS_CAUSAL),
  ROWP (SG_OP_SDPA_CUDNN, "aten._scaled_dot_product_cudnn_attention.default",
        "sdpa_cudnn", SG_CLASS_ATTENTION,
        QUERY, KEY, VALUE, ATTN_BIAS, COMPUTE_LOG_SUMEXP, DROPOUT_P, IS_CAUSAL, RETURN_DEBUG_MASK),
  ROWP (SG_OP_SDPA_CUDNN_BWD, "aten._scaled_dot_product_cudnn_attention_backward.default",
        "sdpa_cudnn_backward", SG_CLASS_ATTENTION,
        GRAD_OUT, QUERY, KEY, VALUE, OUT, LOGSUMEXP, PHILOX_SEED, PHILOX_OFFSET, ATTN_BIAS,
        CUM_SEQ_Q, CUM_SEQ_K, MAX_Q, MAX_K, DROPOUT_P, IS_CAUSAL),
  ROWP (SG_OP_ADD_TENSOR, "aten.add.Tensor", "add", SG_CLASS_POINTWISE,
        SELF, OTHER),
  ROWP (SG_OP_ADD_SCALAR, "aten.add.Scalar", "add_scalar", SG_CLASS_POINTWISE,
        SELF, OTHER, ALPHA),
  ROWP (SG_OP_SUB_TENSOR, "aten.sub.Tensor", "sub", SG_CLASS_POINTWISE,
        SELF, OTHER),
  ROWP (SG_OP_SUB_SCALAR, "aten.sub.Scalar", "sub_scalar", SG_CLASS_POINTWISE,
        SELF, OTHER, ALPHA),
  ROWP (SG_OP_MUL_TENSOR, "aten.mul.Tensor", "mul", SG_CLASS_POINTWISE,
        SELF, OTHER),
  ROWP (SG_OP_MUL_SCALAR, "aten.mul.Scalar", "mul_scalar", SG_CLASS_POINTWISE,
        SELF, OTHER),
  ROWP (SG_OP_DIV_TENSOR, "aten.div.Tensor", "div", SG_CLASS_POINTWISE,
        SELF, OTHER),
  ROWP (SG_OP_DIV_SCALAR, "aten.div.Scalar", "div_scalar", SG_CLASS_POINTWISE,
        SELF, OTHER),
  ROWP (SG_OP_POW_TENSOR_SCALAR, "aten.pow.Tensor_Scalar", "pow", SG_CLASS_POINTWISE,
        SELF, EXPONENT),
  ROWP (SG_OP_RSQRT, "aten.rsqrt.default", "rsqrt", SG_CLASS_POINTWISE,
        SELF),
  ROWP (SG_OP_SQRT, "aten.sqrt.default", "sqrt", SG_CLASS_POINTWISE,
        SELF),
  ROWP (SG_OP_EXP, "aten.exp.default", "exp", SG_CLASS_POINTWISE,
        SELF),
  ROWP (SG_OP_NEG, "aten.neg.default", "neg", SG_CLASS_POINTWISE,
        SELF),
  ROWP (SG_OP_RECIPROCAL, "aten.reciprocal.default", "reciprocal", SG_CLASS_POINTWISE,
        SELF),
  ROWP (SG_OP_SILU, "aten.silu.default", "silu", SG_CLASS_POINTWISE,
        SELF),
  ROWP (SG_OP_SILU_BACKWARD, "aten.silu_backward.default", "silu_backward", SG_CLASS_POINTWISE,
        GRAD_OUTPUT, SELF),
  ROWP (SG_OP_GELU, "aten.gelu.default", "gelu", SG_CLASS_POINTWISE,
        SELF),
  ROWP (SG_OP_GELU_BACKWARD, "aten.gelu_backward.default", "gelu_backward", SG_CLASS_POINTWISE,
        GRAD_OUTPUT, SELF),
  ROWP (SG_OP_RELU, "aten.relu.default", "relu", SG_CLASS_POINTWISE,
        SELF),
  ROWP (SG_OP_SIGMOID, "aten.sigmoid.default", "sigmoid", SG_CLASS_POINTWISE,
        SELF),
  ROWP (SG_OP_TANH, "aten.tanh.default", "tanh", SG_CLASS_POINTWISE,
        SELF),
  ROWP (SG_OP_SUM_DIM, "aten.sum.dim_IntList", "sum_dim", SG_CLASS_REDUCTION,
        SELF, DIM, KEEPDIM),
  ROWP (SG_OP_SUM, "aten.sum.default", "sum", SG_CLASS_REDUCTION,
        SELF),
  ROWP (SG_OP_MEAN_DIM, "aten.mean.dim", "mean_dim", SG_CLASS_REDUCTION,
        SELF, DIM, KEEPDIM),
  ROWP (SG_OP_MEAN, "aten.mean.default", "mean", SG_CLASS_REDUCTION,
        SELF),
  ROWP (SG_OP_AMAX, "aten.amax.default", "amax", SG_CLASS_REDUCTION,
        SELF, DIM, KEEPDIM),
  ROWP (SG_OP_VIEW, "aten.view.default", "view", SG_CLASS_VIEW,
        SELF, SIZE),
  ROWP (SG_OP_UNSAFE_VIEW, "aten._unsafe_view.default", "unsafe_view", SG_CLASS_VIEW,
        SELF, SIZE),
  ROWP (SG_OP_RESHAPE, "aten.reshape.default", "reshape", SG_CLASS_COPY,
        SELF, SHAPE),
  ROWP (SG_OP_T, "aten.t.default", "t", SG_CLASS_VIEW,
        SELF),
  ROWP (SG_OP_TRANSPOSE, "aten.transpose.int", "transpose", SG_CLASS_VIEW,
        SELF, DIM0, DIM1),
  ROWP (SG_OP_PERMUTE, "aten.permute.default", "permute", SG_CLASS_VIEW,
        SELF, DIMS),
  ROWP (SG_OP_EXPAND, "aten.expand.default", "expand", SG_CLASS_VIEW,
        SELF, SIZE),
  ROWP (SG_OP_UNSQUEEZE, "aten.unsqueeze.default", "unsqueeze", SG_CLASS_VIEW,
        SELF, DIM),
  ROWP (SG_OP_SQUEEZE_DIM, "aten.squeeze.dim", "squeeze", SG_CLASS_VIEW,
        SELF, DIM),
  ROWP (SG_OP_DETACH, "aten.detach.default", "detach", SG_CLASS_VIEW,
        SELF),
  ROWP (SG_OP_ALIAS, "aten.alias.default", "alias", SG_CLASS_VIEW,
        SELF),
  ROWP (SG_OP_SLICE, "aten.slice.Tensor", "slice", SG_CLASS_VIEW,
        SELF, DIM, START, END, STEP),
  ROWP (SG_OP_SELECT, "aten.select.int", "select", SG_CLASS_VIEW,
        SELF, DIM, INDEX),
  ROWP (SG_OP_CLONE, "aten.clone.default", "clone", SG_CLASS_COPY,
        SELF),
  ROWP (SG_OP_TO_COPY, "aten._to_copy.default", "to_copy", SG_CLASS_COPY,
        SELF),
  ROWP (SG_OP_CAT, "aten.cat.default", "cat", SG_CLASS_COPY,
        TENSORS, DIM),
  ROWP (SG_OP_ONES_LIKE, "aten.ones_like.default", "ones_like", SG_CLASS_CREATION,
        SELF),
  ROWP (SG_OP_ZEROS_LIKE, "aten.zeros_like.default", "zeros_like", SG_CLASS_CREATION,
        SELF),
  ROWP (SG_OP_FULL, "aten.full.default", "full", SG_CLASS_CREATION,
        SIZE, FILL_VALUE),
  ROWP (SG_OP_EMPTY, "aten.empty.memory_format", "empty", SG_CLASS_CREATION,
        SIZE),
  ROWP (SG_OP_ALL_GATHER, "_c10d_functional.all_gather_into_tensor.default",
        "all_gather", SG_CLASS_COLLECTIVE,
        INPUT, GROUP_SIZE, GROUP_NAME),
  ROWP (SG_OP_REDUCE_SCATTER, "_c10d_functional.reduce_scatter_tensor.default",
        "reduce_scatter", SG_CLASS_COLLECTIVE,
        INPUT, REDUCE_OP, GROUP_SIZE, GROUP_NAME),
  ROWP (SG_OP_ALL_REDUCE, "_c10d_functional.all_reduce.default", "all_reduce", SG_CLASS_COLLECTIVE,
        INPUT, REDUCE_OP, GROUP_NAME),
  ROWP (SG_OP_ALL_TO_ALL, "_c10d_functional.all_to_all_single.default",
        "all_to_all", SG_CLASS_COLLECTIVE,
        INPUT, OUTPUT_SPLIT_SIZES, INPUT_SPLIT_SIZES, GROUP_NAME),
  ROWP (SG_OP_BROADCAST, "_c10d_functional.broadcast.default", "broadcast", SG_CLASS_COLLECTIVE,
        INPUT, SRC, GROUP_NAME),
  ROWP (SG_OP_ALL_GATHER_COALESCED, "_c10d_functional.all_gather_into_tensor_coalesced.default",
        "all_gather_coalesced", SG_CLASS_COLLECTIVE,
        INPUTS, GROUP_SIZE, GROUP_NAME),
  ROWP (SG_OP_REDUCE_SCATTER_COALESCED,
        "_c10d_functional.reduce_scatter_tensor_coalesced.default", "reduce_scatter_coalesced",
        SG_CLASS_COLLECTIVE,
        INPUTS, REDUCE_OP, GROUP_SIZE, GROUP_NAME),
  ROWP (SG_OP_ALL_REDUCE_COALESCED, "_c10d_functional.all_reduce_coalesced.default",
        "all_reduce_coalesced", SG_CLASS_COLLECTIVE,
        INPUTS, REDUCE_OP, GROUP_NAME),
  ROWP (SG_OP_WAIT, "_c10d_functional.wait_tensor.default", "wait", SG_CLASS_WAIT,
        TENSOR),
  ROWP (SG_OP_BUCKET_PACK, "schedgraph.bucket_pack", "bucket_pack", SG_CLASS_BUCKET,
        INPUTS, K, INTERLEAVE),
  ROWP (SG_OP_BUCKET_UNPACK, "schedgraph.bucket_unpack", "bucket_unpack", SG_CLASS_BUCKET,
        INPUT, K, OFFSET, NUMEL),
  ROWP (SG_OP_COLLECTIVE_PERMUTE, "schedgraph.collective_permute", "collective_permute",
        SG_CLASS_COLLECTIVE,
        INPUT, SOURCE_TARGET_PAIRS, GROUP_NAME),
  ROWP (SG_OP_RANK_ROLL, "schedgraph.rank_roll", "rank_roll", SG_CLASS_COPY,
        INPUT, SHIFT, SIGN, GROUP_NAME),
};

static const char *const param_names[SG_PARAM_N] = {
  [SG_PARAM_NONE] = "",
  [SG_PARAM_SELF] = "self",
  [SG_PARAM_OTHER] = "other",
  [SG_PARAM_ALPHA] = "alpha",
  [SG_PARAM_EXPONENT] = "exponent",
  [SG_PARAM_GRAD_OUTPUT] = "grad_output",
  [SG_PARAM_APPROXIMATE] = "approximate",
  [SG_PARAM_ROUNDING_MODE] = "rounding_mode",
  [SG_PARAM_INDEX] = "index",
  [SG_PARAM_MAT1] = "mat1",
  [SG_PARAM_MAT2] = "mat2",
  [SG_PARAM_BATCH1] = "batch1",
  [SG_PARAM_BATCH2] = "batch2",
  [SG_PARAM_BETA] = "beta",
  [SG_PARAM_QUERY] = "query",
  [SG_PARAM_KEY] = "key",
  [SG_PARAM_VALUE] = "value",
  [SG_PARAM_ATTN_BIAS] = "attn_bias",
  [SG_PARAM_COMPUTE_LOG_SUMEXP] = "compute_log_sumexp",
  [SG_PARAM_DROPOUT_P] = "dropout_p",
  [SG_PARAM_IS_CAUSAL] = "is_causal",
  [SG_PARAM_RETURN_DEBUG_MASK] = "return_debug_mask",
  [SG_PARAM_SCALE] = "scale",
  [SG_PARAM_GRAD_OUT] = "grad_out",
  [SG_PARAM_OUT] = "out",
  [SG_PARAM_LOGSUMEXP] = "logsumexp",
  [SG_PARAM_CUM_SEQ_Q] = "cum_seq_q",
  [SG_PARAM_CUM_SEQ_K] = "cum_seq_k",
  [SG_PARAM_MAX_Q] = "max_q",
  [SG_PARAM_MAX_K] = "max_k",
  [SG_PARAM_PHILOX_SEED] = "philox_seed",
  [SG_PARAM_PHILOX_OFFSET] = "philox_offset",
  [SG_PARAM_GRAD_INPUT_MASK] = "grad_input_mask",
  [SG_PARAM_SIZE] = "size",
  [SG_PARAM_SHAPE] = "shape",
  [SG_PARAM_DIM] = "dim",
  [SG_PARAM_DIM0] = "dim0",
  [SG_PARAM_DIM1] = "dim1",
  [SG_PARAM_DIMS] = "dims",
  [SG_PARAM_KEEPDIM] = "keepdim",
  [SG_PARAM_START] = "start",
  [SG_PARAM_END] = "end",
  [SG_PARAM_STEP] = "step",
  [SG_PARAM_TENSORS] = "tensors",
  [SG_PARAM_FILL_VALUE] = "fill_value",
  [SG_PARAM_DTYPE] = "dtype",
  [SG_PARAM_LAYOUT] = "layout",
  [SG_PARAM_DEVICE] = "device",
  [SG_PARAM_PIN_MEMORY] = "pin_memory",
  [SG_PARAM_MEMORY_FORMAT] = "memory_format",
  [SG_PARAM_NON_BLOCKING] = "non_blocking",
  [SG_PARAM_INPUT] = "input",
  [SG_PARAM_GROUP_SIZE] = "group_size",
  [SG_PARAM_GROUP_NAME] = "group_name",
  [SG_PARAM_REDUCE_OP] = "reduce_op",
  [SG_PARAM_OUTPUT_SPLIT_SIZES] = "output_split_sizes",
  [SG_PARAM_INPUT_SPLIT_SIZES] = "input_split_sizes",
  [SG_PARAM_SRC] = "src",
  [SG_PARAM_TENSOR] = "tensor",
  [SG_PARAM_INPUTS] = "inputs",
  [SG_PARAM_K] = "k",
  [SG_PARAM_INTERLEAVE] = "interleave",
  [SG_PARAM_OFFSET] = "offset",
  [SG_PARAM_NUMEL] = "numel",
  [SG_PARAM_SOURCE_TARGET_PAIRS] = "source_target_pairs",
  [SG_PARAM_TRANSPORT] = "transport",
  [SG_PARAM_SHIFT] = "shift",
  [SG_PARAM_SIGN] = "sign",
};

/* Built once: target -> kind, and every (kind, param) -> position. */
static GHashTable *target_by_name;
static int8_t param_pos[SG_OP_N_KINDS][SG_PARAM_N];

static void
tables_init (void)
{
  static gsize once = 0;
  if (!g_once_init_enter (&once))
    return;
  target_by_name = g_hash_table_new (g_str_hash, g_str_equal);
  memset (param_pos, -1, sizeof param_pos);
  for (int k = 0; k < SG_OP_N_KINDS; k++) {
    g_assert (sg_op_table[k].kind == (SgOpKind)k);
    if (sg_op_table[k].target)
      g_hash_table_insert (target_by_name, (gpointer)sg_op_table[k].target, GINT_TO_POINTER (k));
    for (int i = 0; sg_op_table[k].params && sg_op_table[k].params[i] != SG_PARAM_NONE; i++) {
      g_assert (param_pos[k][sg_op_table[k].params[i]] < 0); /* each parameter once */
      param_pos[k][sg_op_table[k].params[i]] = (int8_t)i;
    }
  }
  for (int p = 1; p < SG_PARAM_N; p++)
    g_assert (param_names[p] != NULL);
  g_once_init_leave (&once, 1);
}

int
sg_op_param_pos (SgOpKind kind, SgParam param)
{
  g_return_val_if_fail (kind >= 0 && kind < SG_OP_N_KINDS, -1);
  g_return_val_if_fail (param >= 0 && param < SG_PARAM_N, -1);
  tables_init ();
  return param == SG_PARAM_NONE ? -1 : param_pos[kind][param];
}

const char *
sg_param_name (SgParam param)
{
  g_return_val_if_fail (param >= 0 && param < SG_PARAM_N, "");
  return param_names[param];
}

bool
sg_op_matmul_params (SgOpKind kind, SgParam *a, SgParam *b)
{
  switch (kind) {
  case SG_OP_MM: case SG_OP_BMM: *a = SG_PARAM_SELF, *b = SG_PARAM_MAT2; return true;
  case SG_OP_ADDMM: *a = SG_PARAM_MAT1, *b = SG_PARAM_MAT2; return true;
  case SG_OP_BADDBMM: *a = SG_PARAM_BATCH1, *b = SG_PARAM_BATCH2; return true;
  default: return false;
  }
}

SgOpKind
sg_op_from_target (const char *target)
{
  gpointer value;
  tables_init ();
  if (!target || !g_hash_table_lookup_extended (target_by_name, target, NULL, &value))
    return SG_OP_UNKNOWN;
  return (SgOpKind)GPOINTER_TO_INT (value);
}

const char *
sg_op_name (SgOpKind kind)
{
  return sg_op_info (kind)->short_name;
}

/* Coalesced kinds and their members' kind, one row each. */
static const SgOpKind coalesced_rows[][2] = {
  { SG_OP_ALL_GATHER_COALESCED, SG_OP_ALL_GATHER },
  { SG_OP_REDUCE_SCATTER_COALESCED, SG_OP_REDUCE_SCATTER },
  { SG_OP_ALL_REDUCE_COALESCED, SG_OP_ALL_REDUCE },
};

/* Column @to of the row whose column @from is @kind, else @none. */
static SgOpKind
coalesced_lookup (SgOpKind kind, int from, int to, SgOpKind none)
{
  for (size_t i = 0; i < G_N_ELEMENTS (coalesced_rows); i++)
    if (coalesced_rows[i][from] == kind)
      return coalesced_rows[i][to];
  return none;
}

SgOpKind
sg_op_member_kind (SgOpKind kind)
{
  return coalesced_lookup (kind, 0, 1, kind);
}

SgOpKind
sg_op_coalesced_kind (SgOpKind kind)
{
  return coalesced_lookup (kind, 1, 0, SG_OP_UNKNOWN);
}

bool
sg_collective_sizes_ok (SgOpKind kind, uint64_t in, uint64_t out, uint64_t k)
{
  uint64_t prod;
  switch (sg_op_member_kind (kind)) {
  case SG_OP_ALL_GATHER:
    return !__builtin_mul_overflow (in, k, &prod) && out == prod;
  case SG_OP_REDUCE_SCATTER:
    return !__builtin_mul_overflow (out, k, &prod) && in == prod;
  case SG_OP_ALL_TO_ALL:
    return true;
  default:
    return in == out;
  }
}

uint64_t
sg_collective_count (SgOpKind kind, uint64_t in, uint64_t out)
{
  return sg_op_member_kind (kind) == SG_OP_REDUCE_SCATTER ? out : in;
}

static const char *const reduce_names[] = { "none", "sum", "avg", "max", "min", "product" };

bool
sg_reduce_from_name (const char *name, SgReduceOp *out)
{
  for (size_t i = 1; i < G_N_ELEMENTS (reduce_names); i++)
    if (name && strcmp (name, reduce_names[i]) == 0) {
      *out = (SgReduceOp)i;
      return true;
    }
  return false;
}

const char *
sg_reduce_name (SgReduceOp op)
{
  g_return_val_if_fail ((size_t)op < G_N_ELEMENTS (reduce_names), "none");
  return reduce_names[op];
}

static const char *const transport_names[SG_TRANSPORT_N] = { "nccl", "ce" };

bool
sg_transport_from_name (const char *name, SgTransport *out)
{
  for (int t = 0; t < SG_TRANSPORT_N; t++)
    if (name && strcmp (name, transport_names[t]) == 0) {
      *out = (SgTransport)t;
      return true;
    }
  return false;
}

const char *
sg_transport_name (SgTransport t)
{
  g_return_val_if_fail ((unsigned)t < SG_TRANSPORT_N, "nccl");
  return transport_names[t];
}

SgPairsError
sg_pairs_check (const int32_t *pairs, int32_t n_pairs, int32_t n_ranks, int32_t *target,
                int32_t *source, int32_t *bad)
{
  for (int32_t r = 0; r < n_ranks; r++)
    target[r] = source[r] = -1;
  for (int32_t i = 0; i < n_pairs; i++) {
    const int32_t s = pairs[2 * i], t = pairs[2 * i + 1];
    *bad = i;
    if (s < 0 || s >= n_ranks || t < 0 || t >= n_ranks)
      return SG_PAIRS_RANGE;
    if (target[s] >= 0)
      return SG_PAIRS_SENDS_TWICE;
    if (source[t] >= 0)
      return SG_PAIRS_RECEIVES_TWICE;
    target[s] = t;
    source[t] = s;
  }
  return SG_PAIRS_OK;
}

bool
sg_strides_dense (int ndim, const int64_t *shape, const int64_t *stride)
{
  int64_t want = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (shape[d] != 1 && stride[d] != want)
      return false;
    want *= shape[d];
  }
  return true;
}

int64_t
sg_rank_roll_block (int64_t b, int64_t k, int64_t shift, int64_t sign, int64_t group_rank)
{
  g_return_val_if_fail (k > 0, 0);
  int64_t x = (b % k + shift % k + (sign < 0 ? -1 : 1) * (group_rank % k)) % k;
  return x < 0 ? x + k : x;
}

static const struct {
  const char *name;
  size_t size;
  bool is_float;
} dtype_table[SG_DTYPE_N] = {
  [SG_DTYPE_INVALID] = { "invalid", 0, false },
  [SG_DTYPE_F32] = { "float32", 4, true },
  [SG_DTYPE_F64] = { "float64", 8, true },
  [SG_DTYPE_BF16] = { "bfloat16", 2, true },
  [SG_DTYPE_F16] = { "float16", 2, true },
  [SG_DTYPE_F8E4M3] = { "float8_e4m3fn", 1, true },
  [SG_DTYPE_F8E5M2] = { "float8_e5m2", 1, true },
  [SG_DTYPE_I64] = { "int64", 8, false },
  [SG_DTYPE_I32] = { "int32", 4, false },
  [SG_DTYPE_I16] = { "int16", 2, false },
  [SG_DTYPE_I8] = { "int8", 1, false },
  [SG_DTYPE_U8] = { "uint8", 1, false },
  [SG_DTYPE_BOOL] = { "bool", 1, false },
};

SgDtype
sg_dtype_from_name (const char *name)
{
  if (!name)
    return SG_DTYPE_INVALID;
  if (strncmp (name, "torch.", 6) == 0)
    name += 6;
  for (int d = 1; d < SG_DTYPE_N; d++)
    if (name[0] == dtype_table[d].name[0] && strcmp (name, dtype_table[d].name) == 0)
      return (SgDtype)d;
  return SG_DTYPE_INVALID;
}

const char *
sg_dtype_name (SgDtype dtype)
{
  g_return_val_if_fail (dtype >= 0 && dtype < SG_DTYPE_N, "invalid");
  return dtype_table[dtype].name;
}

size_t
sg_dtype_size (SgDtype dtype)
{
  g_return_val_if_fail (dtype >= 0 && dtype < SG_DTYPE_N, 0);
  return dtype_table[dtype].size;
}

bool
sg_dtype_is_float (SgDtype dtype)
{
  g_return_val_if_fail (dtype >= 0 && dtype < SG_DTYPE_N, false);
  return dtype_table[dtype].is_float;
}

/* --- tensor options ----------------------------------------------------------- */

static const char *
strip_torch (const char *name)
{
  return strncmp (name, "torch.", 6) == 0 ? name + 6 : name;
}

bool
sg_device_from_name (const char *name, SgDeviceType *type, int32_t *index)
{
  static const struct {
    const char *name;
    SgDeviceType type;
  } types[] = { { "cpu", SG_DEVICE_CPU }, { "cuda", SG_DEVICE_CUDA }, { "meta", SG_DEVICE_META } };
  if (!name)
    return false;
  for (size_t i = 0; i < G_N_ELEMENTS (types); i++) {
    size_t len = strlen (types[i].name);
    if (strncmp (name, types[i].name, len) != 0)
      continue;
    const char *rest = name + len;
    int64_t idx = -1;
    if (*rest == ':') {
      char *end;
      if (!g_ascii_isdigit (rest[1]))
        return false;
      idx = g_ascii_strtoll (rest + 1, &end, 10);
      if (*end || idx > G_MAXINT32)
        return false;
    } else if (*rest) {
      return false;
    }
    *type = types[i].type;
    *index = (int32_t)idx;
    return true;
  }
  return false;
}

SgLayout
sg_layout_from_name (const char *name)
{
  if (!name)
    return 0;
  name = strip_torch (name);
  return strcmp (name, "strided") == 0      ? SG_LAYOUT_STRIDED
         : strcmp (name, "sparse_coo") == 0 ? SG_LAYOUT_SPARSE_COO
                                            : 0;
}

SgMemoryFormat
sg_memory_format_from_name (const char *name)
{
  static const char *const names[] = { NULL, "preserve_format", "contiguous_format",
                                       "channels_last", "channels_last_3d" };
  if (!name)
    return 0;
  name = strip_torch (name);
  for (size_t i = 1; i < G_N_ELEMENTS (names); i++)
    if (strcmp (name, names[i]) == 0)
      return (SgMemoryFormat)i;
  return 0;
}

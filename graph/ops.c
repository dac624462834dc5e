/* ops.c: the op-property table and the dtype table (see ops.h).
 *
 * One row per SgOpKind, in enum order; sg_op_info() checks that at first
 * use. Collective argument positions follow the c10d functional signatures
 * (graph-format.md): all_gather_into_tensor(input, group_size, group_name),
 * reduce_scatter_tensor(input, reduce_op, group_size, group_name),
 * all_reduce(input, reduce_op, group_name),
 * all_to_all_single(input, output_split_sizes, input_split_sizes, group_name),
 * broadcast(input, src, group_name); schedgraph's own
 * collective_permute(input, source_target_pairs, group_name) and
 * rank_roll(input, shift, sign, group_name) (docs/ops.md).
 */
#include "ops.h"

#include <glib.h>
#include <string.h>

#define ROW(k, t, s, c) { k, t, s, c, -1, -1, -1, -1 }
#define COLL(k, t, s, g, n, r) { k, t, s, SG_CLASS_COLLECTIVE, g, n, r, -1 }

static const SgOpInfo op_table[SG_OP_N_KINDS] = {
  ROW (SG_OP_UNKNOWN, NULL, "unknown", SG_CLASS_UNKNOWN),
  ROW (SG_OP_PLACEHOLDER, NULL, "placeholder", SG_CLASS_INPUT),
  ROW (SG_OP_GET_ATTR, NULL, "get_attr", SG_CLASS_INPUT),
  ROW (SG_OP_OUTPUT, NULL, "output", SG_CLASS_OUTPUT),
  ROW (SG_OP_GETITEM, "<built-in function getitem>", "getitem", SG_CLASS_GETITEM),
  ROW (SG_OP_MM, "aten.mm.default", "mm", SG_CLASS_MATMUL),
  ROW (SG_OP_ADDMM, "aten.addmm.default", "addmm", SG_CLASS_MATMUL),
  ROW (SG_OP_BMM, "aten.bmm.default", "bmm", SG_CLASS_MATMUL),
  ROW (SG_OP_BADDBMM, "aten.baddbmm.default", "baddbmm", SG_CLASS_MATMUL),
  ROW (SG_OP_SDPA_FLASH, "aten._scaled_dot_product_flash_attention.default", "sdpa_flash",
       SG_CLASS_ATTENTION),
  ROW (SG_OP_SDPA_FLASH_BWD, "aten._scaled_dot_product_flash_attention_backward.default",
       "sdpa_flash_backward", SG_CLASS_ATTENTION),
  ROW (SG_OP_SDPA_EFFICIENT, "aten._scaled_dot_product_efficient_attention.default",
       "sdpa_efficient", SG_CLASS_ATTENTION),
  ROW (SG_OP_SDPA_EFFICIENT_BWD, "aten._scaled_dot_product_efficient_attention_backward.default",
       "sdpa_efficient_backward", SG_CLASS_ATTENTION),
  ROW (SG_OP_SDPA_CUDNN, "aten._scaled_dot_product_cudnn_attention.default", "sdpa_cudnn",
       SG_CLASS_ATTENTION),
  ROW (SG_OP_SDPA_CUDNN_BWD, "aten._scaled_dot_product_cudnn_attention_backward.default",
       "sdpa_cudnn_backward", SG_CLASS_ATTENTION),
  ROW (SG_OP_ADD_TENSOR, "aten.add.Tensor", "add", SG_CLASS_POINTWISE),
  ROW (SG_OP_ADD_SCALAR, "aten.add.Scalar", "add_scalar", SG_CLASS_POINTWISE),
  ROW (SG_OP_SUB_TENSOR, "aten.sub.Tensor", "sub", SG_CLASS_POINTWISE),
  ROW (SG_OP_SUB_SCALAR, "aten.sub.Scalar", "sub_scalar", SG_CLASS_POINTWISE),
  ROW (SG_OP_MUL_TENSOR, "aten.mul.Tensor", "mul", SG_CLASS_POINTWISE),
  ROW (SG_OP_MUL_SCALAR, "aten.mul.Scalar", "mul_scalar", SG_CLASS_POINTWISE),
  ROW (SG_OP_DIV_TENSOR, "aten.div.Tensor", "div", SG_CLASS_POINTWISE),
  ROW (SG_OP_DIV_SCALAR, "aten.div.Scalar", "div_scalar", SG_CLASS_POINTWISE),
  ROW (SG_OP_POW_TENSOR_SCALAR, "aten.pow.Tensor_Scalar", "pow", SG_CLASS_POINTWISE),
  ROW (SG_OP_RSQRT, "aten.rsqrt.default", "rsqrt", SG_CLASS_POINTWISE),
  ROW (SG_OP_SQRT, "aten.sqrt.default", "sqrt", SG_CLASS_POINTWISE),
  ROW (SG_OP_EXP, "aten.exp.default", "exp", SG_CLASS_POINTWISE),
  ROW (SG_OP_NEG, "aten.neg.default", "neg", SG_CLASS_POINTWISE),
  ROW (SG_OP_RECIPROCAL, "aten.reciprocal.default", "reciprocal", SG_CLASS_POINTWISE),
  ROW (SG_OP_SILU, "aten.silu.default", "silu", SG_CLASS_POINTWISE),
  ROW (SG_OP_SILU_BACKWARD, "aten.silu_backward.default", "silu_backward", SG_CLASS_POINTWISE),
  ROW (SG_OP_GELU, "aten.gelu.default", "gelu", SG_CLASS_POINTWISE),
  ROW (SG_OP_GELU_BACKWARD, "aten.gelu_backward.default", "gelu_backward", SG_CLASS_POINTWISE),
  ROW (SG_OP_RELU, "aten.relu.default", "relu", SG_CLASS_POINTWISE),
  ROW (SG_OP_SIGMOID, "aten.sigmoid.default", "sigmoid", SG_CLASS_POINTWISE),
  ROW (SG_OP_TANH, "aten.tanh.default", "tanh", SG_CLASS_POINTWISE),
  ROW (SG_OP_SUM_DIM, "aten.sum.dim_IntList", "sum_dim", SG_CLASS_REDUCTION),
  ROW (SG_OP_SUM, "aten.sum.default", "sum", SG_CLASS_REDUCTION),
  ROW (SG_OP_MEAN_DIM, "aten.mean.dim", "mean_dim", SG_CLASS_REDUCTION),
  ROW (SG_OP_MEAN, "aten.mean.default", "mean", SG_CLASS_REDUCTION),
  ROW (SG_OP_AMAX, "aten.amax.default", "amax", SG_CLASS_REDUCTION),
  ROW (SG_OP_VIEW, "aten.view.default", "view", SG_CLASS_VIEW),
  ROW (SG_OP_UNSAFE_VIEW, "aten._unsafe_view.default", "unsafe_view", SG_CLASS_VIEW),
  ROW (SG_OP_RESHAPE, "aten.reshape.default", "reshape", SG_CLASS_COPY),
  ROW (SG_OP_T, "aten.t.default", "t", SG_CLASS_VIEW),
  ROW (SG_OP_TRANSPOSE, "aten.transpose.int", "transpose", SG_CLASS_VIEW),
  ROW (SG_OP_PERMUTE, "aten.permute.default", "permute", SG_CLASS_VIEW),
  ROW (SG_OP_EXPAND, "aten.expand.default", "expand", SG_CLASS_VIEW),
  ROW (SG_OP_UNSQUEEZE, "aten.unsqueeze.default", "unsqueeze", SG_CLASS_VIEW),
  ROW (SG_OP_SQUEEZE_DIM, "aten.squeeze.dim", "squeeze", SG_CLASS_VIEW),
  ROW (SG_OP_DETACH, "aten.detach.default", "detach", SG_CLASS_VIEW),
  ROW (SG_OP_ALIAS, "aten.alias.default", "alias", SG_CLASS_VIEW),
  ROW (SG_OP_SLICE, "aten.slice.Tensor", "slice", SG_CLASS_VIEW),
  ROW (SG_OP_SELECT, "aten.select.int", "select", SG_CLASS_VIEW),
  ROW (SG_OP_CLONE, "aten.clone.default", "clone", SG_CLASS_COPY),
  ROW (SG_OP_TO_COPY, "aten._to_copy.default", "to_copy", SG_CLASS_COPY),
  ROW (SG_OP_CAT, "aten.cat.default", "cat", SG_CLASS_COPY),
  ROW (SG_OP_ONES_LIKE, "aten.ones_like.default", "ones_like", SG_CLASS_CREATION),
  ROW (SG_OP_ZEROS_LIKE, "aten.zeros_like.default", "zeros_like", SG_CLASS_CREATION),
  ROW (SG_OP_FULL, "aten.full.default", "full", SG_CLASS_CREATION),
  ROW (SG_OP_EMPTY, "aten.empty.memory_format", "empty", SG_CLASS_CREATION),
  COLL (SG_OP_ALL_GATHER, "_c10d_functional.all_gather_into_tensor.default", "all_gather", 2, 1,
        -1),
  COLL (SG_OP_REDUCE_SCATTER, "_c10d_functional.reduce_scatter_tensor.default", "reduce_scatter",
        3, 2, 1),
  COLL (SG_OP_ALL_REDUCE, "_c10d_functional.all_reduce.default", "all_reduce", 2, -1, 1),
  COLL (SG_OP_ALL_TO_ALL, "_c10d_functional.all_to_all_single.default", "all_to_all", 3, -1, -1),
  COLL (SG_OP_BROADCAST, "_c10d_functional.broadcast.default", "broadcast", 2, -1, -1),
  ROW (SG_OP_WAIT, "_c10d_functional.wait_tensor.default", "wait", SG_CLASS_WAIT),
  ROW (SG_OP_BUCKET_PACK, "schedgraph.bucket_pack", "bucket_pack", SG_CLASS_BUCKET),
  ROW (SG_OP_BUCKET_UNPACK, "schedgraph.bucket_unpack", "bucket_unpack", SG_CLASS_BUCKET),
  { SG_OP_COLLECTIVE_PERMUTE, "schedgraph.collective_permute", "collective_permute",
    SG_CLASS_COLLECTIVE, 2, -1, -1, 1 },
  { SG_OP_RANK_ROLL, "schedgraph.rank_roll", "rank_roll", SG_CLASS_COPY, 3, -1, -1, -1 },
};

static GHashTable *
target_index (void)
{
  static gsize once = 0;
  static GHashTable *index;
  if (g_once_init_enter (&once)) {
    index = g_hash_table_new (g_str_hash, g_str_equal);
    for (int k = 0; k < SG_OP_N_KINDS; k++) {
      g_assert (op_table[k].kind == (SgOpKind)k);
      if (op_table[k].target)
        g_hash_table_insert (index, (gpointer)op_table[k].target, GINT_TO_POINTER (k));
    }
    g_once_init_leave (&once, 1);
  }
  return index;
}

const SgOpInfo *
sg_op_info (SgOpKind kind)
{
  g_return_val_if_fail (kind >= 0 && kind < SG_OP_N_KINDS, &op_table[SG_OP_UNKNOWN]);
  return &op_table[kind];
}

SgOpKind
sg_op_from_target (const char *target)
{
  gpointer value;
  if (!target || !g_hash_table_lookup_extended (target_index (), target, NULL, &value))
    return SG_OP_UNKNOWN;
  return (SgOpKind)GPOINTER_TO_INT (value);
}

const char *
sg_op_name (SgOpKind kind)
{
  return sg_op_info (kind)->short_name;
}

bool
sg_op_is_alias (SgOpKind kind)
{
  SgOpClass c = sg_op_class (kind);
  return c == SG_CLASS_VIEW || c == SG_CLASS_GETITEM || c == SG_CLASS_WAIT;
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
    if (strcmp (name, dtype_table[d].name) == 0)
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

/* ops.h: the one table of op kinds, op classes and dtypes.
 *
 * Targets (`aten.mm.default`, `_c10d_functional.all_gather_into_tensor.default`
 * ...) and dtype names are interned into these enums once, at load time; no
 * code outside graph/ compares target strings. The table has no dependency
 * on the graph IR, so runtime/ (which reads plans, not graphs) links it too
 * (meson: sg_ops_dep).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Keep in sync with the table in ops.c (one row per kind, same order). */
typedef enum {
  SG_OP_UNKNOWN = 0,
  /* graph structure */
  SG_OP_PLACEHOLDER,
  SG_OP_GET_ATTR,
  SG_OP_OUTPUT,
  SG_OP_GETITEM,
  /* matmul family */
  SG_OP_MM,
  SG_OP_ADDMM,
  SG_OP_BMM,
  SG_OP_BADDBMM,
  /* attention (outputs are tuples) */
  SG_OP_SDPA_FLASH,
  SG_OP_SDPA_FLASH_BWD,
  SG_OP_SDPA_EFFICIENT,
  SG_OP_SDPA_EFFICIENT_BWD,
  SG_OP_SDPA_CUDNN,
  SG_OP_SDPA_CUDNN_BWD,
  /* pointwise */
  SG_OP_ADD_TENSOR,
  SG_OP_ADD_SCALAR,
  SG_OP_SUB_TENSOR,
  SG_OP_SUB_SCALAR,
  SG_OP_MUL_TENSOR,
  SG_OP_MUL_SCALAR,
  SG_OP_DIV_TENSOR,
  SG_OP_DIV_SCALAR,
  SG_OP_POW_TENSOR_SCALAR,
  SG_OP_RSQRT,
  SG_OP_SQRT,
  SG_OP_EXP,
  SG_OP_NEG,
  SG_OP_RECIPROCAL,
  SG_OP_SILU,
  SG_OP_SILU_BACKWARD,
  SG_OP_GELU,
  SG_OP_GELU_BACKWARD,
  SG_OP_RELU,
  SG_OP_SIGMOID,
  SG_OP_TANH,
  /* reductions */
  SG_OP_SUM_DIM,
  SG_OP_SUM,
  SG_OP_MEAN_DIM,
  SG_OP_MEAN,
  SG_OP_AMAX,
  /* views and aliases (no kernel, no bytes moved) */
  SG_OP_VIEW,
  SG_OP_UNSAFE_VIEW,
  SG_OP_RESHAPE,
  SG_OP_T,
  SG_OP_TRANSPOSE,
  SG_OP_PERMUTE,
  SG_OP_EXPAND,
  SG_OP_UNSQUEEZE,
  SG_OP_SQUEEZE_DIM,
  SG_OP_DETACH,
  SG_OP_ALIAS,
  SG_OP_SLICE,
  SG_OP_SELECT,
  /* copies and creation */
  SG_OP_CLONE,
  SG_OP_TO_COPY,
  SG_OP_CAT,
  SG_OP_ONES_LIKE,
  SG_OP_ZEROS_LIKE,
  SG_OP_FULL,
  SG_OP_EMPTY,
  /* collectives (c10d functional) and their wait */
  SG_OP_ALL_GATHER,
  SG_OP_REDUCE_SCATTER,
  SG_OP_ALL_REDUCE,
  SG_OP_ALL_TO_ALL,
  SG_OP_BROADCAST,
  /* coalesced (grouped) collectives: one call over a list of tensors,
   * returning a list; each element is read through getitem and waited on
   * (docs/graph-format.md). Members are all_gather / reduce_scatter /
   * all_reduce; sg_op_member_kind() maps them */
  SG_OP_ALL_GATHER_COALESCED,
  SG_OP_REDUCE_SCATTER_COALESCED,
  SG_OP_ALL_REDUCE_COALESCED,
  SG_OP_WAIT,
  /* schedgraph's own ops (docs/ops.md): bucket/'s pack and unpack, the
   * point-to-point collective and the rank-dependent block rotation that
   * ring decompositions need */
  SG_OP_BUCKET_PACK,
  SG_OP_BUCKET_UNPACK,
  SG_OP_COLLECTIVE_PERMUTE,
  SG_OP_RANK_ROLL,
  SG_OP_N_KINDS
} SgOpKind;

typedef enum {
  SG_CLASS_UNKNOWN = 0, /* scheduled as cheap compute */
  SG_CLASS_INPUT,       /* placeholder, get_attr */
  SG_CLASS_OUTPUT,
  SG_CLASS_GETITEM, /* element of a tuple value: an alias */
  SG_CLASS_MATMUL,
  SG_CLASS_ATTENTION,
  SG_CLASS_POINTWISE,
  SG_CLASS_REDUCTION,
  SG_CLASS_VIEW, /* alias of its first input's storage */
  SG_CLASS_COPY,
  SG_CLASS_CREATION,
  SG_CLASS_COLLECTIVE,
  SG_CLASS_WAIT,
  SG_CLASS_BUCKET, /* bucket pack / unpack copies */
} SgOpClass;

/* Named parameters of the ops' schemas (ATen's native_functions.yaml, the
 * c10d functional ops, docs/ops.md for schedgraph's own). The op table
 * lists each op's positional parameters in order; sg_op_param_pos() says
 * where one is, sg_param_name() how it is spelled as a keyword argument.
 * This is the one place argument positions are defined. */
typedef enum {
  SG_PARAM_NONE = 0, /* ends a positional list */
  /* tensors and scalars of most ops */
  SG_PARAM_SELF,
  SG_PARAM_OTHER,
  SG_PARAM_ALPHA,
  SG_PARAM_EXPONENT,
  SG_PARAM_GRAD_OUTPUT,
  SG_PARAM_APPROXIMATE,
  SG_PARAM_ROUNDING_MODE,
  SG_PARAM_INDEX, /* getitem's and select's index */
  /* matmul family */
  SG_PARAM_MAT1,
  SG_PARAM_MAT2,
  SG_PARAM_BATCH1,
  SG_PARAM_BATCH2,
  SG_PARAM_BETA,
  /* attention: forward */
  SG_PARAM_QUERY,
  SG_PARAM_KEY,
  SG_PARAM_VALUE,
  SG_PARAM_ATTN_BIAS,
  SG_PARAM_COMPUTE_LOG_SUMEXP,
  SG_PARAM_DROPOUT_P,
  SG_PARAM_IS_CAUSAL,
  SG_PARAM_RETURN_DEBUG_MASK,
  SG_PARAM_SCALE, /* keyword-only in every SDPA overload */
  /* attention: backward */
  SG_PARAM_GRAD_OUT,
  SG_PARAM_OUT,
  SG_PARAM_LOGSUMEXP,
  SG_PARAM_CUM_SEQ_Q,
  SG_PARAM_CUM_SEQ_K,
  SG_PARAM_MAX_Q,
  SG_PARAM_MAX_K,
  SG_PARAM_PHILOX_SEED,
  SG_PARAM_PHILOX_OFFSET,
  SG_PARAM_GRAD_INPUT_MASK,
  /* shapes and dims (views, reductions, creation) */
  SG_PARAM_SIZE,
  SG_PARAM_SHAPE,
  SG_PARAM_DIM,
  SG_PARAM_DIM0,
  SG_PARAM_DIM1,
  SG_PARAM_DIMS,
  SG_PARAM_KEEPDIM,
  SG_PARAM_START,
  SG_PARAM_END,
  SG_PARAM_STEP,
  SG_PARAM_TENSORS,
  SG_PARAM_FILL_VALUE,
  /* tensor options (keyword-only in ATen) */
  SG_PARAM_DTYPE,
  SG_PARAM_LAYOUT,
  SG_PARAM_DEVICE,
  SG_PARAM_PIN_MEMORY,
  SG_PARAM_MEMORY_FORMAT,
  SG_PARAM_NON_BLOCKING,
  /* collectives */
  SG_PARAM_INPUT,
  SG_PARAM_GROUP_SIZE,
  SG_PARAM_GROUP_NAME,
  SG_PARAM_REDUCE_OP,
  SG_PARAM_OUTPUT_SPLIT_SIZES,
  SG_PARAM_INPUT_SPLIT_SIZES,
  SG_PARAM_SRC,
  SG_PARAM_TENSOR, /* wait_tensor's collective */
  /* schedgraph's bucket ops (docs/ops.md) */
  SG_PARAM_INPUTS,
  SG_PARAM_K,
  SG_PARAM_INTERLEAVE,
  SG_PARAM_OFFSET,
  SG_PARAM_NUMEL,
  /* schedgraph's ring ops (docs/ops.md) */
  SG_PARAM_SOURCE_TARGET_PAIRS,
  SG_PARAM_TRANSPORT, /* keyword-only */
  SG_PARAM_SHIFT,
  SG_PARAM_SIGN,
  SG_PARAM_N
} SgParam;

typedef struct {
  SgOpKind kind;
  const char *target; /* canonical str(node.target), or NULL for structure ops */
  const char *short_name; /* stable lower-case name for reports and plans */
  SgOpClass klass;
  /* Positional parameters in schema order, ended by SG_PARAM_NONE; NULL
   * when the op has none or is unknown. Keyword-only parameters (SDPA's
   * scale, tensor options) are not listed: they are read by name. */
  const SgParam *params;
} SgOpInfo;

/* The op table (ops.c), one row per kind; read it through sg_op_info(). */
extern const SgOpInfo sg_op_table[SG_OP_N_KINDS];

/* (transfer none) The row for @kind (SG_OP_UNKNOWN's for a kind out of
 * range); never NULL. Inline: every pass asks per node. */
static inline const SgOpInfo *
sg_op_info (SgOpKind kind)
{
  return &sg_op_table[(unsigned)kind < SG_OP_N_KINDS ? kind : SG_OP_UNKNOWN];
}

/* Interns a target string; SG_OP_UNKNOWN when the table has no row. */
SgOpKind sg_op_from_target (const char *target);

/* Stable short name of a kind ("mm", "all_gather", ...). */
const char *sg_op_name (SgOpKind kind);

static inline SgOpClass
sg_op_class (SgOpKind kind)
{
  return sg_op_info (kind)->klass;
}

static inline bool
sg_op_is_collective (SgOpKind kind)
{
  return sg_op_class (kind) == SG_CLASS_COLLECTIVE;
}

/* The kind of each member of a coalesced collective (all_gather for
 * all_gather_into_tensor_coalesced, ...); @kind itself for every other
 * kind. */
SgOpKind sg_op_member_kind (SgOpKind kind);

/* The coalesced kind whose members are of @kind (all_gather ->
 * all_gather_coalesced ...); SG_OP_UNKNOWN when there is none. */
SgOpKind sg_op_coalesced_kind (SgOpKind kind);

static inline bool
sg_op_is_coalesced (SgOpKind kind)
{
  return sg_op_member_kind (kind) != kind;
}

/* The element-count rule of one collective (or one member of a coalesced
 * one) of @kind over a group of @k ranks, @in input and @out output
 * elements: all_gather out = in x k, reduce_scatter in = out x k,
 * all_reduce / broadcast / collective_permute out = in; all_to_all any
 * (its splits decide). The one copy of the rule: the loader, the
 * validators of graphs and plans and the runtimes call it. */
bool sg_collective_sizes_ok (SgOpKind kind, uint64_t in, uint64_t out, uint64_t k);

/* NCCL's count argument of that collective: all_gather / all_reduce /
 * broadcast / all_to_all / collective_permute: input elements;
 * reduce_scatter: output elements. */
uint64_t sg_collective_count (SgOpKind kind, uint64_t in, uint64_t out);

/* True for ops whose value aliases an input's storage (views, getitem,
 * wait_tensor): no kernel runs and no bytes are allocated for them. */
static inline bool
sg_op_is_alias (SgOpKind kind)
{
  SgOpClass c = sg_op_class (kind);
  return c == SG_CLASS_VIEW || c == SG_CLASS_GETITEM || c == SG_CLASS_WAIT;
}

/* Position of @param among @kind's positional arguments, or -1 when the
 * schema has no such positional parameter (keyword-only or absent). */
int sg_op_param_pos (SgOpKind kind, SgParam param);

/* The keyword spelling of @param ("is_causal", "group_name", ...). */
const char *sg_param_name (SgParam param);

/* The two operands of a matmul-class op: mm/bmm (self, mat2), addmm
 * (mat1, mat2; self is the bias), baddbmm (batch1, batch2). False for
 * other kinds. */
bool sg_op_matmul_params (SgOpKind kind, SgParam *a, SgParam *b);

/* Reduce ops of reduce_scatter / all_reduce. */
typedef enum {
  SG_REDUCE_NONE = 0,
  SG_REDUCE_SUM,
  SG_REDUCE_AVG,
  SG_REDUCE_MAX,
  SG_REDUCE_MIN,
  SG_REDUCE_PRODUCT,
} SgReduceOp;

/* "sum", "avg", "max", "min", "product"; false when unknown. */
bool sg_reduce_from_name (const char *name, SgReduceOp *out);
const char *sg_reduce_name (SgReduceOp op);

/* How a collective_permute moves its data (docs/ops.md): NCCL send/recv, or
 * the copy engine over CUDA IPC between ranks of one node (no SMs). */
typedef enum {
  SG_TRANSPORT_NCCL = 0,
  SG_TRANSPORT_CE,
  SG_TRANSPORT_N
} SgTransport;

/* "nccl", "ce"; false when unknown. */
bool sg_transport_from_name (const char *name, SgTransport *out);
const char *sg_transport_name (SgTransport t);

/* collective_permute's pairs rule, shared by the graph and the plan
 * validators: @n_pairs (source, target) pairs of group ranks
 * (pairs[2 i], pairs[2 i + 1]) over a group of @n_ranks must form a partial
 * permutation: ranks in range, none sending twice, none receiving twice.
 * Fills @target / @source (n_ranks entries each, -1: none). On failure
 * *@bad is the index of the first pair that breaks it. */
typedef enum {
  SG_PAIRS_OK = 0,
  SG_PAIRS_RANGE,
  SG_PAIRS_SENDS_TWICE,
  SG_PAIRS_RECEIVES_TWICE,
} SgPairsError;
SgPairsError sg_pairs_check (const int32_t *pairs, int32_t n_pairs, int32_t n_ranks,
                             int32_t *target, int32_t *source, int32_t *bad);

/* True when @ndim dims of @shape with element @stride are dense row-major
 * (logical order = memory order; size-1 dims may have any stride). */
bool sg_strides_dense (int ndim, const int64_t *shape, const int64_t *stride);

/* schedgraph.rank_roll's block map, the one place of its arithmetic
 * (docs/ops.md): output block @b of @k takes input block
 * (b + shift + sign * group_rank) mod k, in [0, k). */
int64_t sg_rank_roll_block (int64_t b, int64_t k, int64_t shift, int64_t sign, int64_t group_rank);

typedef enum {
  SG_DTYPE_INVALID = 0,
  SG_DTYPE_F32,
  SG_DTYPE_F64,
  SG_DTYPE_BF16,
  SG_DTYPE_F16,
  SG_DTYPE_F8E4M3,
  SG_DTYPE_F8E5M2,
  SG_DTYPE_I64,
  SG_DTYPE_I32,
  SG_DTYPE_I16,
  SG_DTYPE_I8,
  SG_DTYPE_U8,
  SG_DTYPE_BOOL,
  SG_DTYPE_N
} SgDtype;

/* Tensor options that arguments name (a dtype is an SgDtype below). The
 * argument keeps its spelling; these enums are what it means. */
typedef enum {
  SG_DEVICE_CPU = 1,
  SG_DEVICE_CUDA,
  SG_DEVICE_META,
} SgDeviceType;

typedef enum {
  SG_LAYOUT_STRIDED = 1,
  SG_LAYOUT_SPARSE_COO,
} SgLayout;

typedef enum {
  SG_MEMORY_FORMAT_PRESERVE = 1,
  SG_MEMORY_FORMAT_CONTIGUOUS,
  SG_MEMORY_FORMAT_CHANNELS_LAST,
  SG_MEMORY_FORMAT_CHANNELS_LAST_3D,
} SgMemoryFormat;

/* "cpu", "cuda", "cuda:N", "meta" (as torch prints a device): the type and
 * the index (-1 when none). False for any other text. */
bool sg_device_from_name (const char *name, SgDeviceType *type, int32_t *index);
/* "torch.strided", "torch.sparse_coo" ("torch." optional); 0 when unknown. */
SgLayout sg_layout_from_name (const char *name);
/* "torch.preserve_format", "torch.contiguous_format", "torch.channels_last",
 * "torch.channels_last_3d" ("torch." optional); 0 when unknown. */
SgMemoryFormat sg_memory_format_from_name (const char *name);

/* "float32", "bfloat16", ... as torch prints them without "torch.";
 * SG_DTYPE_INVALID when unknown. */
SgDtype sg_dtype_from_name (const char *name);
const char *sg_dtype_name (SgDtype dtype);
size_t sg_dtype_size (SgDtype dtype);
bool sg_dtype_is_float (SgDtype dtype);

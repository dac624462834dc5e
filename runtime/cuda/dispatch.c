/* dispatch.c: one plan KERNEL instruction -> CUDA kernels / cuBLAS calls.
 *
 * Reads the instruction's args/kwargs in ATen's schemas (the CPU backend's
 * kernels.h says the same: broadcasting, alpha/beta, keepdim, the SDPA tuple
 * layouts) and queues the work on the instruction's stream. Every op the CPU
 * backend runs runs here; check_ins rejects the rest (and attention with a
 * bias or dropout) before any work, naming the node.
 * Mirrors: ATen's native functions of the ops in graph/ops.h.
 * Requires: SgCuState set up (arena, scratch, cuBLAS handle).
 * Invalidates: nothing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda-private.h"

static bool
fail_ins (GError **error, int code, const SgPlanIns *ins, const char *fmt, const char *what)
{
  g_set_error (error, SG_RT_ERROR, code, "node %s (%s): %s%s", ins->name ? ins->name : "?",
               sg_op_name (ins->op), fmt, what ? what : "");
  return false;
}

void
sg_cu_value_tensor (const SgCuState *st, const SgPlan *plan, int32_t value, SgCuTensor *out)
{
  memset (out, 0, sizeof *out);
  const SgPlanValue *v = &plan->values[value];
  out->dtype = v->dtype;
  out->ndim = v->ndim;
  for (int k = 0; k < v->ndim; k++) {
    out->shape[k] = v->shape[k];
    out->stride[k] = v->stride[k];
  }
  out->ptr = v->buffer >= 0 && st
               ? st->arena + plan->buffers[v->buffer].offset
                   + sg_plan_value_offset (plan, v, st->group_rank)
               : NULL;
}

/* Tensor argument @i (a {"value": id} object). */
static bool
arg_tensor (const SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, int i, SgCuTensor *t)
{
  int32_t id;
  if (!sg_plan_arg_value (ins, i, &id) || id < 0 || id >= plan->n_values)
    return false;
  sg_cu_value_tensor (st, plan, id, t);
  return true;
}

static const cJSON *
arg_item (const SgPlanIns *ins, int i)
{
  return ins->args && cJSON_IsArray (ins->args) ? cJSON_GetArrayItem (ins->args, i) : NULL;
}

static bool
arg_bool (const SgPlanIns *ins, int i, bool dflt)
{
  const cJSON *v = arg_item (ins, i);
  if (cJSON_IsBool (v))
    return cJSON_IsTrue (v);
  if (cJSON_IsNumber (v))
    return v->valuedouble != 0;
  return dflt;
}

static double
kw_double (const SgPlanIns *ins, const char *key, double dflt)
{
  const cJSON *v = sg_plan_kwarg (ins, key);
  return cJSON_IsNumber (v) ? v->valuedouble : dflt;
}

static bool
out_tensor (const SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, int j, SgCuTensor *t)
{
  if (j >= ins->n_out || ins->out[j] < 0)
    return false;
  sg_cu_value_tensor (st, plan, ins->out[j], t);
  return t->ptr != NULL || st == NULL;
}

/* Attention argument positions (the op table's, graph/ops.c). */
typedef struct {
  int q, k, v, out, lse, dout, causal, dropout, bias; /* -1: absent */
  bool backward;
} AttnSchema;

static bool
attn_schema (SgOpKind op, AttnSchema *s)
{
  if (sg_op_class (op) != SG_CLASS_ATTENTION)
    return false;
  *s = (AttnSchema){ sg_op_param_pos (op, SG_PARAM_QUERY), sg_op_param_pos (op, SG_PARAM_KEY),
                     sg_op_param_pos (op, SG_PARAM_VALUE), sg_op_param_pos (op, SG_PARAM_OUT),
                     sg_op_param_pos (op, SG_PARAM_LOGSUMEXP),
                     sg_op_param_pos (op, SG_PARAM_GRAD_OUT),
                     sg_op_param_pos (op, SG_PARAM_IS_CAUSAL),
                     sg_op_param_pos (op, SG_PARAM_DROPOUT_P),
                     sg_op_param_pos (op, SG_PARAM_ATTN_BIAS),
                     sg_op_param_pos (op, SG_PARAM_GRAD_OUT) >= 0 };
  return true;
}

static bool
dtype_ok (SgDtype d)
{
  switch (d) {
  case SG_DTYPE_F32: case SG_DTYPE_F64: case SG_DTYPE_BF16: case SG_DTYPE_F16:
  case SG_DTYPE_I64: case SG_DTYPE_I32: case SG_DTYPE_I16: case SG_DTYPE_I8:
  case SG_DTYPE_U8: case SG_DTYPE_BOOL:
    return true;
  default: return false;
  }
}

/* The operands of attention instruction @ins in @st's arena (NULL pointers
 * without @st); false when they are not tensors. A forward's log-sum-exp
 * padded beyond Sq (the memory-efficient kernel's) is viewed as its first Sq
 * entries; one shorter than Sq is left out (no statistics). */
static bool
attn_args (const SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, bool deterministic,
           SgCuSdpa *a)
{
  AttnSchema sc;
  memset (a, 0, sizeof *a);
  if (!attn_schema (ins->op, &sc))
    return false;
  a->backward = sc.backward;
  a->causal = arg_bool (ins, sc.causal, false);
  a->scale = kw_double (ins, "scale", 0.0);
  a->deterministic = deterministic;
  if (!arg_tensor (st, plan, ins, sc.q, &a->q) || !arg_tensor (st, plan, ins, sc.k, &a->k) ||
      !arg_tensor (st, plan, ins, sc.v, &a->v) || a->q.ndim != 4)
    return false;
  if (!sc.backward) {
    if (!out_tensor (st, plan, ins, 0, &a->o))
      return false;
    SgCuTensor *l = &a->lse;
    if (!out_tensor (st, plan, ins, 1, l) || l->ndim < 3 || l->shape[2] < a->q.shape[2])
      memset (l, 0, sizeof *l);
    else
      l->shape[2] = a->q.shape[2];
    return true;
  }
  return arg_tensor (st, plan, ins, sc.dout, &a->dout) && arg_tensor (st, plan, ins, sc.out, &a->o) &&
         arg_tensor (st, plan, ins, sc.lse, &a->lse) && out_tensor (st, plan, ins, 0, &a->dq) &&
         out_tensor (st, plan, ins, 1, &a->dk) && out_tensor (st, plan, ins, 2, &a->dv);
}

/* Every tensor @ins reads or writes starts 16-byte aligned in the arena
 * (cuDNN's kernels load 16 bytes at a time; the arena itself is 256-aligned). */
static bool
arena_aligned (const SgPlan *plan, const SgPlanIns *ins)
{
  for (int j = 0; j < ins->n_in + ins->n_out; j++) {
    const int32_t id = j < ins->n_in ? ins->in[j] : ins->out[j - ins->n_in];
    if (id < 0 || id >= plan->n_values || plan->values[id].buffer < 0)
      continue;
    const SgPlanValue *v = &plan->values[id];
    if ((plan->buffers[v->buffer].offset + v->offset) % 16 != 0 || v->roll_block % 16 != 0)
      return false; /* on every rank alike: each block start is aligned too */
  }
  return true;
}

/* cuDNN's plan for attention instruction @i, or -1 with *@why. */
static int32_t
attn_plan (SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, uint64_t *ws, char **why)
{
  SgCuSdpa a;
  if (!st->dnn)
    return -1; /* st->attn_why says why (backend setup) */
  const char *want = g_getenv ("SG_CUDA_ATTENTION");
  if (st->exact && !(want && strcmp (want, "cudnn") == 0)) {
    /* exact mode keeps the CPU reference's numerics: fp32 math throughout
     * (cuDNN rounds P and dS to bf16, which nearly one-hot softmaxes turn
     * into 1e-1 of relative error in the gradients: docs/gpu.md) */
    *why = g_strdup ("exact mode computes attention in fp32 (SG_CUDA_ATTENTION=cudnn: on cuDNN)");
    return -1;
  }
  if (!attn_args (NULL, plan, ins, st->exact, &a)) {
    *why = g_strdup ("operands are not tensors");
    return -1;
  }
  if (!arena_aligned (plan, ins)) {
    *why = g_strdup ("an operand is not 16-byte aligned in the arena");
    return -1;
  }
  int32_t p = sg_cu_dnn_sdpa_plan (st->dnn, &a, ws, why);
  if (p < 0 && a.deterministic) { /* exact mode: a deterministic backward, else cuDNN's default */
    free (*why);
    *why = NULL;
    a.deterministic = false;
    p = sg_cu_dnn_sdpa_plan (st->dnn, &a, ws, why);
  }
  return p;
}

bool
sg_cu_prepare_ins (SgCuState *st, const SgPlan *plan, int32_t i, uint64_t *scratch_need,
                   GError **error)
{
  const SgPlanIns *ins = &plan->ins[i];
  int64_t ws = -1;
  if (st->attn_plan)
    st->attn_plan[i] = -1;
  if (ins->kind == SG_INS_KERNEL && sg_op_class (ins->op) == SG_CLASS_ATTENTION &&
      st->attn_plan) {
    char *why = NULL;
    uint64_t w = 0;
    const int32_t p = attn_plan (st, plan, ins, &w, &why);
    st->n_attn++;
    if (p >= 0) {
      st->attn_plan[i] = p;
      st->n_attn_dnn++;
      ws = (int64_t)w;
    }
    if (why && !st->attn_why)
      st->attn_why = g_strdup_printf ("node %s: %s", ins->name ? ins->name : "?", why);
    free (why);
    const char *want = g_getenv ("SG_CUDA_ATTENTION");
    if (p < 0 && want && strcmp (want, "cudnn") == 0)
      return fail_ins (error, SG_RT_ERROR_UNSUPPORTED, ins,
                       "SG_CUDA_ATTENTION=cudnn, but cuDNN does not run it: ",
                       st->attn_why ? st->attn_why : "?");
  }
  return sg_cu_check_ins (plan, ins, st->exact, ws, scratch_need, error);
}

char *
sg_cu_attention_note (const SgCuState *st)
{
  int64_t ver = 0;
  const bool loaded = st->dnn && sg_cu_dnn_load (&ver, NULL);
  if (st->n_attn == 0)
    return g_strdup_printf ("attention: none in the plan (%s)",
                            loaded ? "cuDNN loaded" : "math path");
  GString *s = g_string_new (NULL);
  if (loaded)
    g_string_append_printf (s, "attention: cuDNN %d.%d.%d fused SDPA on %d of %d instructions "
                            "(%s)", (int)(ver / 10000), (int)(ver / 100 % 100), (int)(ver % 100),
                            st->n_attn_dnn, st->n_attn, sg_cu_dnn_built ());
  else
    g_string_append_printf (s, "attention: math path on cuBLAS for all %d instructions",
                            st->n_attn);
  if (st->attn_why)
    g_string_append_printf (s, "; %s: %s", loaded ? "math path where" : "no cuDNN",
                            st->attn_why);
  return g_string_free (s, FALSE);
}

bool
sg_cu_check_ins (const SgPlan *plan, const SgPlanIns *ins, bool exact, int64_t attn_ws,
                 uint64_t *scratch_need, GError **error)
{
  if (ins->kind != SG_INS_KERNEL && ins->kind != SG_INS_COLLECTIVE)
    return true;
  for (int j = 0; j < ins->n_out; j++)
    if (ins->out[j] >= 0 && !dtype_ok (plan->values[ins->out[j]].dtype))
      return fail_ins (error, SG_RT_ERROR_UNSUPPORTED, ins, "unsupported output dtype ",
                       sg_dtype_name (plan->values[ins->out[j]].dtype));
  uint64_t need = 0;
  SgCuTensor a, b, o;
  if (ins->kind == SG_INS_COLLECTIVE) {
    if (ins->n_in < 1 || ins->n_out != ins->n_in)
      return fail_ins (error, SG_RT_ERROR_UNSUPPORTED, ins, "collective without tensors", NULL);
    const SgOpKind kind = sg_op_member_kind (ins->op);
    if (kind != SG_OP_ALL_GATHER && kind != SG_OP_REDUCE_SCATTER && kind != SG_OP_ALL_REDUCE &&
        kind != SG_OP_ALL_TO_ALL && kind != SG_OP_BROADCAST && kind != SG_OP_COLLECTIVE_PERMUTE)
      return fail_ins (error, SG_RT_ERROR_UNSUPPORTED, ins, "not a collective NCCL runs", NULL);
    /* every member's operands at once (a coalesced collective's members run
     * as one NCCL group): the dense copies of all of them in the scratch */
    for (int32_t m = 0; m < ins->n_in; m++) {
      if (ins->in[m] < 0 || ins->out[m] < 0)
        return fail_ins (error, SG_RT_ERROR_UNSUPPORTED, ins, "collective without tensors", NULL);
      sg_cu_value_tensor (NULL, plan, ins->in[m], &a);
      sg_cu_value_tensor (NULL, plan, ins->out[m], &o);
      ncclDataType_t nt;
      if ((kind == SG_OP_REDUCE_SCATTER || kind == SG_OP_ALL_REDUCE) &&
          !sg_cu_nccl_type ((SgDtype)a.dtype, &nt))
        return fail_ins (error, SG_RT_ERROR_UNSUPPORTED, ins, "no NCCL reduction for dtype ",
                         sg_dtype_name ((SgDtype)a.dtype));
      const uint64_t es = sg_dtype_size ((SgDtype)a.dtype);
      if (!sg_cu_is_contiguous (&a))
        need += (uint64_t)sg_cu_numel (&a) * es + 256;
      if (!sg_cu_is_contiguous (&o))
        need += (uint64_t)sg_cu_numel (&o) * es + 256;
    }
    scratch_need[ins->stream] = MAX (scratch_need[ins->stream], need);
    return true;
  }
  const SgOpClass klass = sg_op_class (ins->op);
  switch (klass) {
  case SG_CLASS_MATMUL: {
    const int first = (ins->op == SG_OP_ADDMM || ins->op == SG_OP_BADDBMM) ? 1 : 0;
    if (!arg_tensor (NULL, plan, ins, first, &a) || !arg_tensor (NULL, plan, ins, first + 1, &b) ||
        !out_tensor (NULL, plan, ins, 0, &o))
      return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "matmul operands are not tensors", NULL);
    const int nd = (ins->op == SG_OP_BMM || ins->op == SG_OP_BADDBMM) ? 3 : 2;
    if (a.ndim != nd || b.ndim != nd || o.ndim != nd)
      return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "matmul operands of the wrong rank", NULL);
    if (a.dtype != b.dtype || (a.dtype != SG_DTYPE_BF16 && a.dtype != SG_DTYPE_F16 &&
                               a.dtype != SG_DTYPE_F32))
      return fail_ins (error, SG_RT_ERROR_UNSUPPORTED, ins, "matmul dtype not run by cuBLAS: ",
                       sg_dtype_name ((SgDtype)a.dtype));
    need = SG_CU_BLAS_WORKSPACE + sg_cu_gemm_scratch_bytes (&a, &b);
    break;
  }
  case SG_CLASS_ATTENTION: {
    AttnSchema s;
    if (!attn_schema (ins->op, &s))
      return fail_ins (error, SG_RT_ERROR_UNSUPPORTED, ins, "unknown attention schema", NULL);
    double dropout = 0;
    if (sg_plan_arg_double (ins, s.dropout, &dropout) && dropout != 0)
      return fail_ins (error, SG_RT_ERROR_UNSUPPORTED, ins, "attention with dropout", NULL);
    const cJSON *bias = s.bias >= 0 ? arg_item (ins, s.bias) : NULL;
    if (bias && !cJSON_IsNull (bias))
      return fail_ins (error, SG_RT_ERROR_UNSUPPORTED, ins, "attention with a bias", NULL);
    if (!arg_tensor (NULL, plan, ins, s.q, &a) || !arg_tensor (NULL, plan, ins, s.k, &b) ||
        sg_cu_sdpa_scratch_bytes (&a, &b, s.backward, exact) == 0)
      return fail_ins (error, SG_RT_ERROR_UNSUPPORTED, ins,
                       "attention q/k must be [B, H, S, D] with H a multiple of K's heads", NULL);
    need = attn_ws >= 0 ? (uint64_t)attn_ws + 256
                        : SG_CU_BLAS_WORKSPACE + sg_cu_sdpa_scratch_bytes (&a, &b, s.backward, exact)
                            + 256;
    break;
  }
  case SG_CLASS_REDUCTION:
    if (arg_tensor (NULL, plan, ins, 0, &a) && out_tensor (NULL, plan, ins, 0, &o))
      need = (uint64_t)sg_cu_reduce_partials (&o, &a) * sizeof (float);
    break;
  case SG_CLASS_POINTWISE: case SG_CLASS_COPY: case SG_CLASS_CREATION:
  case SG_CLASS_VIEW: case SG_CLASS_GETITEM: case SG_CLASS_WAIT: case SG_CLASS_INPUT:
  case SG_CLASS_OUTPUT: case SG_CLASS_BUCKET:
    break;
  default:
    return fail_ins (error, SG_RT_ERROR_UNSUPPORTED, ins, "no CUDA kernel for target ",
                     ins->target ? ins->target : "?");
  }
  scratch_need[ins->stream] = MAX (scratch_need[ins->stream], need);
  return true;
}

static SgCuMapOp
unary_map (SgOpKind op)
{
  switch (op) {
  case SG_OP_RSQRT: return SG_CU_RSQRT;
  case SG_OP_SQRT: return SG_CU_SQRT;
  case SG_OP_EXP: return SG_CU_EXP;
  case SG_OP_NEG: return SG_CU_NEG;
  case SG_OP_RECIPROCAL: return SG_CU_RECIP;
  case SG_OP_SILU: return SG_CU_SILU;
  case SG_OP_RELU: return SG_CU_RELU;
  case SG_OP_SIGMOID: return SG_CU_SIGMOID;
  case SG_OP_TANH: return SG_CU_TANH;
  default: return SG_CU_N_MAP_OPS;
  }
}

static bool
gelu_tanh (const SgPlanIns *ins)
{
  const cJSON *v = sg_plan_kwarg (ins, "approximate");
  return cJSON_IsString (v) && strcmp (v->valuestring, "tanh") == 0;
}

/* Pointwise ops: tensor (op) tensor-or-number. */
static bool
run_pointwise (SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, const SgCuTensor *o,
               cudaStream_t s, GError **error)
{
  SgCuTensor a, b;
  double x = 0;
  if (!arg_tensor (st, plan, ins, 0, &a))
    return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "first argument is not a tensor", NULL);
  const bool b_tensor = arg_tensor (st, plan, ins, 1, &b);
  const bool b_number = !b_tensor && sg_plan_arg_double (ins, 1, &x);
  const double alpha = kw_double (ins, "alpha", 1.0);
  SgCuMapOp m = unary_map (ins->op);
  cudaError_t e = cudaSuccess;
  switch (ins->op) {
  case SG_OP_ADD_TENSOR: case SG_OP_ADD_SCALAR: case SG_OP_SUB_TENSOR: case SG_OP_SUB_SCALAR: {
    const bool sub = ins->op == SG_OP_SUB_TENSOR || ins->op == SG_OP_SUB_SCALAR;
    if (b_tensor)
      e = sg_cu_map (sub ? SG_CU_SUB : SG_CU_ADD, o, &a, &b, alpha, s);
    else if (b_number)
      e = sg_cu_map (SG_CU_ADD_S, o, &a, NULL, (sub ? -1.0 : 1.0) * alpha * x, s);
    else
      return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "second operand missing", NULL);
    break;
  }
  case SG_OP_MUL_TENSOR: case SG_OP_MUL_SCALAR: case SG_OP_DIV_TENSOR: case SG_OP_DIV_SCALAR: {
    const bool div = ins->op == SG_OP_DIV_TENSOR || ins->op == SG_OP_DIV_SCALAR;
    if (b_tensor)
      e = sg_cu_map (div ? SG_CU_DIV : SG_CU_MUL, o, &a, &b, 0, s);
    else if (b_number)
      e = sg_cu_map (div ? SG_CU_DIV_S : SG_CU_MUL_S, o, &a, NULL, x, s);
    else
      return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "second operand missing", NULL);
    break;
  }
  case SG_OP_POW_TENSOR_SCALAR:
    if (!b_number)
      return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "exponent is not a number", NULL);
    e = sg_cu_map (SG_CU_POW_S, o, &a, NULL, x, s);
    break;
  case SG_OP_SILU_BACKWARD: case SG_OP_GELU_BACKWARD:
    if (!b_tensor)
      return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "input is not a tensor", NULL);
    e = sg_cu_map (ins->op == SG_OP_SILU_BACKWARD ? SG_CU_SILU_BWD : SG_CU_GELU_BWD, o, &a, &b,
                   gelu_tanh (ins) ? 1 : 0, s);
    break;
  case SG_OP_GELU:
    e = sg_cu_map (SG_CU_GELU, o, &a, NULL, gelu_tanh (ins) ? 1 : 0, s);
    break;
  default:
    if (m == SG_CU_N_MAP_OPS)
      return fail_ins (error, SG_RT_ERROR_UNSUPPORTED, ins, "no pointwise kernel", NULL);
    e = sg_cu_map (m, o, &a, NULL, 0, s);
  }
  SG_CU_CHECK (e, error, fail);
  return true;
fail:
  g_prefix_error (error, "node %s: ", ins->name);
  return false;
}

static bool
run_reduction (SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, const SgCuTensor *o,
               cudaStream_t s, GError **error)
{
  SgCuTensor a;
  if (!arg_tensor (st, plan, ins, 0, &a))
    return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "input is not a tensor", NULL);
  uint32_t mask = 0;
  int64_t dims[SG_CU_MAX_DIMS];
  int nd = -1;
  if (ins->op == SG_OP_SUM_DIM || ins->op == SG_OP_MEAN_DIM || ins->op == SG_OP_AMAX)
    nd = sg_plan_arg_ints (ins, 1, dims, SG_CU_MAX_DIMS);
  if (nd <= 0) {
    mask = a.ndim > 0 ? (uint32_t)((1u << a.ndim) - 1) : 0; /* all dims */
  } else {
    for (int i = 0; i < nd; i++) {
      int64_t d = dims[i] < 0 ? dims[i] + a.ndim : dims[i];
      if (d < 0 || d >= a.ndim)
        return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "reduction dim out of range", NULL);
      mask |= 1u << d;
    }
  }
  const SgCuRedOp r = ins->op == SG_OP_AMAX ? SG_CU_RED_AMAX
                      : (ins->op == SG_OP_MEAN || ins->op == SG_OP_MEAN_DIM) ? SG_CU_RED_MEAN
                                                                             : SG_CU_RED_SUM;
  SgCuTensor in = a;
  if (a.ndim == 0) { /* a 0-d sum is a copy */
    SG_CU_CHECK (sg_cu_map (SG_CU_COPY, o, &a, NULL, 0, s), error, fail);
    return true;
  }
  SG_CU_CHECK (sg_cu_reduce (r, o, &in, mask, (float *)st->scratch[ins->stream],
                             (int64_t)(st->scratch_bytes[ins->stream] / sizeof (float)), s),
               error, fail);
  return true;
fail:
  g_prefix_error (error, "node %s: ", ins->name);
  return false;
}

/* Binds the cuBLAS handle to @ins's stream, with the first
 * SG_CU_BLAS_WORKSPACE bytes of that stream's scratch as its workspace
 * (cublasSetStream resets the workspace to the library's pool, so both are
 * set on every call); @scratch / @bytes: the op's own scratch after it. */
static bool
bind_blas (SgCuState *st, const SgPlanIns *ins, char **scratch, uint64_t *bytes, GError **error)
{
  char *ws = st->scratch[ins->stream];
  const uint64_t have = st->scratch_bytes[ins->stream];
  if (have < SG_CU_BLAS_WORKSPACE)
    return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "no cuBLAS workspace on its stream", NULL);
  SG_CUBLAS_CHECK (cublasSetStream (st->cublas, st->streams[ins->stream]), error, fail);
  SG_CUBLAS_CHECK (cublasSetWorkspace (st->cublas, ws, SG_CU_BLAS_WORKSPACE), error, fail);
  *scratch = ws + SG_CU_BLAS_WORKSPACE;
  *bytes = have - SG_CU_BLAS_WORKSPACE;
  return true;
fail:
  g_prefix_error (error, "node %s: ", ins->name);
  return false;
}

static bool
run_attention (SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, cudaStream_t s,
               GError **error)
{
  AttnSchema sc;
  g_return_val_if_fail (attn_schema (ins->op, &sc), false);
  /* Tuple slots that are tensors but not out/lse (philox seeds, cumulative
   * lengths): zero them so outputs are deterministic. */
  for (int j = sc.backward ? 3 : 2; j < ins->n_out; j++) {
    SgCuTensor z;
    if (out_tensor (st, plan, ins, j, &z))
      SG_CU_CHECK (sg_cu_map (SG_CU_FILL, &z, NULL, NULL, 0, s), error, fail);
  }
  const int32_t dnn_plan = st->attn_plan ? st->attn_plan[ins - plan->ins] : -1;
  if (dnn_plan >= 0) { /* cuDNN's fused kernel, planned at setup */
    SgCuSdpa a;
    char *why = NULL;
    if (!attn_args (st, plan, ins, false, &a))
      return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "attention operands are not tensors",
                       NULL);
    if (sg_cu_dnn_sdpa_run (st->dnn, dnn_plan, ins->stream, &a, st->scratch[ins->stream], &why))
      return true;
    fail_ins (error, SG_RT_ERROR_KERNEL, ins, "", why);
    free (why);
    return false;
  }
  SgCuTensor q, k, v, o, lse;
  if (!arg_tensor (st, plan, ins, sc.q, &q) || !arg_tensor (st, plan, ins, sc.k, &k) ||
      !arg_tensor (st, plan, ins, sc.v, &v))
    return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "q/k/v are not tensors", NULL);
  const bool causal = arg_bool (ins, sc.causal, false);
  const double scale = kw_double (ins, "scale", 0.0);
  char *scratch;
  uint64_t scratch_bytes;
  if (!bind_blas (st, ins, &scratch, &scratch_bytes, error))
    return false;
  if (!sc.backward) {
    if (!out_tensor (st, plan, ins, 0, &o))
      return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "no output tensor", NULL);
    const bool has_lse = out_tensor (st, plan, ins, 1, &lse);
    if (!sg_cu_sdpa_fwd (st->cublas, s, &q, &k, &v, &o, has_lse ? &lse : NULL, causal, scale,
                         st->exact, scratch, scratch_bytes, error))
      goto fail;
    return true;
  }
  SgCuTensor dout, dq, dk, dv;
  if (!arg_tensor (st, plan, ins, sc.dout, &dout) || !arg_tensor (st, plan, ins, sc.out, &o) ||
      !arg_tensor (st, plan, ins, sc.lse, &lse))
    return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "grad_out/out/logsumexp are not tensors",
                     NULL);
  if (!out_tensor (st, plan, ins, 0, &dq) || !out_tensor (st, plan, ins, 1, &dk) ||
      !out_tensor (st, plan, ins, 2, &dv))
    return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "gradients are not tensors", NULL);
  if (!sg_cu_sdpa_bwd (st->cublas, s, &dout, &q, &k, &v, &o, &lse, &dq, &dk, &dv, causal, scale,
                       st->exact, scratch, scratch_bytes, error))
    goto fail;
  return true;
fail:
  g_prefix_error (error, "node %s: ", ins->name);
  return false;
}

/* @t viewed through a permutation of its dims. */
static void
permute_view (const SgCuTensor *t, const int64_t *perm, SgCuTensor *out)
{
  *out = *t;
  for (int k = 0; k < t->ndim; k++) {
    out->shape[k] = t->shape[perm[k]];
    out->stride[k] = t->stride[perm[k]];
  }
}

/* View ops asked to run as kernels write a copy (their value has storage
 * of its own); an alias of its input's storage is a no-op. */
static bool
run_view_copy (SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, const SgCuTensor *o,
               cudaStream_t s, GError **error)
{
  SgCuTensor a, src;
  if (!arg_tensor (st, plan, ins, 0, &a))
    return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "input is not a tensor", NULL);
  if (a.ptr == o->ptr && ins->n_out == 1 && ins->out[0] >= 0 && ins->n_in > 0 &&
      plan->values[ins->out[0]].buffer == plan->values[ins->in[0]].buffer)
    return true;
  int64_t perm[SG_CU_MAX_DIMS];
  for (int k = 0; k < SG_CU_MAX_DIMS; k++)
    perm[k] = k;
  switch (ins->op) {
  case SG_OP_T: case SG_OP_TRANSPOSE: {
    int64_t d0 = 0, d1 = 1;
    if (ins->op == SG_OP_TRANSPOSE && (!sg_plan_arg_int (ins, 1, &d0) ||
                                       !sg_plan_arg_int (ins, 2, &d1)))
      return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "transpose dims missing", NULL);
    if (a.ndim < 2) {
      src = a;
      break;
    }
    d0 = d0 < 0 ? d0 + a.ndim : d0;
    d1 = d1 < 0 ? d1 + a.ndim : d1;
    perm[d0] = d1;
    perm[d1] = d0;
    permute_view (&a, perm, &src);
    break;
  }
  case SG_OP_PERMUTE: {
    const int n = sg_plan_arg_ints (ins, 1, perm, SG_CU_MAX_DIMS);
    if (n != a.ndim)
      return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "permutation of the wrong length", NULL);
    for (int k = 0; k < n; k++)
      perm[k] = perm[k] < 0 ? perm[k] + n : perm[k];
    permute_view (&a, perm, &src);
    break;
  }
  case SG_OP_EXPAND:
    SG_CU_CHECK (sg_cu_map (SG_CU_COPY, o, &a, NULL, 0, s), error, fail);
    return true;
  case SG_OP_SLICE: case SG_OP_SELECT:
    return fail_ins (error, SG_RT_ERROR_UNSUPPORTED, ins,
                     "slice/select must be aliases of their input", NULL);
  default: /* view, reshape, unsqueeze, squeeze, detach, alias: same logical order */
    SG_CU_CHECK (sg_cu_copy_range (o, 0, &a, 0, sg_cu_numel (o), s), error, fail);
    return true;
  }
  SG_CU_CHECK (sg_cu_map (SG_CU_COPY, o, &src, NULL, 0, s), error, fail);
  return true;
fail:
  g_prefix_error (error, "node %s: ", ins->name);
  return false;
}

/* pack(args [[refs...], k, interleave]) -> flat 1-D: interleave=false
 * concatenates the flattened inputs; interleave=true puts, for r in 0..k-1,
 * chunk r of every input in turn. unpack(args [ref, k, offset, numel]):
 * out[r*numel + j] = flat[r*(flat_numel/k) + offset + j]. */
static bool
run_bucket (SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, const SgCuTensor *o,
            cudaStream_t s, GError **error)
{
  int64_t k = 1;
  if (!sg_plan_arg_int (ins, 1, &k) || k < 1)
    return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "bucket chunk count missing", NULL);
  if (ins->op == SG_OP_BUCKET_UNPACK) {
    SgCuTensor flat;
    int64_t offset, numel;
    if (!arg_tensor (st, plan, ins, 0, &flat) || !sg_plan_arg_int (ins, 2, &offset) ||
        !sg_plan_arg_int (ins, 3, &numel))
      return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "unpack arguments", NULL);
    const int64_t fk = sg_cu_numel (&flat) / k;
    for (int64_t r = 0; r < k; r++)
      SG_CU_CHECK (sg_cu_copy_range (o, r * numel, &flat, r * fk + offset, numel, s), error,
                   fail);
    return true;
  }
  const cJSON *list = arg_item (ins, 0);
  const bool interleave = arg_bool (ins, 2, false);
  if (!cJSON_IsArray (list))
    return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "pack inputs are not a list", NULL);
  const int n = cJSON_GetArraySize (list);
  int64_t pos = 0, total = sg_cu_numel (o);
  for (int64_t r = 0; r < (interleave ? k : 1); r++)
    for (int i = 0; i < n; i++) {
      const cJSON *ref = cJSON_GetArrayItem (list, i);
      const cJSON *id = cJSON_GetObjectItemCaseSensitive (ref, "value");
      if (!cJSON_IsNumber (id) || id->valueint < 0 || id->valueint >= plan->n_values)
        return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "pack input is not a value", NULL);
      SgCuTensor t;
      sg_cu_value_tensor (st, plan, id->valueint, &t);
      const int64_t tn = sg_cu_numel (&t), chunk = interleave ? tn / k : tn;
      if (pos + chunk > total)
        return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "pack inputs overflow the bucket", NULL);
      SG_CU_CHECK (sg_cu_copy_range (o, pos, &t, interleave ? r * chunk : 0, chunk, s), error,
                   fail);
      pos += chunk;
    }
  return true;
fail:
  g_prefix_error (error, "node %s: ", ins->name);
  return false;
}

/* schedgraph.rank_roll (docs/ops.md): one block copy per group rank, by
 * this rank's group rank (0 outside a run: the profile times the copies). */
static bool
run_rank_roll (SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, const SgCuTensor *o,
               cudaStream_t s, GError **error)
{
  SgCuTensor a;
  int64_t shift = 0, sign = 1;
  const int32_t g = sg_plan_arg_group (plan, ins);
  if (!arg_tensor (st, plan, ins, 0, &a) || !sg_plan_arg_int (ins, 1, &shift) ||
      !sg_plan_arg_int (ins, 2, &sign) || g < 0)
    return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "rank_roll takes (input, shift, sign, group)",
                     NULL);
  const int64_t k = plan->groups[g].n_ranks, n = sg_cu_numel (&a), blk = n / k;
  if (a.ndim < 1 || a.shape[0] % k != 0 || sg_cu_numel (o) != n)
    return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "rank_roll blocks do not divide", NULL);
  const int64_t me = st->group_rank ? st->group_rank[g] : 0;
  for (int64_t b = 0; b < k; b++)
    SG_CU_CHECK (sg_cu_copy_range (o, b * blk, &a, sg_rank_roll_block (b, k, shift, sign, me) * blk,
                                   blk, s),
                 error, fail);
  return true;
fail:
  g_prefix_error (error, "node %s: ", ins->name);
  return false;
}

bool
sg_cu_run_kernel (SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, GError **error)
{
  cudaStream_t s = st->streams[ins->stream];
  const SgOpClass klass = sg_op_class (ins->op);
  if (klass == SG_CLASS_GETITEM || klass == SG_CLASS_WAIT || klass == SG_CLASS_INPUT ||
      klass == SG_CLASS_OUTPUT)
    return true;
  SgCuTensor o;
  const bool has_out = out_tensor (st, plan, ins, 0, &o);
  if (klass == SG_CLASS_ATTENTION)
    return run_attention (st, plan, ins, s, error);
  if (!has_out)
    return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "no output tensor", NULL);
  switch (klass) {
  case SG_CLASS_MATMUL: {
    SgCuTensor a, b, bias;
    const bool with_bias = ins->op == SG_OP_ADDMM || ins->op == SG_OP_BADDBMM;
    const int first = with_bias ? 1 : 0;
    if (!arg_tensor (st, plan, ins, first, &a) || !arg_tensor (st, plan, ins, first + 1, &b))
      return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "operands are not tensors", NULL);
    float beta = 0.f;
    const float alpha = (float)kw_double (ins, "alpha", 1.0);
    if (with_bias) {
      beta = (float)kw_double (ins, "beta", 1.0);
      if (!arg_tensor (st, plan, ins, 0, &bias))
        return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "bias is not a tensor", NULL);
      if (beta != 0.f)
        SG_CU_CHECK (sg_cu_map (SG_CU_MUL_S, &o, &bias, NULL, beta, s), error, fail);
      beta = beta != 0.f ? 1.f : 0.f;
    }
    char *scratch;
    uint64_t scratch_bytes;
    if (!bind_blas (st, ins, &scratch, &scratch_bytes, error))
      return false;
    if (ins->sm_count > 0 ? !sg_cu_gemm_sms (st->lt, st->scratch[ins->stream], SG_CU_BLAS_WORKSPACE,
                                             ins->sm_count, s, &a, &b, &o, alpha, beta, scratch,
                                             scratch_bytes, error)
                          : !sg_cu_gemm (st->cublas, s, &a, &b, &o, alpha, beta, scratch,
                                         scratch_bytes, error))
      goto fail;
    return true;
  }
  case SG_CLASS_POINTWISE:
    return run_pointwise (st, plan, ins, &o, s, error);
  case SG_CLASS_REDUCTION:
    return run_reduction (st, plan, ins, &o, s, error);
  case SG_CLASS_VIEW:
    return run_view_copy (st, plan, ins, &o, s, error);
  case SG_CLASS_BUCKET:
    return run_bucket (st, plan, ins, &o, s, error);
  case SG_CLASS_COPY:
    if (ins->op == SG_OP_RANK_ROLL)
      return run_rank_roll (st, plan, ins, &o, s, error);
    if (ins->op == SG_OP_CAT) {
      const cJSON *list = arg_item (ins, 0);
      int64_t dim = 0;
      sg_plan_arg_int (ins, 1, &dim);
      dim = dim < 0 ? dim + o.ndim : dim;
      int64_t at = 0;
      const cJSON *ref;
      cJSON_ArrayForEach (ref, list)
      {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive (ref, "value");
        if (!cJSON_IsNumber (id) || id->valueint < 0 || id->valueint >= plan->n_values)
          return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "cat input is not a value", NULL);
        SgCuTensor t, slice = o;
        sg_cu_value_tensor (st, plan, id->valueint, &t);
        if (t.ndim != o.ndim) /* legacy cat skips empty 1-D inputs */
          continue;
        slice.shape[dim] = t.shape[dim];
        slice.ptr = (char *)o.ptr + at * o.stride[dim] * (int64_t)sg_dtype_size (o.dtype);
        SG_CU_CHECK (sg_cu_map (SG_CU_COPY, &slice, &t, NULL, 0, s), error, fail);
        at += t.shape[dim];
      }
      return true;
    } else {
      SgCuTensor a;
      if (!arg_tensor (st, plan, ins, 0, &a))
        return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "input is not a tensor", NULL);
      SG_CU_CHECK (sg_cu_map (SG_CU_COPY, &o, &a, NULL, 0, s), error, fail);
      return true;
    }
  case SG_CLASS_CREATION: {
    double v = 0;
    if (ins->op == SG_OP_ONES_LIKE)
      v = 1;
    else if (ins->op == SG_OP_FULL && !sg_plan_arg_double (ins, 1, &v))
      return fail_ins (error, SG_RT_ERROR_KERNEL, ins, "fill value missing", NULL);
    /* empty: zero-filled so that outputs never depend on arena contents */
    SG_CU_CHECK (sg_cu_map (SG_CU_FILL, &o, NULL, NULL, v, s), error, fail);
    return true;
  }
  default:
    return fail_ins (error, SG_RT_ERROR_UNSUPPORTED, ins, "no CUDA kernel", NULL);
  }
fail:
  g_prefix_error (error, "node %s: ", ins->name);
  return false;
}

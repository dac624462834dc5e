/* gemm.c: cuBLAS GEMMs over row-major strided views (mm, addmm, bmm, baddbmm).
 *
 * cuBLAS is column-major: row-major C = A B is computed as column-major
 * C^T = B^T A^T, and a row-major view is the column-major transpose of the
 * same memory. So a view with unit column stride is passed untransposed
 * (ld = row stride), one with unit row stride (a transposed view such as
 * aten.t's output) transposed (ld = column stride); only views that are
 * neither are copied to scratch. Operands bf16/f16/f32, accumulation
 * CUBLAS_COMPUTE_32F (as PyTorch with allow_bf16_reduced_precision off).
 * A matmul with an SM-count target (the plan's sm_count) runs on cuBLASLt
 * with CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, so that a collective beside it
 * finds SMs free (Transformer Engine's comm-GEMM overlap does the same);
 * the others keep cublasGemmEx.
 * Mirrors ATen's at::cuda::blas::gemm and its transposition rules.
 * Requires: a handle whose stream the caller set. Invalidates: nothing.
 */
#include "cuda-private.h"

typedef struct {
  const void *ptr;
  cublasOperation_t op; /* as the column-major operand of C^T = B^T A^T */
  int64_t ld;
  int64_t batch_stride;
} Operand;

/* Matrix dims of a 2-D or 3-D view (the last two). */
static void
mat_dims (const SgCuTensor *t, int64_t *rows, int64_t *cols, int64_t *rs, int64_t *cs)
{
  *rows = t->shape[t->ndim - 2];
  *cols = t->shape[t->ndim - 1];
  *rs = t->stride[t->ndim - 2];
  *cs = t->stride[t->ndim - 1];
}

/* Row-major (cs == 1): column-major memory is X^T with ld rs -> op N.
 * Column-major (rs == 1): memory is X with ld cs -> op T. */
static bool
classify (const SgCuTensor *t, Operand *o)
{
  int64_t r, c, rs, cs;
  mat_dims (t, &r, &c, &rs, &cs);
  o->ptr = t->ptr;
  o->batch_stride = t->ndim == 3 && t->shape[0] > 1 ? t->stride[0] : 0;
  if ((cs == 1 || c == 1) && (rs >= c || r == 1)) {
    o->op = CUBLAS_OP_N;
    o->ld = r == 1 ? (c > 1 ? c : 1) : rs;
    return o->ld >= (c > 1 ? c : 1);
  }
  if ((rs == 1 || r == 1) && (cs >= r || c == 1)) {
    o->op = CUBLAS_OP_T;
    o->ld = c == 1 ? (r > 1 ? r : 1) : cs;
    return o->ld >= (r > 1 ? r : 1);
  }
  return false;
}

static bool
to_cuda_type (int32_t dtype, cudaDataType_t *out)
{
  switch (dtype) {
  case SG_DTYPE_BF16: *out = CUDA_R_16BF; return true;
  case SG_DTYPE_F16: *out = CUDA_R_16F; return true;
  case SG_DTYPE_F32: *out = CUDA_R_32F; return true;
  default: return false;
  }
}

uint64_t
sg_cu_gemm_scratch_bytes (const SgCuTensor *a, const SgCuTensor *b)
{
  Operand o;
  uint64_t need = 0;
  if (!classify (a, &o))
    need += (uint64_t)sg_cu_numel (a) * sg_dtype_size ((SgDtype)a->dtype) + 256;
  if (!classify (b, &o))
    need += (uint64_t)sg_cu_numel (b) * sg_dtype_size ((SgDtype)b->dtype) + 256;
  return need;
}

/* Dense row-major copy of @t in @scratch; advances it. */
static bool
stage (const SgCuTensor *t, SgCuTensor *dense, char **scratch, uint64_t *left,
       cudaStream_t stream, GError **error)
{
  const uint64_t bytes = (uint64_t)sg_cu_numel (t) * sg_dtype_size ((SgDtype)t->dtype);
  const uint64_t padded = (bytes + 255) / 256 * 256;
  if (padded > *left) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_KERNEL,
                 "gemm: %" G_GUINT64_FORMAT " bytes of scratch needed for a strided operand, %"
                 G_GUINT64_FORMAT " left", padded, *left);
    return false;
  }
  *dense = *t;
  dense->ptr = *scratch;
  int64_t s = 1;
  for (int k = t->ndim - 1; k >= 0; k--) {
    dense->stride[k] = s;
    s *= t->shape[k];
  }
  SG_CU_CHECK (sg_cu_copy_range (dense, 0, t, 0, sg_cu_numel (t), stream), error, fail);
  *scratch += padded;
  *left -= padded;
  return true;
fail:
  return false;
}

/* A GEMM prepared for cuBLAS's column-major view: C^T (N x M) =
 * op(B^T) (N x K) * op(A^T) (K x M), operands staged where needed. */
typedef struct {
  Operand oa, ob, oc;
  int64_t M, N, K, batch, cstride;
  cudaDataType_t tab, tc;
} Prepared;

/* Shapes, dtypes and layouts of C = A B; false with @error, or true with
 * *@nothing set when there is no product to run (M, N or batch 0; K == 0
 * has C scaled by beta here). */
static bool
prepare (cudaStream_t stream, const SgCuTensor *a, const SgCuTensor *b, const SgCuTensor *c,
         float beta, char *scratch, uint64_t scratch_bytes, Prepared *p, bool *nothing,
         GError **error)
{
  g_return_val_if_fail (a->ndim == b->ndim && a->ndim == c->ndim, false);
  g_return_val_if_fail (a->ndim == 2 || a->ndim == 3, false);
  int64_t K2, M2, N2, rs, cs, ars, acs;
  *nothing = false;
  mat_dims (a, &p->M, &p->K, &ars, &acs);
  mat_dims (b, &K2, &p->N, &rs, &cs);
  mat_dims (c, &M2, &N2, &rs, &cs);
  p->batch = a->ndim == 3 ? a->shape[0] : 1;
  if (K2 != p->K || M2 != p->M || N2 != p->N ||
      (a->ndim == 3 && (b->shape[0] != p->batch || c->shape[0] != p->batch))) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_KERNEL,
                 "gemm: shapes do not chain: [%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT
                 "] x [%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT "] -> [%" G_GINT64_FORMAT
                 "x%" G_GINT64_FORMAT "]",
                 p->M, p->K, K2, p->N, M2, N2);
    return false;
  }
  if (p->M == 0 || p->N == 0 || p->batch == 0) {
    *nothing = true;
    return true;
  }
  cudaDataType_t ta, tb;
  if (!to_cuda_type (a->dtype, &ta) || !to_cuda_type (b->dtype, &tb) ||
      !to_cuda_type (c->dtype, &p->tc) || ta != tb) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED,
                 "gemm: operand dtypes %s x %s -> %s are not supported",
                 sg_dtype_name ((SgDtype)a->dtype), sg_dtype_name ((SgDtype)b->dtype),
                 sg_dtype_name ((SgDtype)c->dtype));
    return false;
  }
  p->tab = ta;
  SgCuTensor ad = *a, bd = *b;
  uint64_t left = scratch_bytes;
  if (!classify (&ad, &p->oa) && (!stage (a, &ad, &scratch, &left, stream, error) ||
                                  !classify (&ad, &p->oa)))
    return false;
  if (!classify (&bd, &p->ob) && (!stage (b, &bd, &scratch, &left, stream, error) ||
                                  !classify (&bd, &p->ob)))
    return false;
  if (!classify (c, &p->oc) || p->oc.op != CUBLAS_OP_N) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED,
                 "gemm: the output view is not row-major");
    return false;
  }
  p->cstride = c->ndim == 3 && c->shape[0] > 1 ? c->stride[0] : 0;
  if (p->K == 0) {
    /* C = beta * C: no product to add. */
    SG_CU_CHECK (sg_cu_map (SG_CU_MUL_S, c, c, NULL, beta, stream), error, fail);
    *nothing = true;
  }
  return true;
fail:
  return false;
}

bool
sg_cu_gemm (cublasHandle_t h, cudaStream_t stream, const SgCuTensor *a, const SgCuTensor *b,
            const SgCuTensor *c, float alpha, float beta, char *scratch, uint64_t scratch_bytes,
            GError **error)
{
  Prepared p;
  bool nothing;
  if (!prepare (stream, a, b, c, beta, scratch, scratch_bytes, &p, &nothing, error))
    return false;
  if (nothing)
    return true;
  const Operand *oa = &p.oa, *ob = &p.ob;
  if (p.batch == 1 && a->ndim == 2) {
    SG_CUBLAS_CHECK (cublasGemmEx (h, ob->op, oa->op, (int)p.N, (int)p.M, (int)p.K, &alpha,
                                   ob->ptr, p.tab, (int)ob->ld, oa->ptr, p.tab, (int)oa->ld, &beta,
                                   c->ptr, p.tc, (int)p.oc.ld, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT),
                     error, fail);
  } else {
    SG_CUBLAS_CHECK (cublasGemmStridedBatchedEx (
                       h, ob->op, oa->op, (int)p.N, (int)p.M, (int)p.K, &alpha, ob->ptr, p.tab,
                       (int)ob->ld, ob->batch_stride, oa->ptr, p.tab, (int)oa->ld,
                       oa->batch_stride, &beta, c->ptr, p.tc, (int)p.oc.ld, p.cstride,
                       (int)p.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     error, fail);
  }
  return true;
fail:
  return false;
}

/* A cuBLASLt layout of a stored column-major @rows x @cols matrix. */
static cublasStatus_t
layout (cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld,
        int64_t batch, int64_t stride)
{
  cublasStatus_t r = cublasLtMatrixLayoutCreate (l, t, (uint64_t)rows, (uint64_t)cols, ld);
  if (r != CUBLAS_STATUS_SUCCESS || batch == 1)
    return r;
  const int32_t n = (int32_t)batch;
  r = cublasLtMatrixLayoutSetAttribute (*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n);
  if (r == CUBLAS_STATUS_SUCCESS)
    r = cublasLtMatrixLayoutSetAttribute (*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                          &stride, sizeof stride);
  return r;
}

bool
sg_cu_gemm_sms (cublasLtHandle_t lt, void *ws, uint64_t ws_bytes, int32_t sm_count,
                cudaStream_t stream, const SgCuTensor *a, const SgCuTensor *b,
                const SgCuTensor *c, float alpha, float beta, char *scratch,
                uint64_t scratch_bytes, GError **error)
{
  Prepared p;
  bool nothing, ok = false;
  if (!prepare (stream, a, b, c, beta, scratch, scratch_bytes, &p, &nothing, error))
    return false;
  if (nothing)
    return true;
  cublasLtMatmulDesc_t op = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  const Operand *oa = &p.oa, *ob = &p.ob;
  const cublasOperation_t ta = ob->op, tb = oa->op;
  const bool na = ob->op == CUBLAS_OP_N, nb = oa->op == CUBLAS_OP_N;
  SG_CUBLAS_CHECK (cublasLtMatmulDescCreate (&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), error, out);
  SG_CUBLAS_CHECK (cublasLtMatmulDescSetAttribute (op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
                   error, out);
  SG_CUBLAS_CHECK (cublasLtMatmulDescSetAttribute (op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
                   error, out);
  SG_CUBLAS_CHECK (cublasLtMatmulDescSetAttribute (op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET,
                                                   &sm_count, sizeof sm_count),
                   error, out);
  /* cuBLAS's A is our B^T (N x K after its op), its B our A^T (K x M) */
  SG_CUBLAS_CHECK (layout (&la, p.tab, na ? p.N : p.K, na ? p.K : p.N, ob->ld, p.batch,
                           ob->batch_stride),
                   error, out);
  SG_CUBLAS_CHECK (layout (&lb, p.tab, nb ? p.K : p.M, nb ? p.M : p.K, oa->ld, p.batch,
                           oa->batch_stride),
                   error, out);
  SG_CUBLAS_CHECK (layout (&lc, p.tc, p.N, p.M, p.oc.ld, p.batch, p.cstride), error, out);
  SG_CUBLAS_CHECK (cublasLtMatmulPreferenceCreate (&pref), error, out);
  SG_CUBLAS_CHECK (cublasLtMatmulPreferenceSetAttribute (pref,
                                                         CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &ws_bytes, sizeof ws_bytes),
                   error, out);
  SG_CUBLAS_CHECK (cublasLtMatmulAlgoGetHeuristic (lt, op, la, lb, lc, lc, pref, 1, &res, &found),
                   error, out);
  if (found == 0) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED,
                 "gemm: cuBLASLt has no algorithm for %" G_GINT64_FORMAT "x%" G_GINT64_FORMAT
                 "x%" G_GINT64_FORMAT " on %d SMs", p.M, p.K, p.N, sm_count);
    goto out;
  }
  SG_CUBLAS_CHECK (cublasLtMatmul (lt, op, &alpha, ob->ptr, la, oa->ptr, lb, &beta, c->ptr, lc,
                                   c->ptr, lc, &res.algo, ws, ws_bytes, stream),
                   error, out);
  ok = true;
out:
  if (pref)
    cublasLtMatmulPreferenceDestroy (pref);
  if (lc)
    cublasLtMatrixLayoutDestroy (lc);
  if (lb)
    cublasLtMatrixLayoutDestroy (lb);
  if (la)
    cublasLtMatrixLayoutDestroy (la);
  if (op)
    cublasLtMatmulDescDestroy (op);
  return ok;
}

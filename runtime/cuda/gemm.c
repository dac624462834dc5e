/* gemm.c: cuBLAS GEMMs over row-major strided views (mm, addmm, bmm, baddbmm).
 *
 * cuBLAS is column-major: row-major C = A B is computed as column-major
 * C^T = B^T A^T, and a row-major view is the column-major transpose of the
 * same memory. So a view with unit column stride is passed untransposed
 * (ld = row stride), one with unit row stride (a transposed view such as
 * aten.t's output) transposed (ld = column stride); only views that are
 * neither are copied to scratch. Operands bf16/f16/f32, accumulation
 * CUBLAS_COMPUTE_32F (as PyTorch with allow_bf16_reduced_precision off).
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

bool
sg_cu_gemm (cublasHandle_t h, cudaStream_t stream, const SgCuTensor *a, const SgCuTensor *b,
            const SgCuTensor *c, float alpha, float beta, char *scratch, uint64_t scratch_bytes,
            GError **error)
{
  g_return_val_if_fail (a->ndim == b->ndim && a->ndim == c->ndim, false);
  g_return_val_if_fail (a->ndim == 2 || a->ndim == 3, false);
  int64_t M, K, N, K2, M2, N2, rs, cs;
  int64_t arows, acols, ars, acs;
  mat_dims (a, &arows, &acols, &ars, &acs);
  M = arows;
  K = acols;
  mat_dims (b, &K2, &N, &rs, &cs);
  mat_dims (c, &M2, &N2, &rs, &cs);
  const int64_t batch = a->ndim == 3 ? a->shape[0] : 1;
  if (K2 != K || M2 != M || N2 != N ||
      (a->ndim == 3 && (b->shape[0] != batch || c->shape[0] != batch))) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_KERNEL,
                 "gemm: shapes do not chain: [%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT
                 "] x [%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT "] -> [%" G_GINT64_FORMAT
                 "x%" G_GINT64_FORMAT "]",
                 M, K, K2, N, M2, N2);
    return false;
  }
  if (M == 0 || N == 0 || batch == 0)
    return true;
  cudaDataType_t ta, tb, tc;
  if (!to_cuda_type (a->dtype, &ta) || !to_cuda_type (b->dtype, &tb) ||
      !to_cuda_type (c->dtype, &tc) || ta != tb) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED,
                 "gemm: operand dtypes %s x %s -> %s are not supported",
                 sg_dtype_name ((SgDtype)a->dtype), sg_dtype_name ((SgDtype)b->dtype),
                 sg_dtype_name ((SgDtype)c->dtype));
    return false;
  }
  SgCuTensor ad = *a, bd = *b;
  Operand oa, ob, oc;
  uint64_t left = scratch_bytes;
  if (!classify (&ad, &oa) && (!stage (a, &ad, &scratch, &left, stream, error) ||
                               !classify (&ad, &oa)))
    return false;
  if (!classify (&bd, &ob) && (!stage (b, &bd, &scratch, &left, stream, error) ||
                               !classify (&bd, &ob)))
    return false;
  if (!classify (c, &oc) || oc.op != CUBLAS_OP_N) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED,
                 "gemm: the output view is not row-major");
    return false;
  }
  if (K == 0) {
    /* C = beta * C: no product to add. */
    SG_CU_CHECK (sg_cu_map (SG_CU_MUL_S, c, c, NULL, beta, stream), error, fail);
    return true;
  }
  /* Column-major: C^T (N x M) = op(B^T) (N x K) * op(A^T) (K x M). */
  if (batch == 1 && a->ndim == 2) {
    SG_CUBLAS_CHECK (cublasGemmEx (h, ob.op, oa.op, (int)N, (int)M, (int)K, &alpha, ob.ptr, tb,
                                   (int)ob.ld, oa.ptr, ta, (int)oa.ld, &beta, c->ptr, tc,
                                   (int)oc.ld, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     error, fail);
  } else {
    const int64_t cstride = c->shape[0] > 1 ? c->stride[0] : 0;
    SG_CUBLAS_CHECK (cublasGemmStridedBatchedEx (
                       h, ob.op, oa.op, (int)N, (int)M, (int)K, &alpha, ob.ptr, tb, (int)ob.ld,
                       ob.batch_stride, oa.ptr, ta, (int)oa.ld, oa.batch_stride, &beta, c->ptr, tc,
                       (int)oc.ld, cstride, (int)batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     error, fail);
  }
  return true;
fail:
  return false;
}

/* kernels_linalg.c: reductions (sum, mean, amax) and the matmul family
 * (mm, addmm, bmm, baddbmm) of the CPU kernel library.
 *
 * Mirrors ATen's semantics (dims list, keepdim; beta/alpha) with the GPU's
 * numerics: matmul operands widened to float, fp32 accumulation in k order,
 * one rounding at the end; reductions accumulate in double in row-major
 * input order. Fixed loop orders make results independent of the caller.
 * Requires: @out allocated with the node's meta. Invalidates: nothing.
 */
#include <math.h>
#include <string.h>

#include "kernels-private.h"

bool
k_reduce (const KCtx *k, SgOpKind op, SgTensor *out)
{
  SgTensor in;
  if (!kargs_tensor (k, 0, &in))
    return false;
  bool red[SG_CPU_MAX_DIMS] = { false };
  bool keep = false;
  if (op == SG_OP_SUM || op == SG_OP_MEAN) {
    for (int i = 0; i < in.ndim; i++)
      red[i] = true;
  } else {
    int64_t dims[SG_CPU_MAX_DIMS];
    int n = kargs_ints (k, 1, "dim", dims, SG_CPU_MAX_DIMS);
    keep = kargs_bool (k, 2, "keepdim", false);
    if (n <= 0) { /* absent, null or [] reduce over everything */
      for (int i = 0; i < in.ndim; i++)
        red[i] = true;
    }
    for (int j = 0; j < n; j++) {
      int64_t d = dims[j] < 0 ? dims[j] + (in.ndim > 0 ? in.ndim : 1) : dims[j];
      if (d < 0 || d >= (in.ndim > 0 ? in.ndim : 1))
        return kfail (k, "reduction dim out of range");
      if (in.ndim > 0)
        red[d] = true;
    }
  }
  /* Accumulator index space: the kept dims of the input, row-major. */
  int64_t acc_stride[SG_CPU_MAX_DIMS];
  uint64_t n_acc = 1, count = 1;
  for (int i = in.ndim - 1; i >= 0; i--) {
    if (red[i]) {
      acc_stride[i] = 0;
      count *= (uint64_t)in.shape[i];
    } else {
      acc_stride[i] = (int64_t)n_acc;
      n_acc *= (uint64_t)in.shape[i];
    }
  }
  if (n_acc != sg_tensor_numel (out))
    return kfail (k, "reduction result does not match the output's meta shape");
  (void)keep; /* keepdim only changes the output's meta, which is given */
  double *acc = g_new (double, n_acc ? n_acc : 1);
  for (uint64_t i = 0; i < n_acc; i++)
    acc[i] = op == SG_OP_AMAX ? -INFINITY : 0.0;
  uint64_t n = sg_tensor_numel (&in);
  int64_t idx[SG_CPU_MAX_DIMS] = { 0 }, oi = 0, oa = 0;
  for (uint64_t e = 0; e < n; e++) {
    double x = sg_tensor_load (in.dtype, in.data, oi);
    if (op == SG_OP_AMAX)
      acc[oa] = (x > acc[oa] || isnan (x)) ? x : acc[oa];
    else
      acc[oa] += x;
    for (int i = in.ndim - 1; i >= 0; i--) {
      if (++idx[i] < in.shape[i]) {
        oi += in.stride[i];
        oa += acc_stride[i];
        break;
      }
      oi -= (in.shape[i] - 1) * in.stride[i];
      oa -= (in.shape[i] - 1) * acc_stride[i];
      idx[i] = 0;
    }
  }
  if (op == SG_OP_MEAN || op == SG_OP_MEAN_DIM)
    for (uint64_t i = 0; i < n_acc; i++)
      acc[i] /= (double)count;
  for (uint64_t i = 0; i < n_acc; i++)
    sg_tensor_store (out->dtype, out->data, sg_tensor_offset_of (out, i), acc[i]);
  g_free (acc);
  return true;
}

/* c[m,n] = a[m,k] @ b[k,n], fp32, k ascending for every (i, j): rows are
 * taken four at a time so each row of b is loaded once per four rows of c;
 * the per-element summation order stays p = 0, 1, ..., k-1. */
static void
gemm_f32 (int64_t m, int64_t n, int64_t kk, const float *restrict a, const float *restrict b,
          float *restrict c)
{
  memset (c, 0, (size_t)(m * n) * sizeof (float));
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    float *restrict c0 = c + i * n, *restrict c1 = c0 + n, *restrict c2 = c1 + n,
                    *restrict c3 = c2 + n;
    for (int64_t p = 0; p < kk; p++) {
      const float a0 = a[i * kk + p], a1 = a[(i + 1) * kk + p], a2 = a[(i + 2) * kk + p],
                  a3 = a[(i + 3) * kk + p];
      const float *restrict bp = b + p * n;
      for (int64_t j = 0; j < n; j++) {
        const float bj = bp[j];
        c0[j] += a0 * bj;
        c1[j] += a1 * bj;
        c2[j] += a2 * bj;
        c3[j] += a3 * bj;
      }
    }
  }
  for (; i < m; i++) {
    float *restrict ci = c + i * n;
    for (int64_t p = 0; p < kk; p++) {
      const float ap = a[i * kk + p];
      const float *restrict bp = b + p * n;
      for (int64_t j = 0; j < n; j++)
        ci[j] += ap * bp[j];
    }
  }
}

bool
k_matmul (const KCtx *k, SgOpKind op, SgTensor *out)
{
  bool has_bias = op == SG_OP_ADDMM || op == SG_OP_BADDBMM;
  bool batched = op == SG_OP_BMM || op == SG_OP_BADDBMM;
  int base = has_bias ? 1 : 0;
  SgTensor a, b, bias;
  if (!kargs_tensor (k, base, &a) || !kargs_tensor (k, base + 1, &b))
    return false;
  if (has_bias && !kargs_tensor (k, 0, &bias))
    return false;
  int rank = batched ? 3 : 2;
  if (a.ndim != rank || b.ndim != rank || out->ndim != rank)
    return kfail (k, batched ? "bmm operands must be 3-D" : "mm operands must be 2-D");
  int64_t nb = batched ? a.shape[0] : 1;
  int64_t m = a.shape[rank - 2], kk = a.shape[rank - 1], n = b.shape[rank - 1];
  if (b.shape[rank - 2] != kk || (batched && b.shape[0] != nb) ||
      out->shape[rank - 2] != m || out->shape[rank - 1] != n || (batched && out->shape[0] != nb))
    return kfail (k, "matmul shapes do not agree with each other or the output's meta");
  double beta = has_bias ? kargs_number (k, 3, "beta", 1.0) : 0.0;
  double alpha = has_bias ? kargs_number (k, 4, "alpha", 1.0) : 1.0;

  float *fa = g_new (float, (size_t)MAX (nb * m * kk, 1));
  float *fb = g_new (float, (size_t)MAX (nb * kk * n, 1));
  float *fc = g_new (float, (size_t)MAX (nb * m * n, 1));
  sg_tensor_to_float (&a, fa);
  sg_tensor_to_float (&b, fb);
  for (int64_t s = 0; s < nb; s++)
    gemm_f32 (m, n, kk, fa + s * m * kk, fb + s * kk * n, fc + s * m * n);
  if (has_bias) {
    /* bias broadcasts to the output (addmm: [n] or [m,n]; baddbmm: 3-D) */
    SgTensor bb = bias;
    int64_t st[SG_CPU_MAX_DIMS];
    int lead = rank - bias.ndim;
    if (lead < 0)
      goto bad_bias;
    for (int i = 0; i < rank; i++) {
      int j = i - lead;
      if (j < 0) {
        st[i] = 0;
      } else if (bias.shape[j] == out->shape[i]) {
        st[i] = bias.shape[j] == 1 ? 0 : bias.stride[j];
      } else if (bias.shape[j] == 1) {
        st[i] = 0;
      } else {
        goto bad_bias;
      }
    }
    bb.ndim = rank;
    for (int i = 0; i < rank; i++)
      bb.shape[i] = out->shape[i], bb.stride[i] = st[i];
    uint64_t total = (uint64_t)(nb * m * n);
    for (uint64_t e = 0; e < total; e++) {
      float bv = (float)sg_tensor_load (bb.dtype, bb.data, sg_tensor_offset_of (&bb, e));
      float r = (float)alpha == 1.0f ? fc[e] : (float)alpha * fc[e];
      fc[e] = (float)beta == 1.0f ? bv + r : (float)beta * bv + r;
    }
  }
  sg_tensor_from_float (out, fc);
  g_free (fa);
  g_free (fb);
  g_free (fc);
  return true;
bad_bias:
  g_free (fa);
  g_free (fb);
  g_free (fc);
  return kfail (k, "addmm/baddbmm bias does not broadcast to the output");
}

/* test_cuda_kernels.c: the CUDA backend's kernels against plain-C references.
 *
 * Every kernel of runtime/cuda/kernels.cu and the cuBLAS wrapper is run on
 * small random tensors (strided, broadcast, transposed views; bf16 and f32)
 * and compared with a double-precision loop here, within the rounding of the
 * output dtype. Exits 77 (skip) when no GPU is visible (CI).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devt.h"

/* ---- maps ---- */

START_TEST (map_add_broadcasts_a_row_and_rounds_to_bf16)
{
  const int64_t s2[] = { 33, 70 }, s1[] = { 70 };
  DevT a = dev_rand (SG_DTYPE_BF16, 2, s2, 0), b = dev_rand (SG_DTYPE_F32, 1, s1, 0);
  DevT o = dev_empty (SG_DTYPE_BF16, 2, s2);
  ck_assert_int_eq (sg_cu_map (SG_CU_ADD, &o.t, &a.t, &b.t, 0.5, NULL), cudaSuccess);
  double *got = dev_read (&o), want[33 * 70];
  for (int i = 0; i < 33; i++)
    for (int j = 0; j < 70; j++)
      want[i * 70 + j] = a.ref[i * 70 + j] + 0.5 * b.ref[j];
  assert_close (got, want, 33 * 70, 1.0 / 128, 1e-6);
  g_free (got);
  dev_free (&a);
  dev_free (&b);
  dev_free (&o);
}
END_TEST

START_TEST (map_mul_broadcasts_a_middle_dim_over_collapsed_dims)
{
  /* out [3, 4, 5, 6] = a (a [3,4,5,6] view with a padded last dim) * b [4, 1, 1] */
  const int64_t s[] = { 3, 4, 5, 7 }, so[] = { 3, 4, 5, 6 }, sb[] = { 4, 1, 1 };
  DevT a = dev_rand (SG_DTYPE_BF16, 4, s, 0), b = dev_rand (SG_DTYPE_F32, 3, sb, 0);
  DevT o = dev_empty (SG_DTYPE_BF16, 4, so);
  SgCuTensor av = a.t;
  av.shape[3] = 6;
  ck_assert_int_eq (sg_cu_map (SG_CU_MUL, &o.t, &av, &b.t, 0, NULL), cudaSuccess);
  double *got = dev_read (&o), want[3 * 4 * 5 * 6];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++)
      for (int k = 0; k < 5; k++)
        for (int l = 0; l < 6; l++)
          want[((i * 4 + j) * 5 + k) * 6 + l] = a.ref[((i * 4 + j) * 5 + k) * 7 + l] * b.ref[j];
  assert_close (got, want, 3 * 4 * 5 * 6, 1.0 / 128, 1e-6);
  g_free (got);
  dev_free (&a);
  dev_free (&b);
  dev_free (&o);
}
END_TEST

START_TEST (map_reads_transposed_views)
{
  const int64_t s[] = { 40, 24 };
  DevT a = dev_rand (SG_DTYPE_F32, 2, s, 0);
  const int64_t st[] = { 24, 40 };
  DevT o = dev_empty (SG_DTYPE_F32, 2, st);
  SgCuTensor at = a.t; /* a^T: [24, 40] with strides (1, 24) */
  at.shape[0] = 24;
  at.shape[1] = 40;
  at.stride[0] = 1;
  at.stride[1] = 24;
  ck_assert_int_eq (sg_cu_map (SG_CU_SILU, &o.t, &at, NULL, 0, NULL), cudaSuccess);
  double *got = dev_read (&o), want[24 * 40];
  for (int i = 0; i < 24; i++)
    for (int j = 0; j < 40; j++) {
      const double x = a.ref[j * 24 + i];
      want[i * 40 + j] = x / (1 + exp (-x));
    }
  assert_close (got, want, 24 * 40, 1e-5, 1e-6);
  g_free (got);
  dev_free (&a);
  dev_free (&o);
}
END_TEST

START_TEST (map_silu_backward_and_pow_match_formulas)
{
  const int64_t s[] = { 1000 };
  DevT g = dev_rand (SG_DTYPE_F32, 1, s, 0), x = dev_rand (SG_DTYPE_F32, 1, s, 0);
  DevT o = dev_empty (SG_DTYPE_F32, 1, s), p = dev_empty (SG_DTYPE_F32, 1, s);
  DevT r = dev_empty (SG_DTYPE_F32, 1, s);
  DevT pos = dev_rand (SG_DTYPE_F32, 1, s, 1.5f);
  ck_assert_int_eq (sg_cu_map (SG_CU_SILU_BWD, &o.t, &g.t, &x.t, 0, NULL), cudaSuccess);
  ck_assert_int_eq (sg_cu_map (SG_CU_POW_S, &p.t, &x.t, NULL, 3.0, NULL), cudaSuccess);
  ck_assert_int_eq (sg_cu_map (SG_CU_RSQRT, &r.t, &pos.t, NULL, 0, NULL), cudaSuccess);
  double *go = dev_read (&o), *gp = dev_read (&p), *gr = dev_read (&r);
  double wo[1000], wp[1000], wr[1000];
  for (int i = 0; i < 1000; i++) {
    const double xi = x.ref[i], sg = 1 / (1 + exp (-xi));
    wo[i] = g.ref[i] * sg * (1 + xi * (1 - sg));
    wp[i] = xi * xi * xi;
    wr[i] = 1 / sqrt (pos.ref[i]);
  }
  assert_close (go, wo, 1000, 1e-5, 1e-6);
  assert_close (gp, wp, 1000, 1e-5, 1e-6);
  assert_close (gr, wr, 1000, 1e-5, 1e-6);
  g_free (go);
  g_free (gp);
  g_free (gr);
  dev_free (&g);
  dev_free (&x);
  dev_free (&o);
  dev_free (&p);
  dev_free (&r);
  dev_free (&pos);
}
END_TEST

/* The row path (16-byte vectors, kernels.cu): bf16 [64, 256] with an operand
 * constant along each row (RMSNorm's x * rstd), one varying along the row
 * only (y * w), a unary op, a fill; and a row length that is not a multiple
 * of the vector width (generic path) for comparison. */
START_TEST (map_rows_path_broadcasts_rows_and_columns)
{
  const int64_t s2[] = { 64, 256 }, sr[] = { 64, 1 }, sc[] = { 256 }, so[] = { 64, 250 };
  DevT x = dev_rand (SG_DTYPE_BF16, 2, s2, 0), r = dev_rand (SG_DTYPE_BF16, 2, sr, 0);
  DevT w = dev_rand (SG_DTYPE_BF16, 1, sc, 0);
  DevT o1 = dev_empty (SG_DTYPE_BF16, 2, s2), o2 = dev_empty (SG_DTYPE_BF16, 2, s2);
  DevT o3 = dev_empty (SG_DTYPE_BF16, 2, s2), o4 = dev_empty (SG_DTYPE_BF16, 2, s2);
  DevT o5 = dev_empty (SG_DTYPE_BF16, 2, so);
  ck_assert_int_eq (sg_cu_map (SG_CU_MUL, &o1.t, &x.t, &r.t, 0, NULL), cudaSuccess);
  ck_assert_int_eq (sg_cu_map (SG_CU_ADD, &o2.t, &x.t, &w.t, -2.0, NULL), cudaSuccess);
  ck_assert_int_eq (sg_cu_map (SG_CU_SILU, &o3.t, &x.t, NULL, 0, NULL), cudaSuccess);
  ck_assert_int_eq (sg_cu_map (SG_CU_FILL, &o4.t, NULL, NULL, 0.75, NULL), cudaSuccess);
  SgCuTensor xv = x.t; /* [64, 250] of the [64, 256] rows: generic path */
  xv.shape[1] = 250;
  ck_assert_int_eq (sg_cu_map (SG_CU_MUL_S, &o5.t, &xv, NULL, 3.0, NULL), cudaSuccess);
  double *g1 = dev_read (&o1), *g2 = dev_read (&o2), *g3 = dev_read (&o3), *g4 = dev_read (&o4);
  double *g5 = dev_read (&o5);
  double *w1 = g_new (double, 64 * 256), *w2 = g_new (double, 64 * 256);
  double *w3 = g_new (double, 64 * 256), *w4 = g_new (double, 64 * 256);
  double *w5 = g_new (double, 64 * 250);
  for (int i = 0; i < 64; i++)
    for (int j = 0; j < 256; j++) {
      const double v = x.ref[i * 256 + j];
      w1[i * 256 + j] = v * r.ref[i];
      w2[i * 256 + j] = v - 2.0 * w.ref[j];
      w3[i * 256 + j] = v / (1 + exp (-v));
      w4[i * 256 + j] = 0.75;
      if (j < 250)
        w5[i * 250 + j] = 3.0 * v;
    }
  assert_close (g1, w1, 64 * 256, 1.0 / 128, 1e-6);
  assert_close (g2, w2, 64 * 256, 1.0 / 128, 1e-6);
  assert_close (g3, w3, 64 * 256, 1.0 / 128, 1e-6);
  assert_close (g4, w4, 64 * 256, 0, 0);
  assert_close (g5, w5, 64 * 250, 1.0 / 128, 1e-6);
  double *gs[] = { g1, g2, g3, g4, g5, w1, w2, w3, w4, w5 };
  for (int k = 0; k < 10; k++)
    g_free (gs[k]);
  DevT *ds[] = { &x, &r, &w, &o1, &o2, &o3, &o4, &o5 };
  for (int k = 0; k < 8; k++)
    dev_free (ds[k]);
}
END_TEST

/* ---- reductions ---- */

/* Per column of a dense [rows, cols] @a: its sum and its max. */
static void
column_ref (const double *a, int rows, int cols, double *sum, double *max)
{
  for (int j = 0; j < cols; j++) {
    sum[j] = 0;
    max[j] = -INFINITY;
    for (int i = 0; i < rows; i++) {
      sum[j] += a[i * cols + j];
      max[j] = fmax (max[j], a[i * cols + j]);
    }
  }
}

/* few short rows: a block per row */
START_TEST (reduce_mean_over_last_dim_keepdim)
{
  const int64_t s[] = { 17, 304 }, so[] = { 17, 1 };
  DevT a = dev_rand (SG_DTYPE_BF16, 2, s, 0);
  DevT o = dev_empty (SG_DTYPE_F32, 2, so);
  ck_assert_int_eq (sg_cu_reduce (SG_CU_RED_MEAN, &o.t, &a.t, 1u << 1, NULL, 0, NULL), cudaSuccess);
  double *got = dev_read (&o), want[17];
  for (int i = 0; i < 17; i++) {
    want[i] = 0;
    for (int j = 0; j < 304; j++)
      want[i] += a.ref[i * 304 + j];
    want[i] /= 304;
  }
  assert_close (got, want, 17, 1e-5, 1e-6);
  g_free (got);
  dev_free (&a);
  dev_free (&o);
}
END_TEST

START_TEST (reduce_sum_over_dim0_drops_it)
{
  const int64_t s[] = { 513, 9 }, so[] = { 9 };
  DevT a = dev_rand (SG_DTYPE_F32, 2, s, 0);
  DevT o = dev_empty (SG_DTYPE_F32, 1, so);
  DevT m = dev_empty (SG_DTYPE_F32, 1, so);
  ck_assert_int_eq (sg_cu_reduce (SG_CU_RED_SUM, &o.t, &a.t, 1u, NULL, 0, NULL), cudaSuccess);
  ck_assert_int_eq (sg_cu_reduce (SG_CU_RED_AMAX, &m.t, &a.t, 1u, NULL, 0, NULL), cudaSuccess);
  double *got = dev_read (&o), *gm = dev_read (&m), want[9], wm[9];
  column_ref (a.ref, 513, 9, want, wm);
  assert_close (got, want, 9, 1e-5, 1e-4);
  assert_close (gm, wm, 9, 0, 0);
  g_free (got);
  g_free (gm);
  dev_free (&a);
  dev_free (&o);
  dev_free (&m);
}
END_TEST

/* Many rows reduced over the innermost dim (RMSNorm's mean) and many
 * columns over the outermost (a weight's gradient): sum, mean and amax,
 * bf16 in, fp32 out. */
START_TEST (reduce_dense_rows_and_columns)
{
  const int64_t sr[] = { 512, 384 }, sro[] = { 512, 1 }, sc[] = { 64, 4224 }, sco[] = { 4224 };
  DevT a = dev_rand (SG_DTYPE_BF16, 2, sr, 0), b = dev_rand (SG_DTYPE_BF16, 2, sc, 0);
  DevT mean = dev_empty (SG_DTYPE_F32, 2, sro), mx = dev_empty (SG_DTYPE_F32, 2, sro);
  DevT sum = dev_empty (SG_DTYPE_F32, 1, sco), cmx = dev_empty (SG_DTYPE_F32, 1, sco);
  ck_assert_int_eq (sg_cu_reduce (SG_CU_RED_MEAN, &mean.t, &a.t, 1u << 1, NULL, 0, NULL),
                    cudaSuccess);
  ck_assert_int_eq (sg_cu_reduce (SG_CU_RED_AMAX, &mx.t, &a.t, 1u << 1, NULL, 0, NULL),
                    cudaSuccess);
  ck_assert_int_eq (sg_cu_reduce (SG_CU_RED_SUM, &sum.t, &b.t, 1u, NULL, 0, NULL), cudaSuccess);
  ck_assert_int_eq (sg_cu_reduce (SG_CU_RED_AMAX, &cmx.t, &b.t, 1u, NULL, 0, NULL), cudaSuccess);
  double *gmean = dev_read (&mean), *gmx = dev_read (&mx), *gsum = dev_read (&sum);
  double *gcmx = dev_read (&cmx);
  double *wmean = g_new (double, 512), *wmx = g_new (double, 512);
  double *wsum = g_new (double, 4224), *wcmx = g_new (double, 4224);
  for (int i = 0; i < 512; i++) {
    wmean[i] = 0;
    wmx[i] = -INFINITY;
    for (int j = 0; j < 384; j++) {
      wmean[i] += a.ref[i * 384 + j] / 384;
      wmx[i] = fmax (wmx[i], a.ref[i * 384 + j]);
    }
  }
  column_ref (b.ref, 64, 4224, wsum, wcmx);
  assert_close (gmean, wmean, 512, 1e-5, 1e-6);
  assert_close (gmx, wmx, 512, 0, 0);
  assert_close (gsum, wsum, 4224, 1e-5, 1e-5);
  assert_close (gcmx, wcmx, 4224, 0, 0);
  double *fr[] = { gmean, gmx, gsum, gcmx, wmean, wmx, wsum, wcmx };
  for (int k = 0; k < 8; k++)
    g_free (fr[k]);
  DevT *ds[] = { &a, &b, &mean, &mx, &sum, &cmx };
  for (int k = 0; k < 6; k++)
    dev_free (ds[k]);
}
END_TEST

START_TEST (reduce_long_mean_to_a_scalar_runs_in_two_passes)
{
  const int64_t s[] = { 300, 1000 };
  DevT a = dev_rand (SG_DTYPE_BF16, 2, s, 0);
  DevT o = dev_empty (SG_DTYPE_F32, 0, s);
  const int64_t np = sg_cu_reduce_partials (&o.t, &a.t);
  ck_assert_int_gt (np, 1);
  float *partials;
  ck_assert_int_eq (cudaMalloc ((void **)&partials, (size_t)np * 4), cudaSuccess);
  ck_assert_int_eq (sg_cu_reduce (SG_CU_RED_MEAN, &o.t, &a.t, 3u, partials, np, NULL),
                    cudaSuccess);
  double *got = dev_read (&o), want = 0;
  for (int i = 0; i < 300000; i++)
    want += a.ref[i];
  want /= 300000;
  assert_close (got, &want, 1, 1e-4, 1e-6);
  /* the same without partials (one pass) agrees */
  DevT o1 = dev_empty (SG_DTYPE_F32, 0, s);
  ck_assert_int_eq (sg_cu_reduce (SG_CU_RED_MEAN, &o1.t, &a.t, 3u, NULL, 0, NULL), cudaSuccess);
  double *got1 = dev_read (&o1);
  assert_close (got1, &want, 1, 1e-4, 1e-6);
  g_free (got);
  g_free (got1);
  cudaFree (partials);
  dev_free (&a);
  dev_free (&o);
  dev_free (&o1);
}
END_TEST

/* Tall columns (sum over the two outer dims of [4, 512, 64]) take two
 * passes through partials; both passes run in a fixed order, so a second run
 * gives the same bits, and one pass (no partials) agrees to rounding. */
START_TEST (reduce_tall_columns_in_two_passes_repeat_bitwise)
{
  const int64_t s[] = { 4, 512, 64 }, so[] = { 64 };
  DevT a = dev_rand (SG_DTYPE_BF16, 3, s, 0);
  DevT o = dev_empty (SG_DTYPE_F32, 1, so), o2 = dev_empty (SG_DTYPE_F32, 1, so);
  DevT o1 = dev_empty (SG_DTYPE_F32, 1, so), m = dev_empty (SG_DTYPE_BF16, 1, so);
  const int64_t np = sg_cu_reduce_partials (&o.t, &a.t);
  ck_assert_int_gt (np, 64);
  float *partials;
  ck_assert_int_eq (cudaMalloc ((void **)&partials, (size_t)np * 4), cudaSuccess);
  ck_assert_int_eq (sg_cu_reduce (SG_CU_RED_SUM, &o.t, &a.t, 3u, partials, np, NULL), cudaSuccess);
  ck_assert_int_eq (sg_cu_reduce (SG_CU_RED_SUM, &o2.t, &a.t, 3u, partials, np, NULL),
                    cudaSuccess);
  ck_assert_int_eq (sg_cu_reduce (SG_CU_RED_SUM, &o1.t, &a.t, 3u, NULL, 0, NULL), cudaSuccess);
  ck_assert_int_eq (sg_cu_reduce (SG_CU_RED_AMAX, &m.t, &a.t, 3u, partials, np, NULL),
                    cudaSuccess);
  double *g = dev_read (&o), *g2 = dev_read (&o2), *g1 = dev_read (&o1), *gm = dev_read (&m);
  double want[64], wm[64];
  column_ref (a.ref, 2048, 64, want, wm);
  assert_close (g, want, 64, 1e-5, 1e-4);
  assert_close (g1, want, 64, 1e-5, 1e-4);
  assert_close (gm, wm, 64, 0, 0);
  ck_assert_int_eq (memcmp (g, g2, sizeof want), 0);
  double *fr[] = { g, g2, g1, gm };
  free_n (fr, 4);
  cudaFree (partials);
  DevT *ds[] = { &a, &o, &o2, &o1, &m };
  dev_free_n (ds, 5);
}
END_TEST

/* ---- dtype conversion (_to_copy) ---- */

START_TEST (copy_converts_bf16_to_f32_and_back)
{
  const int64_t s[] = { 1000, 24 };
  DevT a = dev_rand (SG_DTYPE_BF16, 2, s, 0);
  DevT f = dev_empty (SG_DTYPE_F32, 2, s), b = dev_empty (SG_DTYPE_BF16, 2, s);
  DevT x = dev_rand (SG_DTYPE_F32, 2, s, 0), xb = dev_empty (SG_DTYPE_BF16, 2, s);
  ck_assert_int_eq (sg_cu_map (SG_CU_COPY, &f.t, &a.t, NULL, 0, NULL), cudaSuccess);
  ck_assert_int_eq (sg_cu_map (SG_CU_COPY, &b.t, &f.t, NULL, 0, NULL), cudaSuccess);
  ck_assert_int_eq (sg_cu_map (SG_CU_COPY, &xb.t, &x.t, NULL, 0, NULL), cudaSuccess);
  double *gf = dev_read (&f), *gb = dev_read (&b), *gx = dev_read (&xb);
  double *wx = g_new (double, 24000);
  for (int i = 0; i < 24000; i++)
    wx[i] = bf2f (f2bf ((float)x.ref[i])); /* round to nearest even, once */
  assert_close (gf, a.ref, 24000, 0, 0);
  assert_close (gb, a.ref, 24000, 0, 0);
  assert_close (gx, wx, 24000, 0, 0);
  double *fr[] = { gf, gb, gx, wx };
  free_n (fr, 4);
  DevT *ds[] = { &a, &f, &b, &x, &xb };
  dev_free_n (ds, 5);
}
END_TEST

/* ---- flat copies (bucket pack / unpack semantics) ---- */

START_TEST (copy_range_reads_a_transposed_view_in_logical_order)
{
  const int64_t s[] = { 6, 10 }, sf[] = { 60 };
  DevT a = dev_rand (SG_DTYPE_BF16, 2, s, 0);
  DevT o = dev_empty (SG_DTYPE_BF16, 1, sf);
  SgCuTensor at = a.t; /* [10, 6] view of a^T */
  at.shape[0] = 10;
  at.shape[1] = 6;
  at.stride[0] = 1;
  at.stride[1] = 10;
  /* logical elements 7..52 of a^T into o[3..48] */
  ck_assert_int_eq (sg_cu_copy_range (&o.t, 3, &at, 7, 46, NULL), cudaSuccess);
  double *got = dev_read (&o);
  for (int j = 0; j < 46; j++) {
    const int l = 7 + j, r = l / 6, c = l % 6;
    ck_assert_msg (got[3 + j] == a.ref[c * 10 + r], "element %d", j);
  }
  ck_assert (got[0] == 0 && got[49] == 0);
  g_free (got);
  dev_free (&a);
  dev_free (&o);
}
END_TEST

/* ---- GEMM ---- */

/* @sms > 0: on that many SMs through cuBLASLt (a plan's sm_count). */
static void
gemm_case_on (bool ta, bool tb, SgDtype dt, SgDtype out_dt, int32_t sms)
{
  enum { M = 37, K = 64, N = 29 };
  const int64_t sa[] = { ta ? K : M, ta ? M : K }, sb[] = { tb ? N : K, tb ? K : N };
  const int64_t sc[] = { M, N };
  DevT a = dev_rand (dt, 2, sa, 0), b = dev_rand (dt, 2, sb, 0);
  DevT c = dev_empty (out_dt, 2, sc);
  SgCuTensor av = a.t, bv = b.t;
  if (ta) { /* the [M, K] view a.t() of a [K, M] tensor */
    av.shape[0] = M; av.shape[1] = K; av.stride[0] = 1; av.stride[1] = M;
  }
  if (tb) {
    bv.shape[0] = K; bv.shape[1] = N; bv.stride[0] = 1; bv.stride[1] = K;
  }
  cublasHandle_t h;
  cublasLtHandle_t lt;
  void *ws = NULL;
  ck_assert_int_eq (cublasCreate (&h), CUBLAS_STATUS_SUCCESS);
  ck_assert_int_eq (cublasLtCreate (&lt), CUBLAS_STATUS_SUCCESS);
  ck_assert_int_eq (cudaMalloc (&ws, SG_CU_BLAS_WORKSPACE), cudaSuccess);
  GError *error = NULL;
  ck_assert_msg (sms > 0 ? sg_cu_gemm_sms (lt, ws, SG_CU_BLAS_WORKSPACE, sms, NULL, &av, &bv,
                                           &c.t, 1.f, 0.f, NULL, 0, &error)
                         : sg_cu_gemm (h, NULL, &av, &bv, &c.t, 1.f, 0.f, NULL, 0, &error),
                 "%s", error ? error->message : "");
  cudaFree (ws);
  cublasLtDestroy (lt);
  double *got = dev_read (&c), want[M * N];
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int k = 0; k < K; k++)
        s += (ta ? a.ref[k * M + i] : a.ref[i * K + k]) *
             (tb ? b.ref[j * K + k] : b.ref[k * N + j]);
      want[i * N + j] = s;
    }
  assert_close (got, want, M * N, out_dt == SG_DTYPE_BF16 ? 1.0 / 128 : 1e-4, 1e-3);
  g_free (got);
  cublasDestroy (h);
  dev_free (&a);
  dev_free (&b);
  dev_free (&c);
}

static void
gemm_case (bool ta, bool tb, SgDtype dt, SgDtype out_dt)
{
  gemm_case_on (ta, tb, dt, out_dt, 0);
}

START_TEST (gemm_on_fewer_sms_matches_reference)
{
  gemm_case_on (false, false, SG_DTYPE_BF16, SG_DTYPE_BF16, 66);
  gemm_case_on (true, false, SG_DTYPE_BF16, SG_DTYPE_BF16, 16);
  gemm_case_on (false, true, SG_DTYPE_BF16, SG_DTYPE_F32, 120);
  gemm_case_on (true, true, SG_DTYPE_F32, SG_DTYPE_F32, 8);
}
END_TEST

START_TEST (gemm_handles_every_transposition_in_bf16)
{
  gemm_case (false, false, SG_DTYPE_BF16, SG_DTYPE_BF16);
  gemm_case (true, false, SG_DTYPE_BF16, SG_DTYPE_BF16);
  gemm_case (false, true, SG_DTYPE_BF16, SG_DTYPE_BF16);
  gemm_case (true, true, SG_DTYPE_BF16, SG_DTYPE_F32);
}
END_TEST

START_TEST (gemm_f32_matches_reference)
{
  gemm_case (false, true, SG_DTYPE_F32, SG_DTYPE_F32);
}
END_TEST

START_TEST (gemm_stages_an_operand_that_is_neither_row_nor_column_major)
{
  /* a: the [8, 16] view with strides (32, 2) of a [8, 32] tensor */
  const int64_t sa[] = { 8, 32 }, sb[] = { 16, 4 }, sc[] = { 8, 4 };
  DevT a = dev_rand (SG_DTYPE_F32, 2, sa, 0), b = dev_rand (SG_DTYPE_F32, 2, sb, 0);
  DevT c = dev_empty (SG_DTYPE_F32, 2, sc);
  SgCuTensor av = a.t;
  av.shape[1] = 16;
  av.stride[1] = 2;
  void *scratch;
  ck_assert_int_eq (cudaMalloc (&scratch, 4096), cudaSuccess);
  ck_assert_uint_gt (sg_cu_gemm_scratch_bytes (&av, &b.t), 0);
  cublasHandle_t h;
  ck_assert_int_eq (cublasCreate (&h), CUBLAS_STATUS_SUCCESS);
  GError *error = NULL;
  ck_assert_msg (sg_cu_gemm (h, NULL, &av, &b.t, &c.t, 1.f, 0.f, scratch, 4096, &error), "%s",
                 error ? error->message : "");
  double *got = dev_read (&c), want[32];
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++) {
      double s = 0;
      for (int k = 0; k < 16; k++)
        s += a.ref[i * 32 + 2 * k] * b.ref[k * 4 + j];
      want[i * 4 + j] = s;
    }
  assert_close (got, want, 32, 1e-4, 1e-4);
  g_free (got);
  cublasDestroy (h);
  cudaFree (scratch);
  dev_free (&a);
  dev_free (&b);
  dev_free (&c);
}
END_TEST

static Suite *
suite (void)
{
  Suite *s = suite_create ("cuda");
  TCase *tc = tcase_create ("kernels");
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, map_add_broadcasts_a_row_and_rounds_to_bf16);
  tcase_add_test (tc, map_mul_broadcasts_a_middle_dim_over_collapsed_dims);
  tcase_add_test (tc, map_reads_transposed_views);
  tcase_add_test (tc, map_silu_backward_and_pow_match_formulas);
  tcase_add_test (tc, map_rows_path_broadcasts_rows_and_columns);
  tcase_add_test (tc, reduce_mean_over_last_dim_keepdim);
  tcase_add_test (tc, reduce_dense_rows_and_columns);
  tcase_add_test (tc, reduce_sum_over_dim0_drops_it);
  tcase_add_test (tc, reduce_long_mean_to_a_scalar_runs_in_two_passes);
  tcase_add_test (tc, reduce_tall_columns_in_two_passes_repeat_bitwise);
  tcase_add_test (tc, copy_converts_bf16_to_f32_and_back);
  tcase_add_test (tc, copy_range_reads_a_transposed_view_in_logical_order);
  tcase_add_test (tc, gemm_handles_every_transposition_in_bf16);
  tcase_add_test (tc, gemm_f32_matches_reference);
  tcase_add_test (tc, gemm_on_fewer_sms_matches_reference);
  tcase_add_test (tc, gemm_stages_an_operand_that_is_neither_row_nor_column_major);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  return devt_main (suite ());
}

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

#include "cuda-private.h"

/* ---- host helpers ---- */

static uint16_t
f2bf (float f)
{
  uint32_t u;
  memcpy (&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

static float
bf2f (uint16_t h)
{
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy (&f, &u, 4);
  return f;
}

static uint64_t rng = 88172645463325252ull;
static float
frand (void)
{
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

typedef struct {
  SgCuTensor t;
  size_t bytes;
  double *ref; /* logical values (as stored) in row-major order */
} DevT;

static int64_t
numel_of (int nd, const int64_t *shape)
{
  int64_t n = 1;
  for (int k = 0; k < nd; k++)
    n *= shape[k];
  return n;
}

/* A dense row-major tensor of random values in [-1, 1) (or [lo, lo+2)). */
static DevT
dev_rand (SgDtype dt, int nd, const int64_t *shape, float lo)
{
  DevT d;
  memset (&d, 0, sizeof d);
  d.t.dtype = dt;
  d.t.ndim = nd;
  int64_t s = 1;
  for (int k = nd - 1; k >= 0; k--) {
    d.t.shape[k] = shape[k];
    d.t.stride[k] = s;
    s *= shape[k];
  }
  const int64_t n = numel_of (nd, shape);
  const size_t es = sg_dtype_size (dt);
  d.bytes = (size_t)n * es;
  void *h = g_malloc (d.bytes + 1);
  d.ref = g_new (double, n + 1);
  for (int64_t i = 0; i < n; i++) {
    const float v = frand () + (lo + 1.f);
    if (dt == SG_DTYPE_BF16) {
      ((uint16_t *)h)[i] = f2bf (v);
      d.ref[i] = bf2f (((uint16_t *)h)[i]);
    } else {
      ((float *)h)[i] = v;
      d.ref[i] = v;
    }
  }
  ck_assert_int_eq (cudaMalloc (&d.t.ptr, d.bytes + 16), cudaSuccess);
  ck_assert_int_eq (cudaMemcpy (d.t.ptr, h, d.bytes, cudaMemcpyHostToDevice), cudaSuccess);
  g_free (h);
  return d;
}

static DevT
dev_empty (SgDtype dt, int nd, const int64_t *shape)
{
  DevT d = dev_rand (dt, nd, shape, 0.f);
  ck_assert_int_eq (cudaMemset (d.t.ptr, 0, d.bytes), cudaSuccess);
  return d;
}

/* Reads @t (dense) back as doubles. */
static double *
dev_read (const DevT *d)
{
  const int64_t n = sg_cu_numel (&d->t);
  void *h = g_malloc (d->bytes + 1);
  ck_assert_int_eq (cudaDeviceSynchronize (), cudaSuccess);
  ck_assert_int_eq (cudaMemcpy (h, d->t.ptr, d->bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  double *out = g_new (double, n + 1);
  for (int64_t i = 0; i < n; i++)
    out[i] = d->t.dtype == SG_DTYPE_BF16 ? bf2f (((uint16_t *)h)[i]) : ((float *)h)[i];
  g_free (h);
  return out;
}

static void
dev_free (DevT *d)
{
  cudaFree (d->t.ptr);
  g_free (d->ref);
}

/* ||got - want|| <= tol * ||want|| (2-norms). */
static void
assert_rel_l2 (const double *got, const double *want, int64_t n, double tol)
{
  double e = 0, w = 0;
  for (int64_t i = 0; i < n; i++) {
    e += (got[i] - want[i]) * (got[i] - want[i]);
    w += want[i] * want[i];
  }
  ck_assert_msg (sqrt (e) <= tol * sqrt (w), "relative L2 error %.3g > %.3g", sqrt (e / w), tol);
}

/* |got - want| <= atol + rtol * |want|, element by element. */
static void
assert_close (const double *got, const double *want, int64_t n, double rtol, double atol)
{
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg (fabs (got[i] - want[i]) <= atol + rtol * fabs (want[i]),
                   "element %" G_GINT64_FORMAT ": got %.6g, want %.6g", i, got[i], want[i]);
}

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

START_TEST (reduce_mean_over_last_dim_keepdim)
{
  const int64_t s[] = { 17, 300 }, so[] = { 17, 1 };
  DevT a = dev_rand (SG_DTYPE_BF16, 2, s, 0);
  DevT o = dev_empty (SG_DTYPE_F32, 2, so);
  ck_assert_int_eq (sg_cu_reduce (SG_CU_RED_MEAN, &o.t, &a.t, 1u << 1, NULL, 0, NULL), cudaSuccess);
  double *got = dev_read (&o), want[17];
  for (int i = 0; i < 17; i++) {
    want[i] = 0;
    for (int j = 0; j < 300; j++)
      want[i] += a.ref[i * 300 + j];
    want[i] /= 300;
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
  for (int j = 0; j < 9; j++) {
    want[j] = 0;
    wm[j] = -INFINITY;
    for (int i = 0; i < 513; i++) {
      want[j] += a.ref[i * 9 + j];
      wm[j] = fmax (wm[j], a.ref[i * 9 + j]);
    }
  }
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
  for (int j = 0; j < 4224; j++) {
    wsum[j] = 0;
    wcmx[j] = -INFINITY;
    for (int i = 0; i < 64; i++) {
      wsum[j] += b.ref[i * 4224 + j];
      wcmx[j] = fmax (wcmx[j], b.ref[i * 4224 + j]);
    }
  }
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

/* ---- attention ---- */

/* Reference causal SDPA (and its gradients) in double on dense [B,H,S,D]. */
static void
sdpa_ref (const double *q, const double *k, const double *v, const double *go, int B, int H,
          int S, int D, bool causal, double *o, double *lse, double *dq, double *dk, double *dv)
{
  const double sc = 1 / sqrt ((double)D);
  double *p = g_new (double, S);
  memset (dq, 0, sizeof (double) * B * H * S * D);
  memset (dk, 0, sizeof (double) * B * H * S * D);
  memset (dv, 0, sizeof (double) * B * H * S * D);
  for (int bh = 0; bh < B * H; bh++) {
    const double *Q = q + bh * S * D, *Kk = k + bh * S * D, *V = v + bh * S * D;
    const double *G = go + bh * S * D;
    for (int i = 0; i < S; i++) {
      const int end = causal ? i + 1 : S;
      double m = -INFINITY, l = 0;
      for (int j = 0; j < end; j++) {
        double s = 0;
        for (int d = 0; d < D; d++)
          s += Q[i * D + d] * Kk[j * D + d];
        p[j] = s * sc;
        m = fmax (m, p[j]);
      }
      for (int j = 0; j < end; j++)
        l += exp (p[j] - m);
      lse[bh * S + i] = m + log (l);
      double delta = 0;
      for (int d = 0; d < D; d++) {
        double acc = 0;
        for (int j = 0; j < end; j++)
          acc += exp (p[j] - lse[bh * S + i]) * V[j * D + d];
        o[(bh * S + i) * D + d] = acc;
        delta += acc * G[i * D + d];
      }
      for (int j = 0; j < end; j++) {
        const double pj = exp (p[j] - lse[bh * S + i]);
        double dp = 0;
        for (int d = 0; d < D; d++)
          dp += G[i * D + d] * V[j * D + d];
        const double ds = pj * (dp - delta);
        for (int d = 0; d < D; d++) {
          dq[(bh * S + i) * D + d] += ds * Kk[j * D + d] * sc;
          dk[(bh * S + j) * D + d] += ds * Q[i * D + d] * sc;
          dv[(bh * S + j) * D + d] += pj * G[i * D + d];
        }
      }
    }
  }
  g_free (p);
}

/* Runs forward and backward on q [B,H,S,D], k/v [B,Hkv,S,D] (f32) and
 * compares with the reference; GQA references expand K/V per query head. */
static void
sdpa_case_dt (int B, int H, int Hkv, int S, int D, bool causal, SgDtype dt, bool fp32_math,
              double rtol)
{
  const int64_t sq[] = { B, H, S, D }, skv[] = { B, Hkv, S, D }, sl[] = { B, H, S, 1 };
  const int n = B * H * S * D, nkv = B * Hkv * S * D, rep = H / Hkv;
  DevT q = dev_rand (dt, 4, sq, 0), k = dev_rand (dt, 4, skv, 0);
  DevT v = dev_rand (dt, 4, skv, 0), go = dev_rand (dt, 4, sq, 0);
  DevT o = dev_empty (dt, 4, sq), lse = dev_empty (SG_DTYPE_F32, 4, sl);
  DevT dq = dev_empty (dt, 4, sq), dk = dev_empty (dt, 4, skv);
  DevT dv = dev_empty (dt, 4, skv);
  const uint64_t bytes = sg_cu_sdpa_scratch_bytes (&q.t, &k.t, true, fp32_math);
  ck_assert_uint_ge (bytes, sg_cu_sdpa_scratch_bytes (&q.t, &k.t, false, fp32_math));
  char *scratch;
  ck_assert_int_eq (cudaMalloc ((void **)&scratch, bytes), cudaSuccess);
  cublasHandle_t h;
  ck_assert_int_eq (cublasCreate (&h), CUBLAS_STATUS_SUCCESS);
  GError *error = NULL;
  ck_assert_msg (sg_cu_sdpa_fwd (h, NULL, &q.t, &k.t, &v.t, &o.t, &lse.t, causal, 0, fp32_math,
                                 scratch, bytes, &error),
                 "%s", error ? error->message : "");
  ck_assert_msg (sg_cu_sdpa_bwd (h, NULL, &go.t, &q.t, &k.t, &v.t, &o.t, &lse.t, &dq.t, &dk.t,
                                 &dv.t, causal, 0, fp32_math, scratch, bytes, &error),
                 "%s", error ? error->message : "");
  /* reference on K/V expanded to H heads; their gradients summed back */
  double *ke = g_new (double, n), *ve = g_new (double, n);
  for (int b = 0; b < B; b++)
    for (int hh = 0; hh < H; hh++)
      for (int e = 0; e < S * D; e++) {
        ke[((b * H + hh) * S) * D + e] = k.ref[((b * Hkv + hh / rep) * S) * D + e];
        ve[((b * H + hh) * S) * D + e] = v.ref[((b * Hkv + hh / rep) * S) * D + e];
      }
  double *wo = g_new (double, n), *wl = g_new (double, B * H * S), *wq = g_new (double, n);
  double *wke = g_new (double, n), *wve = g_new (double, n);
  double *wk = g_new0 (double, nkv), *wv = g_new0 (double, nkv);
  sdpa_ref (q.ref, ke, ve, go.ref, B, H, S, D, causal, wo, wl, wq, wke, wve);
  for (int b = 0; b < B; b++)
    for (int hh = 0; hh < H; hh++)
      for (int e = 0; e < S * D; e++) {
        wk[((b * Hkv + hh / rep) * S) * D + e] += wke[((b * H + hh) * S) * D + e];
        wv[((b * Hkv + hh / rep) * S) * D + e] += wve[((b * H + hh) * S) * D + e];
      }
  double *go_ = dev_read (&o), *gl = dev_read (&lse), *gq = dev_read (&dq);
  double *gk = dev_read (&dk), *gv = dev_read (&dv);
  assert_close (go_, wo, n, rtol, 1e-5);
  assert_close (gl, wl, B * H * S, 1e-4, 1e-5);
  if (dt == SG_DTYPE_F32) {
    assert_close (gq, wq, n, 1e-3, 1e-4);
    assert_close (gk, wk, nkv, 1e-3, 1e-4);
    assert_close (gv, wv, nkv, 1e-3, 1e-4);
  } else {
    /* the backward reads the forward's output rounded to bf16 (as torch's
     * does) while the reference keeps it exact: delta = rowsum(dO * O)
     * differs by a rounding, which dS = P (dP - delta) amplifies where dP
     * and delta nearly cancel; compare norms, not elements */
    assert_rel_l2 (gq, wq, n, 5e-2);
    assert_rel_l2 (gk, wk, nkv, 5e-2);
    assert_rel_l2 (gv, wv, nkv, 1e-2);
  }
  g_free (ke); g_free (ve); g_free (wke); g_free (wve);
  g_free (wo); g_free (wl); g_free (wq); g_free (wk); g_free (wv);
  g_free (go_); g_free (gl); g_free (gq); g_free (gk); g_free (gv);
  cublasDestroy (h);
  cudaFree (scratch);
  dev_free (&q); dev_free (&k); dev_free (&v); dev_free (&go); dev_free (&o);
  dev_free (&lse); dev_free (&dq); dev_free (&dk); dev_free (&dv);
}

static void
sdpa_case (int B, int H, int Hkv, int S, int D, bool causal)
{
  sdpa_case_dt (B, H, Hkv, S, D, causal, SG_DTYPE_F32, false, 1e-4);
}

START_TEST (sdpa_forward_and_backward_match_the_reference)
{
  sdpa_case (2, 3, 3, 45, 40, false);
  sdpa_case (2, 3, 3, 45, 40, true);
}
END_TEST

START_TEST (sdpa_grouped_query_heads_sum_their_kv_gradients)
{
  sdpa_case (1, 4, 2, 33, 16, true);
}
END_TEST

START_TEST (sdpa_bf16_with_fp32_math_rounds_only_its_outputs)
{
  /* every product in fp32: only the final rounding to bf16 (2^-8) remains */
  sdpa_case_dt (1, 2, 2, 40, 32, true, SG_DTYPE_BF16, true, 1.0 / 128);
}
END_TEST

START_TEST (sdpa_rejects_heads_that_do_not_group)
{
  SgCuTensor q, k;
  memset (&q, 0, sizeof q);
  q.ndim = 4;
  q.dtype = SG_DTYPE_BF16;
  const int64_t s[] = { 1, 3, 4, 64 };
  memcpy (q.shape, s, sizeof s);
  k = q;
  k.shape[1] = 2;
  ck_assert_uint_eq (sg_cu_sdpa_scratch_bytes (&q, &k, false, false), 0);
  GError *error = NULL;
  ck_assert (!sg_cu_sdpa_fwd (NULL, NULL, &q, &k, &k, &q, NULL, true, 0, false, NULL, 0, &error));
  ck_assert (error != NULL);
  g_error_free (error);
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
  tcase_add_test (tc, copy_range_reads_a_transposed_view_in_logical_order);
  tcase_add_test (tc, gemm_handles_every_transposition_in_bf16);
  tcase_add_test (tc, gemm_f32_matches_reference);
  tcase_add_test (tc, gemm_on_fewer_sms_matches_reference);
  tcase_add_test (tc, gemm_stages_an_operand_that_is_neither_row_nor_column_major);
  tcase_add_test (tc, sdpa_forward_and_backward_match_the_reference);
  tcase_add_test (tc, sdpa_grouped_query_heads_sum_their_kv_gradients);
  tcase_add_test (tc, sdpa_bf16_with_fp32_math_rounds_only_its_outputs);
  tcase_add_test (tc, sdpa_rejects_heads_that_do_not_group);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  if (sg_cu_device_count () == 0) {
    fprintf (stderr, "no CUDA device: skipped\n");
    return 77;
  }
  SRunner *sr = srunner_create (suite ());
  srunner_set_fork_status (sr, CK_NOFORK);
  srunner_run_all (sr, CK_NORMAL);
  const int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? 0 : 1;
}

/* test_cuda_attn.c: attention on the GPU: the math path (attn.c) against a
 * double-precision reference, and cuDNN's fused SDPA (attn_cudnn.cpp)
 * against the math path, forward and backward, causal and not, grouped
 * query heads, on the [B, H, S, D] views of [B, S, H, D] buffers that the
 * graph's transposes give. Exits 77 (skip) when no GPU is visible (CI).
 * Without a loadable libcudnn.so.9 the cuDNN cases say so and pass, unless
 * SG_REQUIRE_CUDNN=1 (the device script sets it), where they fail.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devt.h"

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

/* ---- cuDNN's fused kernels against the math path ---- */

static cudaStream_t dnn_stream;

/* One handle on a stream of our own; NULL (and a note) without cuDNN. */
static SgCuDnn *
dnn_or_skip (void)
{
  char *why = NULL;
  if (!dnn_stream)
    ck_assert_int_eq (cudaStreamCreateWithFlags (&dnn_stream, cudaStreamNonBlocking), cudaSuccess);
  SgCuDnn *d = sg_cu_dnn_new (&dnn_stream, 1, &why);
  if (!d) {
    const char *req = getenv ("SG_REQUIRE_CUDNN");
    ck_assert_msg (!(req && strcmp (req, "1") == 0), "SG_REQUIRE_CUDNN=1: %s", why);
    fprintf (stderr, "cuDNN case skipped: %s\n", why);
  }
  free (why);
  return d;
}

/* The [B, H, S, D] view of dense [B, S, H, D] @d. */
static SgCuTensor
heads_view (const DevT *d)
{
  SgCuTensor t = d->t;
  t.shape[1] = d->t.shape[2];
  t.shape[2] = d->t.shape[1];
  t.stride[1] = d->t.stride[2];
  t.stride[2] = d->t.stride[1];
  return t;
}

typedef struct {
  DevT q, k, v, go, o, lse, dq, dk, dv;
} AttnBufs;

static void
bufs_init (AttnBufs *b, int B, int H, int Hkv, int S, int D)
{
  const int64_t sq[] = { B, S, H, D }, skv[] = { B, S, Hkv, D }, sl[] = { B, H, S, 1 };
  b->q = dev_rand (SG_DTYPE_BF16, 4, sq, 0);
  b->k = dev_rand (SG_DTYPE_BF16, 4, skv, 0);
  b->v = dev_rand (SG_DTYPE_BF16, 4, skv, 0);
  b->go = dev_rand (SG_DTYPE_BF16, 4, sq, 0);
  b->o = dev_empty (SG_DTYPE_BF16, 4, sq);
  b->lse = dev_empty (SG_DTYPE_F32, 4, sl);
  b->dq = dev_empty (SG_DTYPE_BF16, 4, sq);
  b->dk = dev_empty (SG_DTYPE_BF16, 4, skv);
  b->dv = dev_empty (SG_DTYPE_BF16, 4, skv);
}

static void
bufs_free (AttnBufs *b)
{
  DevT *all[] = { &b->q, &b->k, &b->v, &b->go, &b->o, &b->lse, &b->dq, &b->dk, &b->dv };
  dev_free_n (all, G_N_ELEMENTS (all));
}

/* The call of @b's views; the backward reads @fwd's output and lse. */
static SgCuSdpa
call_of (const AttnBufs *b, const AttnBufs *fwd, bool backward, bool causal)
{
  SgCuSdpa a;
  memset (&a, 0, sizeof a);
  a.backward = backward;
  a.causal = causal;
  a.q = heads_view (&b->q);
  a.k = heads_view (&b->k);
  a.v = heads_view (&b->v);
  a.o = heads_view (backward ? &fwd->o : &b->o);
  a.lse = backward ? fwd->lse.t : b->lse.t;
  a.dout = heads_view (&b->go);
  a.dq = heads_view (&b->dq);
  a.dk = heads_view (&b->dk);
  a.dv = heads_view (&b->dv);
  return a;
}

/* Plans and runs @a on @d; the workspace is freed after the run. */
static void
dnn_run (SgCuDnn *d, const SgCuSdpa *a)
{
  char *why = NULL;
  uint64_t ws = 0;
  const int32_t p = sg_cu_dnn_sdpa_plan (d, a, &ws, &why);
  ck_assert_msg (p >= 0, "cuDNN plan: %s", why ? why : "?");
  void *w = NULL;
  ck_assert_int_eq (cudaMalloc (&w, ws + 256), cudaSuccess);
  ck_assert_msg (sg_cu_dnn_sdpa_run (d, p, 0, a, w, &why), "cuDNN run: %s", why ? why : "?");
  ck_assert_int_eq (cudaStreamSynchronize (dnn_stream), cudaSuccess);
  cudaFree (w);
}

/* The math path (fp32 math: the closest to exact) on the same views. */
static void
math_run (const SgCuSdpa *a)
{
  const uint64_t bytes = sg_cu_sdpa_scratch_bytes (&a->q, &a->k, true, true);
  char *scratch;
  ck_assert_int_eq (cudaMalloc ((void **)&scratch, bytes), cudaSuccess);
  cublasHandle_t h;
  ck_assert_int_eq (cublasCreate (&h), CUBLAS_STATUS_SUCCESS);
  GError *error = NULL;
  const bool ok = a->backward
    ? sg_cu_sdpa_bwd (h, NULL, &a->dout, &a->q, &a->k, &a->v, &a->o, &a->lse, &a->dq, &a->dk,
                      &a->dv, a->causal, 0, true, scratch, bytes, &error)
    : sg_cu_sdpa_fwd (h, NULL, &a->q, &a->k, &a->v, &a->o, &a->lse, a->causal, 0, true, scratch,
                      bytes, &error);
  ck_assert_msg (ok, "%s", error ? error->message : "");
  ck_assert_int_eq (cudaDeviceSynchronize (), cudaSuccess);
  cublasDestroy (h);
  cudaFree (scratch);
}

static void
assert_same_values (const DevT *got, const DevT *want, double tol)
{
  double *g = dev_read (got), *w = dev_read (want);
  assert_rel_l2 (g, w, sg_cu_numel (&want->t), tol);
  g_free (g);
  g_free (w);
}

/* cuDNN against the math path: the forward's O and log-sum-exp, and the
 * backward's gradients from the same inputs (the math forward's O and
 * lse). bf16 operands; cuDNN rounds P and dS to bf16 before their GEMMs
 * where the fp32 math path does not: a few 2^-9 of relative L2 error. */
static void
dnn_vs_math (int B, int H, int Hkv, int S, int D, bool causal)
{
  SgCuDnn *d = dnn_or_skip ();
  if (!d)
    return;
  AttnBufs m, c;
  bufs_init (&m, B, H, Hkv, S, D);
  c = m; /* the same inputs; outputs of its own */
  const int64_t sq[] = { B, S, H, D }, skv[] = { B, S, Hkv, D }, sl[] = { B, H, S, 1 };
  c.o = dev_empty (SG_DTYPE_BF16, 4, sq);
  c.lse = dev_empty (SG_DTYPE_F32, 4, sl);
  c.dq = dev_empty (SG_DTYPE_BF16, 4, sq);
  c.dk = dev_empty (SG_DTYPE_BF16, 4, skv);
  c.dv = dev_empty (SG_DTYPE_BF16, 4, skv);
  SgCuSdpa mf = call_of (&m, &m, false, causal), cf = call_of (&c, &c, false, causal);
  math_run (&mf);
  dnn_run (d, &cf);
  assert_same_values (&c.o, &m.o, 1e-2);
  {
    double *g = dev_read (&c.lse), *w = dev_read (&m.lse);
    assert_close (g, w, (int64_t)B * H * S, 1e-4, 1e-3);
    g_free (g);
    g_free (w);
  }
  SgCuSdpa mb = call_of (&m, &m, true, causal), cb = call_of (&c, &m, true, causal);
  math_run (&mb);
  dnn_run (d, &cb);
  assert_same_values (&c.dq, &m.dq, 2e-2);
  assert_same_values (&c.dk, &m.dk, 2e-2);
  assert_same_values (&c.dv, &m.dv, 2e-2);
  DevT *own[] = { &c.o, &c.lse, &c.dq, &c.dk, &c.dv };
  dev_free_n (own, G_N_ELEMENTS (own));
  bufs_free (&m);
  sg_cu_dnn_free (d);
}

START_TEST (cudnn_attention_matches_the_math_path)
{
  dnn_vs_math (1, 4, 4, 256, 64, false);
  dnn_vs_math (1, 4, 4, 256, 64, true);
  dnn_vs_math (2, 2, 2, 200, 128, true); /* S not a multiple of the kernels' tiles */
}
END_TEST

START_TEST (cudnn_attention_runs_grouped_query_heads)
{
  dnn_vs_math (1, 8, 2, 256, 128, true);
}
END_TEST

START_TEST (cudnn_plans_once_per_shape_and_rejects_fp32)
{
  SgCuDnn *d = dnn_or_skip ();
  if (!d)
    return;
  AttnBufs b;
  bufs_init (&b, 1, 2, 2, 64, 64);
  SgCuSdpa a = call_of (&b, &b, false, true), a2 = a;
  char *why = NULL;
  uint64_t ws = 0;
  const int32_t p = sg_cu_dnn_sdpa_plan (d, &a, &ws, &why);
  ck_assert_msg (p >= 0, "%s", why ? why : "?");
  a2.q.ptr = a2.o.ptr; /* other pointers, same shapes: the same plan */
  ck_assert_int_eq (sg_cu_dnn_sdpa_plan (d, &a2, &ws, &why), p);
  a2.causal = false;
  ck_assert_int_ne (sg_cu_dnn_sdpa_plan (d, &a2, &ws, &why), p);
  a2.q.dtype = a2.k.dtype = a2.v.dtype = a2.o.dtype = SG_DTYPE_F32;
  ck_assert_int_eq (sg_cu_dnn_sdpa_plan (d, &a2, &ws, &why), -1);
  ck_assert_msg (why && strstr (why, "fp32"), "%s", why ? why : "(no reason)");
  free (why);
  bufs_free (&b);
  sg_cu_dnn_free (d);
}
END_TEST

START_TEST (cudnn_deterministic_backward_repeats_bitwise)
{
  SgCuDnn *d = dnn_or_skip ();
  if (!d)
    return;
  AttnBufs b;
  bufs_init (&b, 1, 4, 4, 512, 128);
  SgCuSdpa f = call_of (&b, &b, false, true);
  dnn_run (d, &f);
  SgCuSdpa g = call_of (&b, &b, true, true);
  g.deterministic = true;
  dnn_run (d, &g);
  double *first = dev_read (&b.dq);
  dnn_run (d, &g);
  double *again = dev_read (&b.dq);
  ck_assert_int_eq (memcmp (first, again, sizeof (double) * (size_t)sg_cu_numel (&b.dq.t)), 0);
  g_free (first);
  g_free (again);
  bufs_free (&b);
  sg_cu_dnn_free (d);
}
END_TEST

static Suite *
suite (void)
{
  Suite *s = suite_create ("cuda");
  TCase *tc = tcase_create ("attention");
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, sdpa_forward_and_backward_match_the_reference);
  tcase_add_test (tc, sdpa_grouped_query_heads_sum_their_kv_gradients);
  tcase_add_test (tc, sdpa_bf16_with_fp32_math_rounds_only_its_outputs);
  tcase_add_test (tc, sdpa_rejects_heads_that_do_not_group);
  tcase_add_test (tc, cudnn_attention_matches_the_math_path);
  tcase_add_test (tc, cudnn_attention_runs_grouped_query_heads);
  tcase_add_test (tc, cudnn_plans_once_per_shape_and_rejects_fp32);
  tcase_add_test (tc, cudnn_deterministic_backward_repeats_bitwise);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  return devt_main (suite ());
}

/* devt.c: host helpers of the CUDA kernel tests (test_cuda_kernels.c,
 * test_cuda_attn.c): random device tensors with their values kept in
 * double, bf16 rounding, read-back, tolerance checks.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devt.h"

uint16_t
f2bf (float f)
{
  uint32_t u;
  memcpy (&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

float
bf2f (uint16_t h)
{
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy (&f, &u, 4);
  return f;
}

static uint64_t rng = 88172645463325252ull;
float
frand (void)
{
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}


static int64_t
numel_of (int nd, const int64_t *shape)
{
  int64_t n = 1;
  for (int k = 0; k < nd; k++)
    n *= shape[k];
  return n;
}

/* A dense row-major tensor of random values in [-1, 1) (or [lo, lo+2)). */
DevT
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

DevT
dev_empty (SgDtype dt, int nd, const int64_t *shape)
{
  DevT d = dev_rand (dt, nd, shape, 0.f);
  ck_assert_int_eq (cudaMemset (d.t.ptr, 0, d.bytes), cudaSuccess);
  return d;
}

/* Reads @t (dense) back as doubles. */
double *
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

void
dev_free (DevT *d)
{
  cudaFree (d->t.ptr);
  g_free (d->ref);
}

/* ||got - want|| <= tol * ||want|| (2-norms). */
void
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
void
assert_close (const double *got, const double *want, int64_t n, double rtol, double atol)
{
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg (fabs (got[i] - want[i]) <= atol + rtol * fabs (want[i]),
                   "element %" G_GINT64_FORMAT ": got %.6g, want %.6g", i, got[i], want[i]);
}

void
dev_free_n (DevT *const *ds, int n)
{
  for (int k = 0; k < n; k++)
    dev_free (ds[k]);
}

void
free_n (double *const *ps, int n)
{
  for (int k = 0; k < n; k++)
    g_free (ps[k]);
}

int
devt_main (Suite *s)
{
  SRunner *sr = srunner_create (s);
  if (sg_cu_device_count () == 0) {
    fprintf (stderr, "no CUDA device: skipped\n");
    srunner_free (sr);
    return 77;
  }
  srunner_set_fork_status (sr, CK_NOFORK);
  srunner_run_all (sr, CK_NORMAL);
  const int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? 0 : 1;
}

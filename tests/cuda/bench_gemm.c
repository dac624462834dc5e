/* bench_gemm.c: not a test: tools/device/chunked_mm.sh runs it on one GPU.
 *
 *   bench_gemm M K N [--chunks 1,2,4,8] [--sms 132,120,112,96] [--reps R]
 *              [--samples S] [--dtype bfloat16|float16|float32]
 *   bench_gemm --sm-count      (prints the device's SM count)
 *
 * The GEMMs schedrun runs (sg_cu_gemm: cublasGemmEx; sg_cu_gemm_sms:
 * cuBLASLt with an SM-count target), timed as schedrun's --launch graph
 * runs them: R repetitions of the sequence captured into one CUDA graph,
 * S timed replays (CUDA events), the median per repetition. Prints one
 * tab-separated line per case:
 *   shape  mode  k  sms  us  efficiency
 * mode m / n / k: the M x K x N mm as k chunks along M (all_gather -> mm
 * decomposed), N, or K (partial sums accumulated, beta 1); mode sms: one
 * mm on cuBLASLt with CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET = sms.
 * efficiency = the one-mm time (mode m, k 1) / this case's time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda-private.h"

typedef struct {
  int64_t M, K, N;
  SgDtype dt;
  SgCuTensor a, b, c;
  cublasHandle_t h;
  cublasLtHandle_t lt;
  char *ws;
  cudaStream_t s;
} Bench;

static void
die (const char *what, GError *e)
{
  fprintf (stderr, "bench_gemm: %s%s%s\n", what, e ? ": " : "", e ? e->message : "");
  exit (1);
}

static SgCuTensor
mat (void *ptr, SgDtype dt, int64_t r, int64_t c, int64_t ld)
{
  return (SgCuTensor){ .ptr = ptr, .dtype = dt, .ndim = 2, .shape = { r, c }, .stride = { ld, 1 } };
}

/* Queues the case once: @mode 'm', 'n', 'k' in @k chunks, or 's' on @sms SMs. */
static void
issue (Bench *b, char mode, int k, int sms)
{
  GError *e = NULL;
  const size_t es = sg_dtype_size (b->dt);
  char *A = b->a.ptr, *B = b->b.ptr, *C = b->c.ptr;
  bool ok = true;
  if (mode == 's') {
    ok = sg_cu_gemm_sms (b->lt, b->ws, SG_CU_BLAS_WORKSPACE, sms, b->s, &b->a, &b->b, &b->c, 1.f,
                         0.f, NULL, 0, &e);
  }
  for (int i = 0; ok && mode != 's' && i < k; i++) {
    SgCuTensor a = b->a, bb = b->b, c = b->c;
    float beta = 0.f;
    if (mode == 'm') {
      const int64_t r = b->M / k;
      a = mat (A + (size_t)(i * r * b->K) * es, b->dt, r, b->K, b->K);
      c = mat (C + (size_t)(i * r * b->N) * es, b->dt, r, b->N, b->N);
    } else if (mode == 'n') {
      const int64_t w = b->N / k;
      bb = mat (B + (size_t)(i * w) * es, b->dt, b->K, w, b->N);
      c = mat (C + (size_t)(i * w) * es, b->dt, b->M, w, b->N);
    } else {
      const int64_t w = b->K / k;
      a = mat (A + (size_t)(i * w) * es, b->dt, b->M, w, b->K);
      bb = mat (B + (size_t)(i * w * b->N) * es, b->dt, w, b->N, b->N);
      beta = i ? 1.f : 0.f;
    }
    ok = sg_cu_gemm (b->h, b->s, &a, &bb, &c, 1.f, beta, NULL, 0, &e);
  }
  if (!ok)
    die ("gemm", e);
}

static int
cmp_double (const void *x, const void *y)
{
  const double a = *(const double *)x, c = *(const double *)y;
  return (a > c) - (a < c);
}

/* Median us of one repetition of the case. */
static double
time_case (Bench *b, char mode, int k, int sms, int reps, int samples)
{
  cudaGraph_t g = NULL;
  cudaGraphExec_t x = NULL;
  cudaEvent_t e0, e1;
  cudaEventCreate (&e0);
  cudaEventCreate (&e1);
  if (cudaStreamBeginCapture (b->s, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
    die ("capture", NULL);
  for (int r = 0; r < reps; r++)
    issue (b, mode, k, sms);
  if (cudaStreamEndCapture (b->s, &g) != cudaSuccess ||
      cudaGraphInstantiate (&x, g, 0) != cudaSuccess)
    die ("graph", NULL);
  double *t = g_new (double, (size_t)samples);
  cudaGraphLaunch (x, b->s); /* warm-up */
  for (int i = 0; i < samples; i++) {
    cudaEventRecord (e0, b->s);
    cudaGraphLaunch (x, b->s);
    cudaEventRecord (e1, b->s);
    cudaEventSynchronize (e1);
    float ms = 0;
    cudaEventElapsedTime (&ms, e0, e1);
    t[i] = ms * 1000.0 / reps;
  }
  if (cudaGetLastError () != cudaSuccess)
    die ("run", NULL);
  qsort (t, (size_t)samples, sizeof *t, cmp_double);
  const double med = t[samples / 2];
  g_free (t);
  cudaGraphExecDestroy (x);
  cudaGraphDestroy (g);
  cudaEventDestroy (e0);
  cudaEventDestroy (e1);
  return med;
}

static int
parse_list (const char *s, int *out, int max)
{
  int n = 0;
  g_auto (GStrv) parts = g_strsplit (s, ",", -1);
  for (int i = 0; parts[i] && n < max; i++)
    out[n++] = atoi (parts[i]);
  return n;
}

int
main (int argc, char **argv)
{
  if (argc == 2 && !strcmp (argv[1], "--sm-count")) { /* the device's SMs, for the script */
    int n = 0;
    if (cudaDeviceGetAttribute (&n, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess)
      die ("no device", NULL);
    printf ("%d\n", n);
    return 0;
  }
  if (argc < 4) {
    fprintf (stderr, "usage: bench_gemm M K N [--chunks 1,2,4,8] [--sms 132,120] [--reps R] "
                     "[--samples S] [--dtype bfloat16]\n");
    return 2;
  }
  Bench b = { .M = atoll (argv[1]), .K = atoll (argv[2]), .N = atoll (argv[3]),
              .dt = SG_DTYPE_BF16 };
  int chunks[8] = { 1, 2, 4, 8 }, n_chunks = 4, sms[16], n_sms = 0, reps = 10, samples = 15;
  for (int i = 4; i + 1 < argc; i += 2) {
    if (!strcmp (argv[i], "--chunks"))
      n_chunks = parse_list (argv[i + 1], chunks, 8);
    else if (!strcmp (argv[i], "--sms"))
      n_sms = parse_list (argv[i + 1], sms, 16);
    else if (!strcmp (argv[i], "--reps"))
      reps = atoi (argv[i + 1]);
    else if (!strcmp (argv[i], "--samples"))
      samples = atoi (argv[i + 1]);
    else if (!strcmp (argv[i], "--dtype"))
      b.dt = sg_dtype_from_name (argv[i + 1]);
  }
  if (b.dt == SG_DTYPE_INVALID || reps < 1 || samples < 1)
    die ("bad --dtype, --reps or --samples", NULL);
  const size_t es = sg_dtype_size (b.dt);
  void *pa, *pb, *pc;
  if (cudaMalloc (&pa, (size_t)(b.M * b.K) * es) || cudaMalloc (&pb, (size_t)(b.K * b.N) * es) ||
      cudaMalloc (&pc, (size_t)(b.M * b.N) * es) ||
      cudaMalloc ((void **)&b.ws, SG_CU_BLAS_WORKSPACE) ||
      cudaStreamCreateWithFlags (&b.s, cudaStreamNonBlocking))
    die ("allocation", NULL);
  sg_cu_fill_random (pa, b.dt, b.M * b.K, 1, b.s);
  sg_cu_fill_random (pb, b.dt, b.K * b.N, 2, b.s);
  b.a = mat (pa, b.dt, b.M, b.K, b.K);
  b.b = mat (pb, b.dt, b.K, b.N, b.N);
  b.c = mat (pc, b.dt, b.M, b.N, b.N);
  if (cublasCreate (&b.h) || cublasLtCreate (&b.lt) || cublasSetStream (b.h, b.s) ||
      cublasSetWorkspace (b.h, b.ws, SG_CU_BLAS_WORKSPACE))
    die ("cuBLAS", NULL);
  char shape[64];
  g_snprintf (shape, sizeof shape, "%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT,
              b.M, b.K, b.N);
  const double one = time_case (&b, 'm', 1, 0, reps, samples);
  printf ("%s\tm\t1\t0\t%.2f\t1.000\n", shape, one);
  static const char modes[] = { 'm', 'n', 'k' };
  for (size_t md = 0; md < sizeof modes; md++)
    for (int c = 0; c < n_chunks; c++) {
      const int64_t dim = modes[md] == 'm' ? b.M : modes[md] == 'n' ? b.N : b.K;
      if ((chunks[c] == 1 && modes[md] == 'm') || chunks[c] < 1 || dim % chunks[c])
        continue;
      const double us = time_case (&b, modes[md], chunks[c], 0, reps, samples);
      printf ("%s\t%c\t%d\t0\t%.2f\t%.3f\n", shape, modes[md], chunks[c], us, one / us);
    }
  for (int i = 0; i < n_sms; i++) {
    const double us = time_case (&b, 's', 1, sms[i], reps, samples);
    printf ("%s\tsms\t1\t%d\t%.2f\t%.3f\n", shape, sms[i], us, one / us);
  }
  fflush (stdout);
  return 0;
}

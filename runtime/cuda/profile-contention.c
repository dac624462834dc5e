/* profile-contention.c: `schedrun --profile --contention`: each collective
 * of the graph measured in place beside one kernel of each class the graph
 * runs (docs/gpu.md "Contention", docs/profile-format.md `contention`).
 *
 * Kernels: the graph's GEMMs in size bins (factor 4 in flops; per bin the
 * shape with the most time in the step; the GEMM_BINS bins with the most
 * time), the attention forward and backward and the GEMM on fewer SMs
 * (sm_count) with the most time, the largest map and reduction; each runs through the backend's own dispatch
 * (a one-instruction plan, profile.c), whatever kernel that is. Per pair
 * (collective key x kernel) a chain of reps (each one or more runs of the
 * kernel, an event after each) runs on the compute stream, alone, with the
 * collective issued right before it (comm_first: startable when the chain
 * starts, as a plan issues a collective before the next kernel) and while
 * its first kernel runs (kernel_first: the host issues it half a kernel
 * after the chain started); the collective alone too. Every sample starts
 * from the end of a tiny all_reduce (the ranks leave it together) and a
 * spin that covers the host's queueing. Medians over samples, then over
 * ranks: every rank writes the same entries. Pairs run largest collective
 * first until the time budget (rank 0's clock, broadcast) is spent; the
 * cost model falls back where pairs are missing.
 * Mirrors: the interference runs of tests/estimate/measure/measure_h200.py
 * (paired solo and overlapped runs), nvbench's blocking kernel.
 * Requires: the profile's keys measured and agreed. Invalidates: nothing.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "estimate.h"
#include "profile-private.h"

#define GEMM_BINS 3
#define MAX_KERNELS (GEMM_BINS + 5)
#define MAX_REPS SG_CU_CONTENTION_MAX_REPS
#define MAX_RUNS 768 /* kernel runs per chain: the launch queue must hold them */
#define ORDER_TARGET_US 2.5e5 /* samples of one order take about this long */
#define VEC_LEN SG_CU_CONTENTION_VEC

typedef struct {
  const Key *k;
  SgKernelClass klass;
  SgCuOneKernel *run;
} Kern;

typedef struct {
  cudaStream_t s0, s1; /* compute (the profiler's), comm (the rig's) */
  cudaEvent_t a, e, c0, c1, r[MAX_REPS];
  float *align; /* one float on the device: the aligning all_reduce */
} Rig;

typedef enum { SOLO_CHAIN, SOLO_COMM, COMM_FIRST, KERNEL_FIRST } Mode;

typedef struct {
  double lag, comm, reps[MAX_REPS], host_us;
} Sample;

/* One pair's shape: reps of @runs kernel runs. */
typedef struct {
  int32_t n_reps, runs, samples;
  double gate_us, lag_target_us;
} Shape;

static double
gemm_bin (const Key *k)
{
  return floor (log (MAX (k->flops, 1.0)) / log (4.0));
}

/* The kernels to measure beside, in measuring order (GEMMs largest first,
 * attention backward and forward, map, reduction). */
static int32_t
pick_kernels (const SgGraph *g, GPtrArray *keys, Kern *out)
{
  const Key *best[SG_KERNEL_N_CLASSES] = { NULL };
  double score[SG_KERNEL_N_CLASSES] = { 0 };
  const Key *bin_key[64] = { NULL };
  double bin[64], bin_total[64] = { 0 }, bin_best[64] = { 0 };
  int32_t nb = 0;
  for (guint i = 0; i < keys->len; i++) {
    const Key *k = keys->pdata[i];
    if (k->node < 0 || k->count <= 0 || !(k->us > 0) || k->fam == FAM_COLL)
      continue;
    const double total = k->us * k->count;
    const SgKernelClass c = sg_node_kernel_class (&g->nodes[k->node]);
    if (c == SG_KERNEL_GEMM) {
      int32_t b = 0;
      while (b < nb && bin[b] != gemm_bin (k))
        b++;
      if (b == nb) {
        if (nb == 64)
          continue;
        bin[nb++] = gemm_bin (k);
      }
      bin_total[b] += total;
      if (total > bin_best[b]) {
        bin_best[b] = total;
        bin_key[b] = k;
      }
      continue;
    }
    /* attention and GEMMs on fewer SMs by their time in the step, maps and
     * reductions by the largest */
    const double s = c == SG_KERNEL_MAP || c == SG_KERNEL_REDUCTION ? k->us : total;
    if (s > score[c]) {
      score[c] = s;
      best[c] = k;
    }
  }
  int32_t n = 0;
  for (int32_t taken = 0; taken < GEMM_BINS; taken++) { /* most time first */
    int32_t b = -1;
    for (int32_t i = 0; i < nb; i++)
      if (bin_key[i] && (b < 0 || bin_total[i] > bin_total[b]))
        b = i;
    if (b < 0)
      break;
    out[n++] = (Kern){ bin_key[b], SG_KERNEL_GEMM, NULL };
    bin_key[b] = NULL;
  }
  static const SgKernelClass rest[] = { SG_KERNEL_ATTENTION_BACKWARD, SG_KERNEL_ATTENTION,
                                        SG_KERNEL_GEMM_SM, SG_KERNEL_MAP, SG_KERNEL_REDUCTION };
  for (size_t i = 0; i < G_N_ELEMENTS (rest); i++)
    if (best[rest[i]])
      out[n++] = (Kern){ best[rest[i]], rest[i], NULL };
  return n;
}

/* Collective keys, largest first (the key text ends with the bytes,
 * zero-padded), then by key. */
static gint
coll_cmp (gconstpointer a, gconstpointer b)
{
  const Key *x = *(Key *const *)a, *y = *(Key *const *)b;
  const int c = strcmp (strrchr (y->key, '|'), strrchr (x->key, '|'));
  return c ? c : strcmp (x->key, y->key);
}

/* The verdict of every rank on @ok; sets @error when another rank failed. */
static bool
agreed (bool ok, const char *what, GError **error)
{
  int v = ok, every = 0;
  MPI_Allreduce (&v, &every, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!every && ok)
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_BACKEND, "%s failed on another rank", what);
  return every != 0;
}

/* One sample of @mode (docs/gpu.md "Contention"). */
static bool
sample (Rig *rig, Kern *kn, const SgCuCollBuf *cb, ncclComm_t comm, MPI_Comm mpi, Mode mode,
        const Shape *sh, Sample *out, GError **error)
{
  SG_CU_CHECK (cudaStreamSynchronize (rig->s0), error, fail);
  SG_CU_CHECK (cudaStreamSynchronize (rig->s1), error, fail);
  MPI_Barrier (mpi);
  /* the ranks leave a collective together: align both on its end */
  SG_NCCL_CHECK (ncclAllReduce (rig->align, rig->align, 1, ncclFloat, ncclSum, comm, rig->s1),
                 error, fail);
  SG_CU_CHECK (cudaEventRecord (rig->a, rig->s1), error, fail);
  SG_CU_CHECK (cudaStreamWaitEvent (rig->s0, rig->a, 0), error, fail);
  SG_CU_CHECK (sg_cu_spin (sh->gate_us, rig->s0), error, fail);
  SG_CU_CHECK (cudaEventRecord (rig->e, rig->s0), error, fail);
  if (mode == SOLO_COMM || mode == COMM_FIRST) { /* queued before the chain, as in a plan */
    SG_CU_CHECK (cudaStreamWaitEvent (rig->s1, rig->e, 0), error, fail);
    SG_CU_CHECK (cudaEventRecord (rig->c0, rig->s1), error, fail);
    if (!sg_cu_coll_buf_issue (cb, comm, rig->s1, error))
      goto fail;
    SG_CU_CHECK (cudaEventRecord (rig->c1, rig->s1), error, fail);
  }
  const int64_t h0 = g_get_monotonic_time ();
  for (int32_t i = 0; mode != SOLO_COMM && i < sh->n_reps; i++) {
    for (int32_t r = 0; r < sh->runs; r++)
      if (!sg_cu_one_kernel_run (kn->run, error))
        goto fail;
    SG_CU_CHECK (cudaEventRecord (rig->r[i], rig->s0), error, fail);
  }
  out->host_us = (double)(g_get_monotonic_time () - h0);
  if (mode == KERNEL_FIRST) { /* issued by the host while the first kernel runs */
    cudaError_t q;
    while ((q = cudaEventQuery (rig->e)) == cudaErrorNotReady)
      ;
    SG_CU_CHECK (q, error, fail);
    const int64_t t0 = g_get_monotonic_time ();
    while ((double)(g_get_monotonic_time () - t0) < sh->lag_target_us)
      ;
    SG_CU_CHECK (cudaEventRecord (rig->c0, rig->s1), error, fail);
    if (!sg_cu_coll_buf_issue (cb, comm, rig->s1, error))
      goto fail;
    SG_CU_CHECK (cudaEventRecord (rig->c1, rig->s1), error, fail);
  }
  SG_CU_CHECK (cudaStreamSynchronize (rig->s0), error, fail);
  SG_CU_CHECK (cudaStreamSynchronize (rig->s1), error, fail);
  float ms = 0;
  if (mode != SOLO_CHAIN) {
    SG_CU_CHECK (cudaEventElapsedTime (&ms, rig->e, rig->c0), error, fail);
    out->lag = MAX (ms * 1000.0, 0.0);
    SG_CU_CHECK (cudaEventElapsedTime (&ms, rig->c0, rig->c1), error, fail);
    out->comm = ms * 1000.0;
  }
  for (int32_t i = 0; mode != SOLO_COMM && i < sh->n_reps; i++) {
    SG_CU_CHECK (cudaEventElapsedTime (&ms, i ? rig->r[i - 1] : rig->e, rig->r[i]), error, fail);
    out->reps[i] = ms * 1000.0;
  }
  return true;
fail:
  return false;
}

/* @n samples of @mode; medians of lag, comm and each rep into @m. */
static bool
samples (Rig *rig, Kern *kn, const SgCuCollBuf *cb, ncclComm_t comm, MPI_Comm mpi, Mode mode,
         const Shape *sh, Sample *m, GError **error)
{
  const int32_t n = sh->samples;
  Sample *s = g_new0 (Sample, (size_t)n);
  double *col = g_new (double, (size_t)n);
  bool ok = true;
  for (int32_t i = 0; i < n && ok; i++)
    ok = sample (rig, kn, cb, comm, mpi, mode, sh, &s[i], error);
  if (ok) {
    for (int32_t i = 0; i < n; i++)
      col[i] = s[i].lag;
    m->lag = sg_cu_prof_median (col, n);
    for (int32_t i = 0; i < n; i++)
      col[i] = s[i].comm;
    m->comm = sg_cu_prof_median (col, n);
    for (int32_t r = 0; r < sh->n_reps; r++) {
      for (int32_t i = 0; i < n; i++)
        col[i] = s[i].reps[r];
      m->reps[r] = sg_cu_prof_median (col, n);
    }
  }
  g_free (s);
  g_free (col);
  return ok;
}

/* The pair's shape from the agreed solo times (identical on every rank):
 * reps of about a third of the collective or one kernel, enough of them to
 * cover three times the collective and a rep. */
static Shape
shape_of (double tc, double tk, int32_t iters)
{
  Shape sh;
  sh.runs = (int32_t)MAX (1.0, floor (tc / 3.0 / tk));
  const double rep = sh.runs * tk;
  sh.n_reps = (int32_t)CLAMP (ceil ((3.0 * tc + rep) / rep) + 1.0, 3.0, (double)MAX_REPS);
  sh.runs = MIN (sh.runs, MAX_RUNS / sh.n_reps);
  const double chain = sh.n_reps * sh.runs * tk;
  sh.samples = (int32_t)CLAMP (floor (ORDER_TARGET_US / (chain + tc)), 1.0, (double)iters);
  sh.lag_target_us = 0.5 * tk;
  sh.gate_us = 2000.0;
  return sh;
}

/* Measures one pair on this rank into @vec (VEC_LEN, see above). */
static bool
measure_pair (Rig *rig, Kern *kn, const SgCuCollBuf *cb, ncclComm_t comm, MPI_Comm mpi,
              Shape *sh, double *vec, GError **error)
{
  Sample s, cf, kf, solo_comm;
  /* two warm-ups (the first may load modules), the second timing the host's
   * queueing of the chain: the gate spin must outlast it on every rank */
  const bool warm = sample (rig, kn, cb, comm, mpi, SOLO_CHAIN, sh, &s, error)
                    && sample (rig, kn, cb, comm, mpi, SOLO_CHAIN, sh, &s, error);
  double host = warm ? s.host_us : 0.0;
  MPI_Allreduce (MPI_IN_PLACE, &host, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (!warm)
    return false;
  sh->gate_us = 1.5 * host + 50.0;
  if (!samples (rig, kn, cb, comm, mpi, SOLO_CHAIN, sh, &s, error)
      || !samples (rig, kn, cb, comm, mpi, SOLO_COMM, sh, &solo_comm, error)
      || !samples (rig, kn, cb, comm, mpi, COMM_FIRST, sh, &cf, error)
      || !samples (rig, kn, cb, comm, mpi, KERNEL_FIRST, sh, &kf, error))
    return false;
  vec[0] = sg_cu_prof_median (s.reps, sh->n_reps);
  vec[1] = solo_comm.comm;
  double *o = vec + 2;
  const Sample *by[2] = { &cf, &kf };
  for (int i = 0; i < 2; i++, o += 2 + MAX_REPS) {
    o[0] = by[i]->lag;
    o[1] = by[i]->comm;
    memcpy (o + 2, by[i]->reps, sizeof (double) * (size_t)sh->n_reps);
  }
  return true;
}

static double
r3 (double us)
{
  return round (us * 1000.0) / 1000.0;
}

void
sg_cu_prof_contention_entries (GString *out, const Key *ck, SgKernelClass klass,
                               const char *kernel_key, int32_t runs, int32_t n_reps,
                               const double *vec)
{
  static const char *const orders[2] = { "comm_first", "kernel_first" };
  g_autofree char *head = g_strdup_printf ("{%s}", ck->json);
  for (int i = 0; i < 2; i++) {
    const double *o = vec + 2 + i * (2 + SG_CU_CONTENTION_MAX_REPS);
    cJSON *e = cJSON_Parse (head);
    cJSON_AddStringToObject (e, "transport", sg_transport_name (SG_TRANSPORT_NCCL));
    cJSON_AddStringToObject (e, "kernel", sg_kernel_class_name (klass));
    cJSON_AddStringToObject (e, "kernel_key", kernel_key);
    cJSON_AddStringToObject (e, "order", orders[i]);
    cJSON_AddNumberToObject (e, "runs_per_rep", runs);
    cJSON_AddNumberToObject (e, "comm_solo_us", r3 (vec[1]));
    cJSON_AddNumberToObject (e, "rep_solo_us", r3 (vec[0]));
    cJSON_AddNumberToObject (e, "lag_us", r3 (o[0]));
    cJSON_AddNumberToObject (e, "comm_us", r3 (o[1]));
    cJSON *reps = cJSON_AddArrayToObject (e, "reps_us");
    for (int32_t r = 0; r < n_reps; r++)
      cJSON_AddItemToArray (reps, cJSON_CreateNumber (r3 (o[2 + r])));
    char *t = cJSON_PrintUnformatted (e);
    g_string_append_printf (out, "%s    %s", out->len ? ",\n" : "", t);
    cJSON_free (t);
    cJSON_Delete (e);
  }
}

/* @s0: the compute stream (the profiler's, which cuBLAS and cuDNN are
 * bound to); the comm stream is the rig's own. */
static bool
rig_init (Rig *rig, cudaStream_t s0, GError **error)
{
  memset (rig, 0, sizeof *rig);
  rig->s0 = s0;
  SG_CU_CHECK (cudaStreamCreateWithFlags (&rig->s1, cudaStreamNonBlocking), error, fail);
  cudaEvent_t *ev[] = { &rig->a, &rig->e, &rig->c0, &rig->c1 };
  for (size_t i = 0; i < G_N_ELEMENTS (ev); i++)
    SG_CU_CHECK (cudaEventCreate (ev[i]), error, fail);
  for (int i = 0; i < MAX_REPS; i++)
    SG_CU_CHECK (cudaEventCreate (&rig->r[i]), error, fail);
  SG_CU_CHECK (cudaMalloc ((void **)&rig->align, sizeof (float)), error, fail);
  SG_CU_CHECK (cudaMemset (rig->align, 0, sizeof (float)), error, fail);
  return true;
fail:
  return false;
}

static void
rig_clear (Rig *rig)
{
  if (rig->s0)
    cudaStreamSynchronize (rig->s0);
  if (rig->s1)
    cudaStreamSynchronize (rig->s1);
  cudaEvent_t ev[] = { rig->a, rig->e, rig->c0, rig->c1 };
  for (size_t i = 0; i < G_N_ELEMENTS (ev); i++)
    if (ev[i])
      cudaEventDestroy (ev[i]);
  for (int i = 0; i < MAX_REPS; i++)
    if (rig->r[i])
      cudaEventDestroy (rig->r[i]);
  if (rig->align)
    cudaFree (rig->align);
  if (rig->s1)
    cudaStreamDestroy (rig->s1);
}

/* Rank 0 decides whether the next pair fits the budget; every rank follows. */
static bool
budget_allows (int64_t t0, double budget_s, double pair_us)
{
  int go = (double)(g_get_monotonic_time () - t0) + pair_us <= budget_s * 1e6;
  MPI_Bcast (&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return go != 0;
}

bool
sg_cu_prof_contention (const SgCuContentionJob *job, char **entries, GError **error)
{
  const SgGraph *g = job->g;
  int rank = 0, world = 1;
  MPI_Comm_rank (MPI_COMM_WORLD, &rank);
  MPI_Comm_size (MPI_COMM_WORLD, &world);
  *entries = NULL;
  Kern kern[MAX_KERNELS];
  const int32_t nk = pick_kernels (g, job->keys, kern);
  GPtrArray *colls = g_ptr_array_new ();
  for (guint i = 0; i < job->keys->len; i++) {
    Key *k = job->keys->pdata[i];
    if (k->fam == FAM_COLL && k->node >= 0 && k->us > 0)
      g_ptr_array_add (colls, k);
  }
  g_ptr_array_sort (colls, coll_cmp);
  Rig rig;
  GString *out = g_string_new (NULL);
  double *vec = g_new0 (double, VEC_LEN), *all = g_new0 (double, (size_t)VEC_LEN * world);
  double *col = g_new (double, (size_t)world);
  bool ok = rig_init (&rig, job->stream, error);
  for (int32_t i = 0; ok && i < nk; i++) {
    kern[i].run = g_new0 (SgCuOneKernel, 1);
    ok = sg_cu_one_kernel_init (kern[i].run, g, kern[i].k->node, rig.s0, job->cublas, job->dnn,
                                error);
  }
  ok = agreed (ok, "setting up the contention kernels", error);
  const int64_t t0 = g_get_monotonic_time ();
  int32_t n_pairs = 0, n_left = 0;
  for (guint c = 0; ok && c < colls->len; c++) {
    const Key *ck = colls->pdata[c];
    const SgNode *cn = &g->nodes[ck->node];
    SgCuCollBuf cb;
    ok = agreed (sg_cu_coll_buf_init (&cb, g, ck->node, error), "allocating a collective", error);
    if (!ok) {
      sg_cu_coll_buf_clear (&cb);
      break;
    }
    for (int32_t i = 0; ok && i < nk; i++) {
      Shape sh = shape_of (ck->us, kern[i].k->us, job->iters);
      const double pair_us = (2 + 4 * sh.samples) * (sh.n_reps * sh.runs * kern[i].k->us
                                                      + 2 * ck->us + sh.gate_us);
      if (!budget_allows (t0, job->budget_s, pair_us)) {
        n_left++;
        continue;
      }
      if (rank == 0) {
        fprintf (stderr, "\rschedrun --profile: contention [%u/%u] %-14s beside %-18s %.40s",
                 c + 1, colls->len, sg_op_name (cn->kind), sg_kernel_class_name (kern[i].klass),
                 kern[i].k->key);
        fflush (stderr);
      }
      sg_cu_watchdog_arm (job->watchdog, job->timeout_s, ck->key);
      memset (vec, 0, sizeof (double) * VEC_LEN);
      ok = measure_pair (&rig, &kern[i], &cb, job->comms[cn->group], job->mpi[cn->group], &sh,
                         vec, error);
      sg_cu_watchdog_disarm (job->watchdog);
      if (!(ok = agreed (ok, "measuring a collective beside a kernel", error)))
        break;
      /* the median over ranks of every number: the same entries everywhere */
      MPI_Allgather (vec, VEC_LEN, MPI_DOUBLE, all, VEC_LEN, MPI_DOUBLE, MPI_COMM_WORLD);
      for (int32_t j = 0; j < VEC_LEN; j++) {
        for (int r = 0; r < world; r++)
          col[r] = all[(size_t)r * VEC_LEN + j];
        vec[j] = sg_cu_prof_median (col, world);
      }
      sg_cu_prof_contention_entries (out, ck, kern[i].klass, kern[i].k->key, sh.runs, sh.n_reps,
                                     vec);
      n_pairs++;
    }
    cudaDeviceSynchronize ();
    sg_cu_coll_buf_clear (&cb);
  }
  if (rank == 0)
    fprintf (stderr, "\nschedrun --profile: contention: %d pairs measured (%d collectives x %d "
                     "kernels), %d left out by the %.0f s budget, in %.1f s\n",
             n_pairs, colls->len, nk, n_left, job->budget_s,
             (double)(g_get_monotonic_time () - t0) / 1e6);
  rig_clear (&rig);
  for (int32_t i = 0; i < nk; i++)
    if (kern[i].run) {
      sg_cu_one_kernel_clear (kern[i].run);
      g_free (kern[i].run);
    }
  g_ptr_array_unref (colls);
  g_free (vec);
  g_free (all);
  g_free (col);
  if (ok && out->len > 0)
    *entries = g_string_free (out, FALSE);
  else
    g_string_free (out, TRUE);
  return ok;
}

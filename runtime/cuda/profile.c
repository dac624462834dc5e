/* profile.c: `schedrun --profile GRAPH -o PROFILE`: measures the graph's
 * GEMM / attention shapes, other op sizes and collective sizes on the GPUs
 * and writes docs/profile-format.md, byte-identical on every rank.
 *
 * Keys (profile-keys.c) are taken from the graph as the cost model looks
 * them up. A compute key is timed by running the first node that
 * has it as a one-instruction plan through the backend's own dispatch
 * (profile-run.c), with that node's operand layouts: the profile measures
 * the kernels schedrun runs. Collectives run on one NCCL communicator per
 * group instance. Each key: warm-up, then the median of K CUDA-event timings
 * on each rank, then the median over ranks (Allgather): every rank holds the
 * same numbers, and a kernel's entry keeps each rank's (us_by_rank). --contention then measures collectives beside kernels
 * (profile-contention.c). Cache: an existing -o file for the same device and
 * world size is read on rank 0 and broadcast, and only keys it lacks are
 * measured (its contention section, if any, is kept whole).
 * Mirrors: nccl-tests (timing loop), Inductor's benchmark cache.
 * Requires: one GPU per rank (local rank). Invalidates: nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda-private.h"
#include "graph.h"
#include "profile-private.h"
#include "textio.h"

/* ---- timing ---- */

static int
cmp_double (const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double
sg_cu_prof_median (double *v, int n)
{
  qsort (v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
  int32_t iters, warmup;
  cudaStream_t stream;
  cudaEvent_t *ev; /* 2 * iters */
  cublasHandle_t cublas;
  SgCuDnn *dnn; /* cuDNN attention as schedrun runs it; NULL: the math path */
} Timer;

/* Times node @id's kernel as a one-instruction plan; median over iters. */
static bool
time_compute (const SgGraph *g, SgNodeId id, Timer *t, double *us, GError **error)
{
  SgCuOneKernel *k = g_new0 (SgCuOneKernel, 1);
  double *samples = g_new (double, t->iters);
  bool ok = false;
  if (!sg_cu_one_kernel_init (k, g, id, t->stream, t->cublas, t->dnn, error))
    goto done;
  /* Warm-up, then one run alone to size the batches. */
  for (int32_t i = 0; i < MAX (1, t->warmup); i++)
    if (!sg_cu_one_kernel_run (k, error))
      goto done;
  float ms1 = 0;
  SG_CU_CHECK (cudaEventRecord (t->ev[0], t->stream), error, done);
  if (!sg_cu_one_kernel_run (k, error))
    goto done;
  SG_CU_CHECK (cudaEventRecord (t->ev[1], t->stream), error, done);
  SG_CU_CHECK (cudaEventSynchronize (t->ev[1]), error, done);
  SG_CU_CHECK (cudaEventElapsedTime (&ms1, t->ev[0], t->ev[1]), error, done);
  /* GPU time, as in a step where the host runs ahead: each sample is a batch
   * of back-to-back runs queued behind a spin kernel, divided by its size. */
  const int32_t batch = ms1 < 0.05f ? 16 : ms1 < 0.5f ? 4 : 1;
  for (int32_t j = 0; j < t->iters; j++) {
    SG_CU_CHECK (sg_cu_spin (30.0 + 15.0 * batch, t->stream), error, done);
    SG_CU_CHECK (cudaEventRecord (t->ev[2 * j], t->stream), error, done);
    for (int32_t r = 0; r < batch; r++)
      if (!sg_cu_one_kernel_run (k, error))
        goto done;
    SG_CU_CHECK (cudaEventRecord (t->ev[2 * j + 1], t->stream), error, done);
  }
  SG_CU_CHECK (cudaStreamSynchronize (t->stream), error, done);
  for (int32_t j = 0; j < t->iters; j++) {
    float ms = 0;
    SG_CU_CHECK (cudaEventElapsedTime (&ms, t->ev[2 * j], t->ev[2 * j + 1]), error, done);
    samples[j] = ms * 1000.0 / batch;
  }
  *us = sg_cu_prof_median (samples, t->iters);
  ok = true;
done:
  /* the kernels may still run on error: the buffers go after them */
  cudaStreamSynchronize (t->stream);
  sg_cu_one_kernel_clear (k);
  g_free (k);
  g_free (samples);
  return ok;
}

/* Back-to-back runs per sample, after an untimed one. */
#define COLL_RUNS 4

/* Times collective node @id on @comm (this rank's instance of its group).
 * The ranks leave the barrier and issue at different moments, and a
 * collective started first waits for its peers inside the kernel: timed
 * from the barrier, that skew counts as collective time (two runs on 2x H200
 * differed by 6-12 us on every size, up to +50% on 2 MiB shards). So each sample first runs the
 * collective once untimed (the ranks finish it together), then times
 * COLL_RUNS back-to-back runs and divides. Back to back they overlap their
 * fixed costs: measured ~30% below the same collectives alone inside a
 * step (bench/RESULTS.md). */
static bool
time_collective (const SgGraph *g, SgNodeId id, ncclComm_t comm, MPI_Comm mpi, Timer *t,
                 double *us, GError **error)
{
  const SgNode *n = &g->nodes[id];
  SgCuCollBuf c;
  double *samples = g_new (double, t->iters);
  bool ok = false;
  if (!sg_cu_coll_buf_init (&c, g, id, error))
    goto out;
  for (int32_t i = 0; i < t->warmup + t->iters; i++) {
    const int32_t k = i - t->warmup;
    SG_CU_CHECK (cudaStreamSynchronize (t->stream), error, out);
    MPI_Barrier (mpi);
    if (!sg_cu_coll_buf_issue (&c, comm, t->stream, error))
      goto out;
    if (k >= 0)
      SG_CU_CHECK (cudaEventRecord (t->ev[2 * k], t->stream), error, out);
    for (int r = 0; r < COLL_RUNS; r++)
      if (!sg_cu_coll_buf_issue (&c, comm, t->stream, error))
        goto out;
    if (k >= 0)
      SG_CU_CHECK (cudaEventRecord (t->ev[2 * k + 1], t->stream), error, out);
  }
  SG_CU_CHECK (cudaStreamSynchronize (t->stream), error, out);
  for (int32_t k = 0; k < t->iters; k++) {
    float ms = 0;
    SG_CU_CHECK (cudaEventElapsedTime (&ms, t->ev[2 * k], t->ev[2 * k + 1]), error, out);
    samples[k] = ms * 1000.0 / COLL_RUNS;
  }
  *us = sg_cu_prof_median (samples, t->iters);
  ok = true;
out:
  if (!ok)
    g_prefix_error (error, "profiling %s (%s, %" G_GUINT64_FORMAT " bytes): ", n->name,
                    sg_op_name (n->kind), sg_node_comm_bytes (g, id));
  cudaStreamSynchronize (t->stream);
  sg_cu_coll_buf_clear (&c);
  g_free (samples);
  return ok;
}

/* ---- the driver ---- */

typedef struct {
  ncclComm_t *comms;  /* per graph group */
  MPI_Comm *mpi;      /* per graph group: this rank's instance */
  int32_t n;
} Comms;

static bool
comms_init (const SgGraph *g, int32_t rank, Comms *c, GError **error)
{
  c->n = g->n_groups;
  c->comms = g_new0 (ncclComm_t, MAX (1, g->n_groups));
  c->mpi = g_new0 (MPI_Comm, MAX (1, g->n_groups));
  for (int32_t gi = 0; gi < g->n_groups; gi++) {
    const SgGroup *gr = &g->groups[gi];
    int color = 0, pos = 0;
    for (int32_t i = 0; i < gr->n_instances; i++)
      for (int32_t j = 0; j < gr->n_ranks; j++)
        if (gr->partition[i * gr->n_ranks + j] == rank) {
          color = i;
          pos = j;
        }
    MPI_Comm_split (MPI_COMM_WORLD, color, pos, &c->mpi[gi]);
    if (gr->n_ranks < 2)
      continue;
    ncclUniqueId id;
    memset (&id, 0, sizeof id);
    if (pos == 0)
      SG_NCCL_CHECK (ncclGetUniqueId (&id), error, fail);
    MPI_Bcast (&id, sizeof id, MPI_BYTE, 0, c->mpi[gi]);
    SG_NCCL_CHECK (ncclCommInitRank (&c->comms[gi], gr->n_ranks, id, pos), error, fail);
  }
  return true;
fail:
  return false;
}

static void
comms_clear (Comms *c, bool abort)
{
  for (int32_t i = 0; i < c->n; i++) {
    if (c->comms[i])
      abort ? ncclCommAbort (c->comms[i]) : ncclCommDestroy (c->comms[i]);
    if (c->mpi[i])
      MPI_Comm_free (&c->mpi[i]);
  }
  g_free (c->comms);
  g_free (c->mpi);
}

/* Machines a group instance spans: distinct host names among its ranks. */
static int32_t
group_nodes (const SgGroup *gr, const char *hosts, int len)
{
  int32_t n = 0;
  for (int32_t j = 0; j < gr->n_ranks; j++) {
    const char *h = hosts + (size_t)gr->partition[j] * len;
    bool seen = false;
    for (int32_t i = 0; i < j && !seen; i++)
      seen = strcmp (h, hosts + (size_t)gr->partition[i] * len) == 0;
    n += !seen;
  }
  return MAX (n, 1);
}

static bool
all_ok (bool ok)
{
  int v = ok ? 1 : 0, all = 0;
  MPI_Allreduce (&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

bool
sg_rt_cuda_profile (const char *graph_path, const char *out_path, const SgRtProfileOptions *o,
                    GError **error)
{
  int rank = 0, world = 1;
  MPI_Comm_rank (MPI_COMM_WORLD, &rank);
  MPI_Comm_size (MPI_COMM_WORLD, &world);
  const int32_t iters = MAX (o->iters, 1), warmup = MAX (o->warmup, 0);
  const double timeout_s = o->timeout_s;
  g_autoptr (SgGraph) g = NULL;
  const int ndev = sg_cu_device_count ();
  if (!all_ok (ndev > 0)) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_BACKEND,
                 "--profile needs a CUDA device on every rank (rank %d sees %d)", rank, ndev);
    return false;
  }
  SG_CU_CHECK (cudaSetDevice (sg_cu_local_rank (MPI_COMM_WORLD) % ndev), error, early);

  GError *lerr = NULL;
  g = sg_graph_load (graph_path, &lerr);
  if (!all_ok (g != NULL)) {
    if (lerr)
      g_propagate_error (error, lerr);
    else
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_ARGS, "%s: failed to load on another rank",
                   graph_path);
    return false;
  }
  if (g->world_size != world) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MISMATCH,
                 "%s: world_size %d, but mpirun started %d ranks", graph_path, g->world_size,
                 world);
    return false;
  }
  /* device name and host names, agreed */
  char device[256] = { 0 };
  {
    struct cudaDeviceProp prop;
    int dev = 0;
    cudaGetDevice (&dev);
    SG_CU_CHECK (cudaGetDeviceProperties (&prop, dev), error, early);
    g_strlcpy (device, prop.name, sizeof device);
    MPI_Bcast (device, sizeof device, MPI_CHAR, 0, MPI_COMM_WORLD);
  }
  char host[MPI_MAX_PROCESSOR_NAME] = { 0 };
  int hl = 0;
  MPI_Get_processor_name (host, &hl);
  char *hosts = g_malloc0 ((size_t)world * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather (host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                 MPI_COMM_WORLD);

  /* keys of the graph, first node of each */
  GPtrArray *keys = g_ptr_array_new_with_free_func (sg_cu_prof_key_free);
  GHashTable *by_key = g_hash_table_new (g_str_hash, g_str_equal);
  for (SgNodeId id = 0; id < g->n_nodes; id++) {
    Key tmp = { 0 };
    const SgNode *n = &g->nodes[id];
    const int32_t nn = sg_op_is_collective (n->kind) && n->group >= 0
                         ? group_nodes (&g->groups[n->group], hosts, MPI_MAX_PROCESSOR_NAME)
                         : 1;
    if (!sg_cu_prof_node_key (g, id, nn, &tmp))
      continue;
    Key *seen = g_hash_table_lookup (by_key, tmp.key);
    if (seen) {
      seen->count++;
      g_free (tmp.key);
      g_free (tmp.json);
      continue;
    }
    Key *k = g_memdup2 (&tmp, sizeof tmp);
    k->node = id;
    k->us = -1;
    k->count = 1;
    g_ptr_array_add (keys, k);
    g_hash_table_insert (by_key, k->key, k);
  }
  g_free (hosts);

  /* the cache, as rank 0 reads it */
  int n_cached = 0;
  char *contention = NULL;
  {
    gchar *text = NULL;
    gsize len = 0;
    long long blen = -1;
    if (rank == 0 && g_file_get_contents (out_path, &text, &len, NULL))
      blen = (long long)len;
    MPI_Bcast (&blen, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    if (blen >= 0) {
      if (rank != 0)
        text = g_malloc ((size_t)blen + 1);
      MPI_Bcast (text, (int)blen, MPI_CHAR, 0, MPI_COMM_WORLD);
      sg_cu_prof_read_cache (text, (size_t)blen, device, world, keys, by_key, rank, &n_cached,
                             &contention);
    }
    g_free (text);
  }
  g_ptr_array_sort (keys, sg_cu_prof_key_cmp);

  int32_t n_todo = 0;
  for (guint i = 0; i < keys->len; i++)
    n_todo += ((Key *)keys->pdata[i])->us < 0;

  Timer t = { .iters = iters, .warmup = warmup };
  Comms comms = { 0 };
  double *local = g_new0 (double, MAX (1, n_todo));
  bool ok = false;
  SgCuState wd_state;
  memset (&wd_state, 0, sizeof wd_state);
  SgCuWatchdog *wd = NULL;
  t.ev = g_new0 (cudaEvent_t, 2 * iters);
  SG_CU_CHECK (cudaStreamCreateWithFlags (&t.stream, cudaStreamNonBlocking), error, out);
  for (int32_t i = 0; i < 2 * iters; i++)
    SG_CU_CHECK (cudaEventCreate (&t.ev[i]), error, out);
  SG_CUBLAS_CHECK (cublasCreate (&t.cublas), error, out);
  SG_CUBLAS_CHECK (cublasSetStream (t.cublas, t.stream), error, out);
  {
    char *why = NULL;
    t.dnn = sg_cu_dnn_new (&t.stream, 1, &why);
    if (rank == 0)
      fprintf (stderr, "schedrun --profile: attention on %s%s%s\n",
               t.dnn ? "cuDNN's fused SDPA where it runs" : "the math path (",
               t.dnn ? "" : why, t.dnn ? "" : ")");
    free (why);
  }
  if (!all_ok (comms_init (g, rank, &comms, error)))
    goto out;
  wd_state.comms = comms.comms;
  wd_state.n_comms = comms.n;
  wd = sg_cu_watchdog_start (&wd_state, rank);

  int32_t done = 0;
  for (guint i = 0; i < keys->len; i++) {
    Key *k = keys->pdata[i];
    if (k->us >= 0)
      continue;
    if (rank == 0) {
      fprintf (stderr, "\rschedrun --profile: [%d/%d] %-11s %.60s", done + 1, n_todo,
               sg_cu_prof_fam_key[k->fam], k->key);
      fprintf (stderr, "%*s", 8, "");
      fflush (stderr);
    }
    sg_cu_watchdog_arm (wd, timeout_s, k->key);
    double us = 0;
    bool kok;
    if (k->fam == FAM_COLL) {
      const SgNode *n = &g->nodes[k->node];
      kok = time_collective (g, k->node, comms.comms[n->group], comms.mpi[n->group], &t, &us,
                             error);
    } else {
      kok = time_compute (g, k->node, &t, &us, error);
    }
    sg_cu_watchdog_disarm (wd);
    if (!all_ok (kok)) {
      if (kok)
        g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_BACKEND,
                     "profiling %s failed on another rank", k->key);
      goto out;
    }
    local[done++] = us;
  }
  if (rank == 0 && n_todo > 0)
    fprintf (stderr, "\n");

  /* median over ranks: identical numbers everywhere */
  {
    double *all = g_new (double, (size_t)MAX (1, n_todo) * world);
    double *col = g_new (double, world);
    MPI_Allgather (local, MAX (1, n_todo), MPI_DOUBLE, all, MAX (1, n_todo), MPI_DOUBLE,
                   MPI_COMM_WORLD);
    int32_t j = 0;
    for (guint i = 0; i < keys->len; i++) {
      Key *k = keys->pdata[i];
      if (k->us >= 0)
        continue;
      for (int r = 0; r < world; r++)
        col[r] = MAX (all[(size_t)r * MAX (1, n_todo) + j], 1e-3);
      /* a kernel's time on each rank: the spread of compute rates between
       * the GPUs (docs/cost-model.md "Rank skew"); a collective's is one
       * time shared by its ranks */
      if (k->fam != FAM_COLL) {
        g_free (k->us_by_rank);
        k->us_by_rank = g_memdup2 (col, sizeof (double) * (size_t)world);
        k->n_by_rank = world;
      }
      k->us = sg_cu_prof_median (col, world);
      j++;
    }
    g_free (all);
    g_free (col);
  }

  /* collectives beside kernels, unless the cache has them */
  const bool measure_contention = o->contention && !contention;
  if (measure_contention) {
    SgCuContentionJob job = { .g = g, .keys = keys, .comms = comms.comms, .mpi = comms.mpi,
                              .stream = t.stream, .cublas = t.cublas, .dnn = t.dnn,
                              .watchdog = wd,
                              .iters = MAX (o->contention_iters, 1),
                              .budget_s = o->contention_budget_s, .timeout_s = timeout_s };
    const bool cok = sg_cu_prof_contention (&job, &contention, error);
    if (!all_ok (cok)) {
      if (cok)
        g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_BACKEND,
                     "measuring contention failed on another rank");
      goto out;
    }
  }

  char *text = sg_cu_prof_profile_text (keys, device, world, contention);
  const uint64_t h = sg_rt_fnv1a64 (text, strlen (text));
  uint64_t hmin = 0, hmax = 0;
  MPI_Allreduce (&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce (&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (hmin != hmax) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MISMATCH,
                 "the profile differs between ranks (internal error)");
    g_free (text);
    goto out;
  }
  bool wrote = true;
  GError *werr = NULL;
  if (rank == 0) /* g_file_set_contents: temporary file + rename */
    wrote = g_file_set_contents (out_path, text, -1, &werr);
  g_free (text);
  if (!all_ok (wrote)) {
    if (werr)
      g_propagate_prefixed_error (error, werr, "writing %s: ", out_path);
    else
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_IO, "rank 0 failed to write %s", out_path);
    goto out;
  }
  if (rank == 0)
    fprintf (stderr, "schedrun --profile: %u keys (%d measured, %d from the cache)%s on %d x %s "
                     "-> %s\n", keys->len, n_todo, n_cached,
             measure_contention ? ", contention measured"
             : contention     ? ", contention from the cache"
                              : "",
             world, device, out_path);
  ok = true;
out:
  g_free (contention);
  sg_cu_watchdog_stop (wd);
  comms_clear (&comms, !ok);
  if (t.cublas)
    cublasDestroy (t.cublas);
  sg_cu_dnn_free (t.dnn);
  for (int32_t i = 0; t.ev && i < 2 * iters; i++)
    if (t.ev[i])
      cudaEventDestroy (t.ev[i]);
  g_free (t.ev);
  if (t.stream)
    cudaStreamDestroy (t.stream);
  g_free (local);
  g_hash_table_unref (by_key);
  g_ptr_array_unref (keys);
  return ok;
early:
  return false;
}

bool
sg_rt_cuda_profile_requested (int argc, char **argv)
{
  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "--profile") == 0 || g_str_has_prefix (argv[i], "--profile="))
      return true;
  return false;
}

bool
sg_rt_cuda_profile_main (int *argc, char ***argv, GError **error)
{
  char *graph = NULL, *out = NULL;
  SgRtProfileOptions o = { .iters = 20, .warmup = 5, .contention_budget_s = 60,
                           .contention_iters = 5 };
  gboolean contention = FALSE;
  GOptionEntry entries[] = {
    { "profile", 0, 0, G_OPTION_ARG_FILENAME, &graph,
      "measure the graph's GEMM/attention/op shapes and collective sizes", "GRAPH.json" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &out,
      "profile file (docs/profile-format.md); an existing one is a cache", "PROFILE.json" },
    { "iters", 0, 0, G_OPTION_ARG_INT, &o.iters, "timed runs per key, median (default 20)", "K" },
    { "warmup", 0, 0, G_OPTION_ARG_INT, &o.warmup, "untimed runs first (default 5)", "W" },
    { "timeout", 0, 0, G_OPTION_ARG_DOUBLE, &o.timeout_s,
      "abort every communicator and the job when one key takes longer", "SEC" },
    { "contention", 0, 0, G_OPTION_ARG_NONE, &contention,
      "also measure each collective beside each kernel class (profile version 2)", NULL },
    { "contention-budget", 0, 0, G_OPTION_ARG_DOUBLE, &o.contention_budget_s,
      "wall time the contention measurement may take (default 60)", "SEC" },
    { "contention-iters", 0, 0, G_OPTION_ARG_INT, &o.contention_iters,
      "samples per pair and order, at most (default 5)", "K" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  GOptionContext *oc = g_option_context_new ("- measure a profile for schedgraph --profile");
  g_option_context_add_main_entries (oc, entries, NULL);
  bool ok = g_option_context_parse (oc, argc, argv, error);
  g_option_context_free (oc);
  o.contention = contention;
  if (ok && (!graph || !out || *argc != 1 || o.iters < 1 || o.iters > 10000 || o.warmup < 0 ||
             o.timeout_s < 0 || !(o.contention_budget_s >= 0) || o.contention_iters < 1 ||
             o.contention_iters > 1000)) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_ARGS,
                 "usage: schedrun --profile GRAPH.json -o PROFILE.json [--iters K] [--warmup W] "
                 "[--timeout SEC] [--contention [--contention-budget SEC] [--contention-iters K]]");
    ok = false;
  }
  if (ok && sg_same_file (graph, out)) { /* device and inode, not path text */
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_ARGS,
                 "-o would overwrite the graph ('%s' is '%s')", out, graph);
    ok = false;
  }
  if (ok)
    ok = sg_rt_cuda_profile (graph, out, &o, error);
  g_free (graph);
  g_free (out);
  return ok;
}

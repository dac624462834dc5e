/* profile.c: `schedrun --profile GRAPH -o PROFILE`: measures the graph's
 * GEMM / attention shapes, other op sizes and collective sizes on the GPUs
 * and writes docs/profile-format.md, byte-identical on every rank.
 *
 * Keys are taken from the graph as the cost model looks them up (estimate/
 * profile.c): gemm (op, dtype, batch, m, n, k), attention (op, dtype, batch,
 * heads, seq_q, seq_kv, head_dim, causal), collectives (kind, bytes as
 * sg_node_comm_bytes counts them, group size, nodes), ops (target, bytes of
 * the fresh value). A compute key is timed by running the first node that
 * has it as a one-instruction plan through the backend's own dispatch
 * (dispatch.c), with that node's operand layouts: the profile measures the
 * kernels schedrun runs. Collectives run on one NCCL communicator per group
 * instance. Each key: warm-up, then the median of K CUDA-event timings on
 * each rank, then the median over ranks (Allgather): every rank holds the
 * same numbers. Cache: an existing -o file for the same device and world
 * size is read on rank 0 and broadcast, and only keys it lacks are measured.
 * Mirrors: nccl-tests (timing loop), Inductor's benchmark cache.
 * Requires: one GPU per rank (local rank). Invalidates: nothing.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda-private.h"
#include "graph.h"

typedef enum { FAM_GEMM, FAM_ATTN, FAM_COLL, FAM_OPS } Fam;

typedef struct {
  Fam fam;
  char *key;      /* canonical text of the exact key (sort and cache match) */
  char *json;     /* the entry without "us", e.g. {"op": "mm", ...  */
  SgNodeId node;  /* a node with this key (measured), or -1 (from the cache) */
  double us;      /* < 0 until measured or read from the cache */
  double flops;   /* gemm: 2 * batch * m * n * k, for the "tflops" note */
} Key;

static void
key_free (gpointer p)
{
  Key *k = p;
  g_free (k->key);
  g_free (k->json);
  g_free (k);
}

static gint
key_cmp (gconstpointer a, gconstpointer b)
{
  const Key *x = *(Key *const *)a, *y = *(Key *const *)b;
  if (x->fam != y->fam)
    return x->fam < y->fam ? -1 : 1;
  return strcmp (x->key, y->key);
}

/* ---- keys from the graph ---- */

static const SgMeta *
in_meta (const SgGraph *g, SgNodeId id, uint32_t i)
{
  uint32_t n;
  const SgNodeId *in = sg_node_inputs (g, id, &n);
  return i < n ? &g->nodes[in[i]].meta : NULL;
}

static bool
node_key (const SgGraph *g, SgNodeId id, int32_t n_nodes_of_group, Key *k)
{
  const SgNode *n = &g->nodes[id];
  const SgOpClass klass = sg_op_class (n->kind);
  if (klass == SG_CLASS_MATMUL) {
    const bool bias = n->kind == SG_OP_ADDMM || n->kind == SG_OP_BADDBMM;
    const SgMeta *a = in_meta (g, id, bias ? 1 : 0), *b = in_meta (g, id, bias ? 2 : 1);
    if (!a || !b || a->ndim < 2 || b->ndim < 2)
      return false;
    const int64_t *as = sg_meta_shape (g, a), *bs = sg_meta_shape (g, b);
    const int64_t batch = a->ndim == 3 ? as[0] : 1;
    const int64_t m = as[a->ndim - 2], kk = as[a->ndim - 1], nn = bs[b->ndim - 1];
    k->fam = FAM_GEMM;
    k->flops = 2.0 * (double)batch * (double)m * (double)nn * (double)kk;
    k->key = g_strdup_printf ("%s|%s|%" G_GINT64_FORMAT "|%" G_GINT64_FORMAT "|%" G_GINT64_FORMAT
                              "|%" G_GINT64_FORMAT, sg_op_name (n->kind),
                              sg_dtype_name (a->dtype), batch, m, nn, kk);
    k->json = g_strdup_printf ("\"op\": \"%s\", \"dtype\": \"%s\", \"m\": %" G_GINT64_FORMAT
                               ", \"n\": %" G_GINT64_FORMAT ", \"k\": %" G_GINT64_FORMAT
                               ", \"batch\": %" G_GINT64_FORMAT,
                               sg_op_name (n->kind), sg_dtype_name (a->dtype), m, nn, kk, batch);
    return true;
  }
  if (klass == SG_CLASS_ATTENTION) {
    const bool bwd = n->kind == SG_OP_SDPA_FLASH_BWD || n->kind == SG_OP_SDPA_EFFICIENT_BWD ||
                     n->kind == SG_OP_SDPA_CUDNN_BWD;
    const SgMeta *q = in_meta (g, id, bwd ? 1 : 0), *kv = in_meta (g, id, bwd ? 2 : 1);
    if (!q || !kv || q->ndim != 4 || kv->ndim != 4)
      return false;
    const int64_t *qs = sg_meta_shape (g, q), *ks = sg_meta_shape (g, kv);
    /* is_causal's position in each schema (dispatch.c has them all) */
    int pos = n->kind == SG_OP_SDPA_FLASH ? 4 : n->kind == SG_OP_SDPA_FLASH_BWD ? 11
              : n->kind == SG_OP_SDPA_EFFICIENT_BWD ? 11 : n->kind == SG_OP_SDPA_CUDNN_BWD ? 14 : 6;
    cJSON *args = cJSON_Parse (n->args_json);
    const cJSON *c = cJSON_GetArrayItem (args, pos);
    const bool causal = cJSON_IsTrue (c);
    cJSON_Delete (args);
    k->fam = FAM_ATTN;
    k->key = g_strdup_printf ("%s|%s|%" G_GINT64_FORMAT "|%" G_GINT64_FORMAT "|%" G_GINT64_FORMAT
                              "|%" G_GINT64_FORMAT "|%" G_GINT64_FORMAT "|%d",
                              sg_op_name (n->kind), sg_dtype_name (q->dtype), qs[0], qs[1], qs[2],
                              ks[2], qs[3], causal);
    k->json = g_strdup_printf ("\"op\": \"%s\", \"dtype\": \"%s\", \"batch\": %" G_GINT64_FORMAT
                               ", \"heads\": %" G_GINT64_FORMAT ", \"seq_q\": %" G_GINT64_FORMAT
                               ", \"seq_kv\": %" G_GINT64_FORMAT ", \"head_dim\": %" G_GINT64_FORMAT
                               ", \"causal\": %s",
                               sg_op_name (n->kind), sg_dtype_name (q->dtype), qs[0], qs[1], qs[2],
                               ks[2], qs[3], causal ? "true" : "false");
    return true;
  }
  if (klass == SG_CLASS_COLLECTIVE) {
    const uint64_t bytes = sg_node_comm_bytes (g, id);
    const SgMeta *in = in_meta (g, id, 0);
    if (bytes == 0 || !in || n->group < 0 || n->group_size < 2)
      return false;
    k->fam = FAM_COLL;
    k->key = g_strdup_printf ("%s|%d|%d|%020" G_GUINT64_FORMAT, sg_op_name (n->kind),
                              n->group_size, n_nodes_of_group, bytes);
    k->json = g_strdup_printf ("\"kind\": \"%s\", \"dtype\": \"%s\", \"bytes\": %" G_GUINT64_FORMAT
                               ", \"group_size\": %d, \"nodes\": %d",
                               sg_op_name (n->kind), sg_dtype_name (in->dtype), bytes,
                               n->group_size, n_nodes_of_group);
    return true;
  }
  if (klass == SG_CLASS_POINTWISE || klass == SG_CLASS_REDUCTION || klass == SG_CLASS_COPY ||
      klass == SG_CLASS_CREATION || klass == SG_CLASS_BUCKET) {
    const uint64_t bytes = sg_node_alloc_bytes (g, id);
    if (bytes == 0)
      return false;
    gchar *tj = g_strescape (n->target, NULL);
    k->fam = FAM_OPS;
    k->key = g_strdup_printf ("%s|%020" G_GUINT64_FORMAT, n->target, bytes);
    k->json = g_strdup_printf ("\"target\": \"%s\", \"bytes\": %" G_GUINT64_FORMAT, tj, bytes);
    g_free (tj);
    return true;
  }
  return false;
}

/* Key text of an entry of an existing profile, as node_key writes it. */
static char *
entry_key (Fam fam, const cJSON *e)
{
#define S(n) (cJSON_IsString (cJSON_GetObjectItemCaseSensitive (e, n)) \
                ? cJSON_GetObjectItemCaseSensitive (e, n)->valuestring : "")
#define I(n, d) (cJSON_IsNumber (cJSON_GetObjectItemCaseSensitive (e, n)) \
                   ? (int64_t)cJSON_GetObjectItemCaseSensitive (e, n)->valuedouble : (d))
  switch (fam) {
  case FAM_GEMM:
    return g_strdup_printf ("%s|%s|%" G_GINT64_FORMAT "|%" G_GINT64_FORMAT "|%" G_GINT64_FORMAT
                            "|%" G_GINT64_FORMAT, S ("op"), S ("dtype"), I ("batch", 1), I ("m", 0),
                            I ("n", 0), I ("k", 0));
  case FAM_ATTN:
    return g_strdup_printf ("%s|%s|%" G_GINT64_FORMAT "|%" G_GINT64_FORMAT "|%" G_GINT64_FORMAT
                            "|%" G_GINT64_FORMAT "|%" G_GINT64_FORMAT "|%d", S ("op"), S ("dtype"),
                            I ("batch", 1), I ("heads", 0), I ("seq_q", 0), I ("seq_kv", 0),
                            I ("head_dim", 0),
                            cJSON_IsTrue (cJSON_GetObjectItemCaseSensitive (e, "causal")));
  case FAM_COLL:
    return g_strdup_printf ("%s|%d|%d|%020" G_GUINT64_FORMAT, S ("kind"), (int)I ("group_size", 0),
                            (int)I ("nodes", 1), (uint64_t)I ("bytes", 0));
  case FAM_OPS:
    return g_strdup_printf ("%s|%020" G_GUINT64_FORMAT, S ("target"), (uint64_t)I ("bytes", 0));
  }
#undef S
#undef I
  return NULL;
}

/* ---- timing ---- */

static int
cmp_double (const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double
median (double *v, int n)
{
  qsort (v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
  int32_t iters, warmup;
  cudaStream_t stream;
  cudaEvent_t *ev; /* 2 * iters */
  cublasHandle_t cublas;
} Timer;

/* Storage extent (elements) of a strided meta. */
static uint64_t
extent_of (const SgGraph *g, const SgMeta *m)
{
  if (m->ndim < 0)
    return 0;
  const int64_t *sh = sg_meta_shape (g, m), *sd = sg_meta_stride (g, m);
  uint64_t e = 1;
  for (int k = 0; k < m->ndim; k++) {
    if (sh[k] == 0)
      return 0;
    e += (uint64_t)((sh[k] - 1) * (sd[k] < 0 ? -sd[k] : sd[k]));
  }
  return e;
}

static int32_t
add_value (SgPlan *p, const SgGraph *g, const char *name, const SgMeta *m, uint64_t *arena)
{
  const int32_t v = p->n_values++;
  SgPlanValue *pv = &p->values[v];
  memset (pv, 0, sizeof *pv);
  pv->name = (char *)name;
  pv->buffer = -1;
  pv->ndim = m->ndim < 0 ? 0 : m->ndim;
  pv->dtype = m->ndim < 0 ? SG_DTYPE_F32 : m->dtype;
  if (m->ndim < 0)
    return v;
  const int64_t *sh = sg_meta_shape (g, m), *sd = sg_meta_stride (g, m);
  for (int k = 0; k < m->ndim; k++) {
    pv->shape[k] = sh[k];
    pv->stride[k] = sd[k];
  }
  const int32_t b = p->n_buffers++;
  p->buffers[b].offset = *arena;
  p->buffers[b].bytes = MAX (extent_of (g, m), 1) * sg_dtype_size (m->dtype);
  *arena += (p->buffers[b].bytes + 255) / 256 * 256;
  pv->buffer = b;
  return v;
}

/* {"node": NAME} -> {"value": id}, adding a value per distinct input. */
static void
rewrite_refs (cJSON *item, SgPlan *p, const SgGraph *g, uint64_t *arena)
{
  if (cJSON_IsObject (item)) {
    cJSON *ref = cJSON_GetObjectItemCaseSensitive (item, "node");
    if (cJSON_IsString (ref)) {
      const SgNodeId src = sg_graph_lookup (g, ref->valuestring);
      int32_t v = -1;
      for (int32_t i = 0; i < p->n_values; i++)
        if (strcmp (p->values[i].name, ref->valuestring) == 0)
          v = i;
      if (v < 0 && src != SG_NO_NODE)
        v = add_value (p, g, g->nodes[src].name, &g->nodes[src].meta, arena);
      cJSON_DeleteItemFromObjectCaseSensitive (item, "node");
      cJSON_AddNumberToObject (item, "value", v);
      return;
    }
  }
  cJSON *c;
  cJSON_ArrayForEach (c, item) rewrite_refs (c, p, g, arena);
}

/* Times node @id's kernel as a one-instruction plan; median over iters. */
static bool
time_compute (const SgGraph *g, SgNodeId id, Timer *t, double *us, GError **error)
{
  const SgNode *n = &g->nodes[id];
  SgPlan p;
  memset (&p, 0, sizeof p);
  SgPlanValue values[64];
  SgPlanBuffer buffers[64];
  p.values = values;
  p.buffers = buffers;
  p.n_streams = 1;
  uint64_t arena = 0;
  SgPlanIns ins;
  memset (&ins, 0, sizeof ins);
  ins.kind = SG_INS_KERNEL;
  ins.name = (char *)n->name;
  ins.op = n->kind;
  ins.target = (char *)n->target;
  ins.args = cJSON_Parse (n->args_json);
  ins.kwargs = cJSON_Parse (n->kwargs_json);
  uint32_t n_in;
  sg_node_inputs (g, id, &n_in);
  bool ok = false;
  SgCuState st;
  memset (&st, 0, sizeof st);
  char *base = NULL;
  int32_t outs[16];
  if (n_in + 16 > 64) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED, "node %s: too many inputs to profile",
                 n->name);
    goto out;
  }
  rewrite_refs (ins.args, &p, g, &arena);
  rewrite_refs (ins.kwargs, &p, g, &arena);
  const uint32_t n_out = n->n_tuple ? MIN (n->n_tuple, 16u) : 1;
  for (uint32_t j = 0; j < n_out; j++) {
    const SgMeta *m = n->n_tuple ? sg_node_tuple_meta (g, id, j) : &n->meta;
    outs[j] = m->ndim >= 0 ? add_value (&p, g, n->name, m, &arena) : -1;
  }
  ins.out = outs;
  ins.n_out = (int32_t)n_out;
  p.ins = &ins;
  p.n_ins = 1;
  uint64_t scratch = 0;
  if (!sg_cu_check_ins (&p, &ins, false, &scratch, error))
    goto out;
  SG_CU_CHECK (cudaMalloc ((void **)&base, arena + scratch + 256), error, out);
  /* random-ish, finite contents: bytes 0x3c.. read as small bf16/f32 values */
  SG_CU_CHECK (cudaMemset (base, 0x3c, arena + scratch + 256), error, out);
  st.arena = base;
  st.streams = &t->stream;
  st.n_streams = 1;
  char *sp = base + arena;
  st.scratch = &sp;
  st.scratch_bytes = &scratch;
  st.cublas = t->cublas;
  double *samples = g_new (double, t->iters);
  /* Warm-up, then one run alone to size the batches. */
  for (int32_t i = 0; i < MAX (1, t->warmup); i++)
    if (!sg_cu_run_kernel (&st, &p, &ins, error))
      goto done;
  float ms1 = 0;
  SG_CU_CHECK (cudaEventRecord (t->ev[0], t->stream), error, done);
  if (!sg_cu_run_kernel (&st, &p, &ins, error))
    goto done;
  SG_CU_CHECK (cudaEventRecord (t->ev[1], t->stream), error, done);
  SG_CU_CHECK (cudaEventSynchronize (t->ev[1]), error, done);
  SG_CU_CHECK (cudaEventElapsedTime (&ms1, t->ev[0], t->ev[1]), error, done);
  /* GPU time, as in a step where the host runs ahead: each sample is a batch
   * of back-to-back runs queued behind a spin kernel, divided by its size. */
  const int32_t batch = ms1 < 0.05f ? 16 : ms1 < 0.5f ? 4 : 1;
  for (int32_t k = 0; k < t->iters; k++) {
    SG_CU_CHECK (sg_cu_spin (30.0 + 15.0 * batch, t->stream), error, done);
    SG_CU_CHECK (cudaEventRecord (t->ev[2 * k], t->stream), error, done);
    for (int32_t r = 0; r < batch; r++)
      if (!sg_cu_run_kernel (&st, &p, &ins, error))
        goto done;
    SG_CU_CHECK (cudaEventRecord (t->ev[2 * k + 1], t->stream), error, done);
  }
  SG_CU_CHECK (cudaStreamSynchronize (t->stream), error, done);
  for (int32_t k = 0; k < t->iters; k++) {
    float ms = 0;
    SG_CU_CHECK (cudaEventElapsedTime (&ms, t->ev[2 * k], t->ev[2 * k + 1]), error, done);
    samples[k] = ms * 1000.0 / batch;
  }
  *us = median (samples, t->iters);
  ok = true;
done:
  g_free (samples);
out:
  if (base)
    cudaFree (base);
  cJSON_Delete (ins.args);
  cJSON_Delete (ins.kwargs);
  return ok;
}

/* Times collective node @id on @comm (this rank's instance of its group). */
static bool
time_collective (const SgGraph *g, SgNodeId id, ncclComm_t comm, MPI_Comm mpi, Timer *t,
                 double *us, GError **error)
{
  const SgNode *n = &g->nodes[id];
  const SgMeta *in = in_meta (g, id, 0);
  const uint64_t bytes = sg_node_comm_bytes (g, id);
  const int32_t gs = n->group_size;
  ncclDataType_t dt;
  size_t es = sg_dtype_size (in->dtype);
  if (!sg_cu_nccl_type (in->dtype, &dt)) {
    dt = ncclUint8;
    es = 1;
  }
  char *buf = NULL;
  double *samples = g_new (double, t->iters);
  bool ok = false;
  SG_CU_CHECK (cudaMalloc ((void **)&buf, 2 * bytes + 512), error, out);
  SG_CU_CHECK (cudaMemset (buf, 0, 2 * bytes + 512), error, out);
  char *send = buf, *recv = buf + (bytes + 255) / 256 * 256;
  const size_t total = bytes / es, shard = total / (size_t)gs;
  for (int32_t i = 0; i < t->warmup + t->iters; i++) {
    const int32_t k = i - t->warmup;
    SG_CU_CHECK (cudaStreamSynchronize (t->stream), error, out);
    MPI_Barrier (mpi);
    if (k >= 0)
      SG_CU_CHECK (cudaEventRecord (t->ev[2 * k], t->stream), error, out);
    switch (n->kind) {
    case SG_OP_ALL_GATHER:
      SG_NCCL_CHECK (ncclAllGather (send, recv, shard, dt, comm, t->stream), error, out);
      break;
    case SG_OP_REDUCE_SCATTER:
      SG_NCCL_CHECK (ncclReduceScatter (send, recv, shard, dt, ncclSum, comm, t->stream), error,
                     out);
      break;
    case SG_OP_ALL_REDUCE:
      SG_NCCL_CHECK (ncclAllReduce (send, recv, total, dt, ncclSum, comm, t->stream), error, out);
      break;
    case SG_OP_BROADCAST:
      SG_NCCL_CHECK (ncclBroadcast (send, recv, total, dt, 0, comm, t->stream), error, out);
      break;
    case SG_OP_ALL_TO_ALL:
      SG_NCCL_CHECK (ncclGroupStart (), error, out);
      for (int p = 0; p < gs; p++) {
        SG_NCCL_CHECK (ncclSend (send + (size_t)p * shard * es, shard, dt, p, comm, t->stream),
                       error, out);
        SG_NCCL_CHECK (ncclRecv (recv + (size_t)p * shard * es, shard, dt, p, comm, t->stream),
                       error, out);
      }
      SG_NCCL_CHECK (ncclGroupEnd (), error, out);
      break;
    default:
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED, "node %s: not a collective",
                   n->name);
      goto out;
    }
    if (k >= 0)
      SG_CU_CHECK (cudaEventRecord (t->ev[2 * k + 1], t->stream), error, out);
  }
  SG_CU_CHECK (cudaStreamSynchronize (t->stream), error, out);
  for (int32_t k = 0; k < t->iters; k++) {
    float ms = 0;
    SG_CU_CHECK (cudaEventElapsedTime (&ms, t->ev[2 * k], t->ev[2 * k + 1]), error, out);
    samples[k] = ms * 1000.0;
  }
  *us = median (samples, t->iters);
  ok = true;
out:
  if (!ok)
    g_prefix_error (error, "profiling %s (%s, %" G_GUINT64_FORMAT " bytes): ", n->name,
                    sg_op_name (n->kind), bytes);
  if (buf)
    cudaFree (buf);
  g_free (samples);
  return ok;
}

/* ---- the cache: an existing profile file ---- */

static const char *const fam_key[] = { "gemm", "attention", "collectives", "ops" };

/* The entry without "us", in node_key's field order. */
static char *
entry_json (Fam fam, const cJSON *e)
{
  GString *s = g_string_new (NULL);
  static const char *const fields[4][9] = {
    { "op", "dtype", "m", "n", "k", "batch", NULL },
    { "op", "dtype", "batch", "heads", "seq_q", "seq_kv", "head_dim", "causal", NULL },
    { "kind", "dtype", "bytes", "group_size", "nodes", NULL },
    { "target", "bytes", NULL },
  };
  for (int i = 0; fields[fam][i]; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive (e, fields[fam][i]);
    if (!v)
      continue;
    char *txt = cJSON_PrintUnformatted (v);
    g_string_append_printf (s, "%s\"%s\": %s", s->len ? ", " : "", fields[fam][i], txt);
    cJSON_free (txt);
  }
  return g_string_free (s, FALSE);
}

/* Adds the cache's entries: fills us of keys it has, appends the others.
 * A file for another device or world size is ignored (whole). */
static void
read_cache (const char *text, size_t len, const char *device, int32_t world, GPtrArray *keys,
            GHashTable *by_key, int32_t rank, int *n_cached)
{
  cJSON *root = cJSON_ParseWithLength (text, len);
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive (root, "format");
  const cJSON *dev = cJSON_GetObjectItemCaseSensitive (root, "device");
  const cJSON *ws = cJSON_GetObjectItemCaseSensitive (root, "world_size");
  if (!cJSON_IsString (fmt) || strcmp (fmt->valuestring, "schedgraph.profile") != 0 ||
      !cJSON_IsString (dev) || strcmp (dev->valuestring, device) != 0 || !cJSON_IsNumber (ws) ||
      ws->valueint != world) {
    if (rank == 0)
      fprintf (stderr, "schedrun --profile: the existing output is not a profile of %s with "
                       "world size %d: measuring everything\n", device, world);
    cJSON_Delete (root);
    return;
  }
  for (int f = 0; f < 4; f++) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive (root, fam_key[f]), *e;
    cJSON_ArrayForEach (e, arr)
    {
      const cJSON *us = cJSON_GetObjectItemCaseSensitive (e, "us");
      if (!cJSON_IsNumber (us) || !(us->valuedouble > 0))
        continue;
      char *kt = entry_key ((Fam)f, e);
      Key *k = g_hash_table_lookup (by_key, kt);
      if (!k) {
        k = g_new0 (Key, 1);
        k->fam = (Fam)f;
        k->key = kt;
        k->json = entry_json ((Fam)f, e);
        k->node = -1;
        if (f == FAM_GEMM) {
          const cJSON *b = cJSON_GetObjectItemCaseSensitive (e, "batch");
          k->flops = 2.0 * (cJSON_IsNumber (b) ? b->valuedouble : 1.0) *
                     cJSON_GetObjectItemCaseSensitive (e, "m")->valuedouble *
                     cJSON_GetObjectItemCaseSensitive (e, "n")->valuedouble *
                     cJSON_GetObjectItemCaseSensitive (e, "k")->valuedouble;
        }
        g_ptr_array_add (keys, k);
        g_hash_table_insert (by_key, k->key, k);
      } else {
        g_free (kt);
      }
      if (k->us < 0)
        (*n_cached)++;
      k->us = us->valuedouble;
    }
  }
  cJSON_Delete (root);
}

static char *
profile_text (GPtrArray *keys, const char *device, int32_t world)
{
  GString *s = g_string_new (NULL);
  gchar *dev = g_strescape (device, NULL);
  g_string_append_printf (s, "{\n  \"format\": \"schedgraph.profile\",\n  \"version\": 1,\n"
                             "  \"device\": \"%s\",\n  \"world_size\": %d", dev, world);
  g_free (dev);
  for (int f = 0; f < 4; f++) {
    g_string_append_printf (s, ",\n  \"%s\": [", fam_key[f]);
    bool first = true;
    for (guint i = 0; i < keys->len; i++) {
      const Key *k = keys->pdata[i];
      if ((int)k->fam != f || k->us <= 0)
        continue;
      g_string_append_printf (s, "%s\n    { %s, \"us\": %.3f", first ? "" : ",", k->json, k->us);
      if (f == FAM_GEMM && k->flops > 0)
        g_string_append_printf (s, ", \"tflops\": %.1f", k->flops / (k->us * 1e6));
      g_string_append (s, " }");
      first = false;
    }
    g_string_append (s, first ? "]" : "\n  ]");
  }
  g_string_append (s, "\n}\n");
  return g_string_free (s, FALSE);
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
sg_rt_cuda_profile (const char *graph_path, const char *out_path, int32_t iters, int32_t warmup,
                    double timeout_s, GError **error)
{
  int rank = 0, world = 1;
  MPI_Comm_rank (MPI_COMM_WORLD, &rank);
  MPI_Comm_size (MPI_COMM_WORLD, &world);
  iters = MAX (iters, 1);
  warmup = MAX (warmup, 0);
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
  GPtrArray *keys = g_ptr_array_new_with_free_func (key_free);
  GHashTable *by_key = g_hash_table_new (g_str_hash, g_str_equal);
  for (SgNodeId id = 0; id < g->n_nodes; id++) {
    Key tmp = { 0 };
    const SgNode *n = &g->nodes[id];
    const int32_t nn = sg_op_is_collective (n->kind) && n->group >= 0
                         ? group_nodes (&g->groups[n->group], hosts, MPI_MAX_PROCESSOR_NAME)
                         : 1;
    if (!node_key (g, id, nn, &tmp))
      continue;
    if (g_hash_table_contains (by_key, tmp.key)) {
      g_free (tmp.key);
      g_free (tmp.json);
      continue;
    }
    Key *k = g_memdup2 (&tmp, sizeof tmp);
    k->node = id;
    k->us = -1;
    g_ptr_array_add (keys, k);
    g_hash_table_insert (by_key, k->key, k);
  }
  g_free (hosts);

  /* the cache, as rank 0 reads it */
  int n_cached = 0;
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
      read_cache (text, (size_t)blen, device, world, keys, by_key, rank, &n_cached);
    }
    g_free (text);
  }
  g_ptr_array_sort (keys, key_cmp);

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
               fam_key[k->fam], k->key);
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
        col[r] = all[(size_t)r * MAX (1, n_todo) + j];
      k->us = MAX (median (col, world), 1e-3);
      j++;
    }
    g_free (all);
    g_free (col);
  }

  char *text = profile_text (keys, device, world);
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
    fprintf (stderr, "schedrun --profile: %u keys (%d measured, %d from the cache) on %d x %s "
                     "-> %s\n", keys->len, n_todo, n_cached, world, device, out_path);
  ok = true;
out:
  sg_cu_watchdog_stop (wd);
  comms_clear (&comms, !ok);
  if (t.cublas)
    cublasDestroy (t.cublas);
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
  int iters = 20, warmup = 5;
  double timeout = 0;
  GOptionEntry entries[] = {
    { "profile", 0, 0, G_OPTION_ARG_FILENAME, &graph,
      "measure the graph's GEMM/attention/op shapes and collective sizes", "GRAPH.json" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &out,
      "profile file (docs/profile-format.md); an existing one is a cache", "PROFILE.json" },
    { "iters", 0, 0, G_OPTION_ARG_INT, &iters, "timed runs per key, median (default 20)", "K" },
    { "warmup", 0, 0, G_OPTION_ARG_INT, &warmup, "untimed runs first (default 5)", "W" },
    { "timeout", 0, 0, G_OPTION_ARG_DOUBLE, &timeout,
      "abort every communicator and the job when one key takes longer", "SEC" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  GOptionContext *oc = g_option_context_new ("- measure a profile for schedgraph --profile");
  g_option_context_add_main_entries (oc, entries, NULL);
  bool ok = g_option_context_parse (oc, argc, argv, error);
  g_option_context_free (oc);
  if (ok && (!graph || !out || *argc != 1 || iters < 1 || iters > 10000 || warmup < 0 ||
             timeout < 0)) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_ARGS,
                 "usage: schedrun --profile GRAPH.json -o PROFILE.json [--iters K] [--warmup W] "
                 "[--timeout SEC]");
    ok = false;
  }
  if (ok)
    ok = sg_rt_cuda_profile (graph, out, iters, warmup, timeout, error);
  g_free (graph);
  g_free (out);
  return ok;
}

/* profile-keys.c: the keys of `schedrun --profile` and the profile text.
 *
 * Keys are taken from the graph as the cost model looks them up (estimate/
 * profile.c, docs/profile-format.md): gemm (op, dtype, batch, m, n, k),
 * attention (op, dtype, batch, heads, seq_q, seq_kv, head_dim, causal),
 * collectives (kind, bytes as sg_node_comm_bytes counts them, group size,
 * nodes), ops (target, bytes of the fresh value); a kernel's entry also
 * keeps each rank's time (us_by_rank). An existing profile (the cache) is
 * read into the same keys, and its contention section kept as text; the text is written in one fixed order (family, then key) with
 * fixed precision, so equal numbers give equal bytes on every rank; version
 * 2 only with a contention section. Requires: a loaded graph. Invalidates:
 * nothing.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda-private.h"
#include "textio.h"
#include "profile-private.h"

void
sg_cu_prof_key_free (gpointer p)
{
  Key *k = p;
  g_free (k->key);
  g_free (k->json);
  g_free (k->us_by_rank);
  g_free (k);
}

gint
sg_cu_prof_key_cmp (gconstpointer a, gconstpointer b)
{
  const Key *x = *(Key *const *)a, *y = *(Key *const *)b;
  if (x->fam != y->fam)
    return x->fam < y->fam ? -1 : 1;
  return strcmp (x->key, y->key);
}

/* ---- keys from the graph ---- */

const SgMeta *
sg_cu_prof_in_meta (const SgGraph *g, SgNodeId id, uint32_t i)
{
  uint32_t n;
  const SgNodeId *in = sg_node_inputs (g, id, &n);
  return i < n ? &g->nodes[in[i]].meta : NULL;
}

bool
sg_cu_prof_node_key (const SgGraph *g, SgNodeId id, int32_t n_nodes_of_group, Key *k)
{
  const SgNode *n = &g->nodes[id];
  const SgOpClass klass = sg_op_class (n->kind);
  if (klass == SG_CLASS_MATMUL) {
    SgParam pa, pb;
    if (!sg_op_matmul_params (n->kind, &pa, &pb))
      return false;
    const SgMeta *a = sg_node_param_meta (g, id, pa), *b = sg_node_param_meta (g, id, pb);
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
    const SgMeta *q = sg_node_param_meta (g, id, SG_PARAM_QUERY);
    const SgMeta *kv = sg_node_param_meta (g, id, SG_PARAM_KEY);
    if (!q || !kv || q->ndim != 4 || kv->ndim != 4)
      return false;
    const int64_t *qs = sg_meta_shape (g, q), *ks = sg_meta_shape (g, kv);
    bool causal = false;
    sg_arg_bool (sg_node_param (g, id, SG_PARAM_IS_CAUSAL), &causal);
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
  /* (collective_permute steps are not measured: the model prices them; nor
   * coalesced calls: the model prices one from single calls of its
   * members' kind, estimate/'s sg_cost_coalesced_us) */
  if (klass == SG_CLASS_COLLECTIVE && n->kind != SG_OP_COLLECTIVE_PERMUTE
      && !sg_op_is_coalesced (n->kind)) {
    const uint64_t bytes = sg_node_comm_bytes (g, id);
    const SgMeta *in = sg_cu_prof_in_meta (g, id, 0);
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
  /* (rank_roll needs its group, which a one-instruction plan lacks: the
   * model prices that copy) */
  if ((klass == SG_CLASS_POINTWISE || klass == SG_CLASS_REDUCTION || klass == SG_CLASS_COPY ||
       klass == SG_CLASS_CREATION || klass == SG_CLASS_BUCKET) && n->kind != SG_OP_RANK_ROLL) {
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

/* ---- the cache: an existing profile file ---- */

const char *const sg_cu_prof_fam_key[4] = { "gemm", "attention", "collectives", "ops" };

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

/* The contention section's entries as sg_cu_prof_profile_text writes them,
 * or NULL when there are none. */
static char *
cached_contention (const cJSON *root)
{
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive (root, "contention"), *e;
  if (!cJSON_IsArray (arr) || cJSON_GetArraySize (arr) == 0)
    return NULL;
  GString *s = g_string_new (NULL);
  cJSON_ArrayForEach (e, arr)
  {
    char *t = cJSON_PrintUnformatted (e);
    g_string_append_printf (s, "%s    %s", s->len ? ",\n" : "", t);
    cJSON_free (t);
  }
  return g_string_free (s, FALSE);
}

/* A cached entry's us_by_rank, kept when it has one time > 0 per rank. */
static void
cached_by_rank (Key *k, const cJSON *arr, int32_t world)
{
  g_clear_pointer (&k->us_by_rank, g_free);
  k->n_by_rank = 0;
  if (k->fam == FAM_COLL || !cJSON_IsArray (arr) || cJSON_GetArraySize (arr) != world)
    return;
  double *v = g_new (double, (size_t)MAX (world, 1));
  int32_t n = 0;
  const cJSON *x;
  cJSON_ArrayForEach (x, arr)
  {
    if (!cJSON_IsNumber (x) || !(x->valuedouble > 0) || !isfinite (x->valuedouble)) {
      g_free (v);
      return;
    }
    v[n++] = x->valuedouble;
  }
  k->us_by_rank = v;
  k->n_by_rank = n;
}

/* Adds the cache's entries: fills us of keys it has, appends the others;
 * keeps its contention section as text. A file for another device or world
 * size is ignored (whole). */
void
sg_cu_prof_read_cache (const char *text, size_t len, const char *device, int32_t world,
                       GPtrArray *keys, GHashTable *by_key, int32_t rank, int *n_cached,
                       char **contention)
{
  cJSON *root = sg_json_parse (text, len, NULL); /* the rules of every reader (textio.h) */
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
  *contention = cached_contention (root);
  for (int f = 0; f < 4; f++) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive (root, sg_cu_prof_fam_key[f]), *e;
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
      cached_by_rank (k, cJSON_GetObjectItemCaseSensitive (e, "us_by_rank"), world);
    }
  }
  cJSON_Delete (root);
}

char *
sg_cu_prof_profile_text (GPtrArray *keys, const char *device, int32_t world,
                         const char *contention)
{
  GString *s = g_string_new (NULL);
  gchar *dev = g_strescape (device, NULL);
  g_string_append_printf (s, "{\n  \"format\": \"schedgraph.profile\",\n  \"version\": %d,\n"
                             "  \"device\": \"%s\",\n  \"world_size\": %d",
                          contention ? 2 : 1, dev, world);
  g_free (dev);
  for (int f = 0; f < 4; f++) {
    g_string_append_printf (s, ",\n  \"%s\": [", sg_cu_prof_fam_key[f]);
    bool first = true;
    for (guint i = 0; i < keys->len; i++) {
      const Key *k = keys->pdata[i];
      if ((int)k->fam != f || k->us <= 0)
        continue;
      g_string_append_printf (s, "%s\n    { %s, \"us\": %.3f", first ? "" : ",", k->json, k->us);
      for (int32_t r = 0; r < k->n_by_rank; r++)
        g_string_append_printf (s, "%s%.3f%s", r ? ", " : ", \"us_by_rank\": [",
                                k->us_by_rank[r], r + 1 == k->n_by_rank ? "]" : "");
      if (f == FAM_GEMM && k->flops > 0)
        g_string_append_printf (s, ", \"tflops\": %.1f", k->flops / (k->us * 1e6));
      g_string_append (s, " }");
      first = false;
    }
    g_string_append (s, first ? "]" : "\n  ]");
  }
  if (contention)
    g_string_append_printf (s, ",\n  \"contention\": [\n%s\n  ]", contention);
  g_string_append (s, "\n}\n");
  return g_string_free (s, FALSE);
}

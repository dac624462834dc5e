/* test_graphgen.c: tools/graphgen against the PyTorch-exported samples and
 * the graph loader.
 *
 * The tiny configurations must reproduce the samples node for node (same
 * names, targets, args, kwargs and metadata); every mode must load with
 * sg_graph_load_data() (which runs the validator), carry the collectives the
 * closed formulas give per kind and group, and have metadata consistent with
 * aten's shape rules (the CPU runtime executes these graphs and checks
 * shapes). The command line is tested in test_graphgen_cli.c.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "graph.h"
#include "graphgen.h"

#ifndef GG_TEST_DATA
#error "GG_TEST_DATA must name tests/data"
#endif

/* --- helpers ------------------------------------------------------------ */

static char *
generate (const GgConfig *cfg, size_t *len, GgStats *st)
{
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream (&buf, &n);
  ck_assert_ptr_nonnull (f);
  GError *error = NULL;
  bool ok = gg_write (cfg, f, st, &error);
  if (!ok)
    ck_abort_msg ("gg_write: %s", error->message);
  fclose (f);
  if (len)
    *len = n;
  return buf;
}

static SgGraph *
generate_and_load (const GgConfig *cfg, GgStats *st)
{
  size_t n;
  char *buf = generate (cfg, &n, st);
  GError *error = NULL;
  SgGraph *g = sg_graph_load_data (buf, n, "<graphgen>", &error);
  if (!g)
    ck_abort_msg ("load: %s", error->message);
  free (buf);
  return g;
}

static cJSON *
load_json_file (const char *name)
{
  char *path = g_build_filename (GG_TEST_DATA, name, NULL);
  char *text = NULL;
  gsize n = 0;
  ck_assert_msg (g_file_get_contents (path, &text, &n, NULL), "cannot read %s", path);
  cJSON *j = cJSON_ParseWithLength (text, n);
  ck_assert_msg (j != NULL, "cannot parse %s", path);
  g_free (text);
  g_free (path);
  return j;
}

static void
cfg_sample (GgConfig *c, int64_t H, int64_t F, int64_t heads, int64_t S, int64_t dp, int64_t tp)
{
  gg_config_init (c);
  c->layers = 2, c->hidden = H, c->ffn = F, c->heads = heads, c->seq = S, c->dp = dp, c->tp = tp;
}

/* Compares every node and the groups of the generated graph with a sample. */
static void
assert_matches_sample (const GgConfig *cfg, const char *sample)
{
  char *buf = generate (cfg, NULL, NULL);
  cJSON *gen = cJSON_Parse (buf);
  ck_assert_ptr_nonnull (gen);
  cJSON *ref = load_json_file (sample);
  ck_assert (cJSON_Compare (cJSON_GetObjectItem (gen, "groups"),
                            cJSON_GetObjectItem (ref, "groups"), true));
  ck_assert_int_eq (cJSON_GetObjectItem (gen, "world_size")->valueint,
                    cJSON_GetObjectItem (ref, "world_size")->valueint);
  /* the samples name the GPU they were exported for */
  cJSON *rc = cJSON_GetObjectItem (ref, "cluster"), *gc = cJSON_GetObjectItem (gen, "cluster");
  ck_assert_str_eq (cfg->cluster_gpu, cJSON_GetObjectItem (rc, "gpu")->valuestring);
  ck_assert (cJSON_Compare (gc, rc, true));
  cJSON *gn = cJSON_GetObjectItem (gen, "nodes"), *rn = cJSON_GetObjectItem (ref, "nodes");
  ck_assert_int_eq (cJSON_GetArraySize (gn), cJSON_GetArraySize (rn));
  int i = 0;
  for (cJSON *a = gn->child, *b = rn->child; a && b; a = a->next, b = b->next, i++) {
    if (!cJSON_Compare (a, b, true)) {
      char *sa = cJSON_PrintUnformatted (a), *sb = cJSON_PrintUnformatted (b);
      ck_abort_msg ("%s: node %d differs:\n  generated %s\n  sample    %s", sample, i, sa, sb);
    }
  }
  cJSON_Delete (gen);
  cJSON_Delete (ref);
  free (buf);
}

/* target -> count, as a sorted "target=count;" string (order-free compare). */
static char *
histogram (cJSON *nodes)
{
  GHashTable *h = g_hash_table_new (g_str_hash, g_str_equal);
  cJSON *n;
  cJSON_ArrayForEach (n, nodes)
  {
    const char *t = cJSON_GetObjectItem (n, "target")->valuestring;
    if (g_str_has_prefix (t, "arg"))
      t = "placeholder";
    g_hash_table_insert (h, (gpointer)t,
                         GINT_TO_POINTER (GPOINTER_TO_INT (g_hash_table_lookup (h, t)) + 1));
  }
  GList *keys = g_list_sort (g_hash_table_get_keys (h), (GCompareFunc)strcmp);
  GString *s = g_string_new (NULL);
  for (GList *k = keys; k; k = k->next)
    g_string_append_printf (s, "%s=%d;", (char *)k->data,
                            GPOINTER_TO_INT (g_hash_table_lookup (h, k->data)));
  g_list_free (keys);
  g_hash_table_destroy (h);
  return g_string_free (s, false);
}

static void
assert_histogram (const GgConfig *cfg, const char *sample)
{
  char *buf = generate (cfg, NULL, NULL);
  cJSON *gen = cJSON_Parse (buf), *ref = load_json_file (sample);
  char *hg = histogram (cJSON_GetObjectItem (gen, "nodes"));
  char *hr = histogram (cJSON_GetObjectItem (ref, "nodes"));
  ck_assert_str_eq (hg, hr);
  g_free (hg);
  g_free (hr);
  cJSON_Delete (gen);
  cJSON_Delete (ref);
  free (buf);
}

/* --- the samples ----------------------------------------------------------- */

START_TEST (fsdp_tiny_reproduces_the_exported_sample)
{
  GgConfig c;
  cfg_sample (&c, 256, 688, 4, 256, 2, 1);
  assert_histogram (&c, "w2_tiny_fsdp2_L2_h256.json");
  assert_matches_sample (&c, "w2_tiny_fsdp2_L2_h256.json");
}
END_TEST

START_TEST (tp_sp_tiny_reproduces_the_exported_sample)
{
  GgConfig c;
  cfg_sample (&c, 256, 688, 4, 256, 1, 2);
  assert_histogram (&c, "w2_tiny_tp2_L2_h256.json");
  assert_matches_sample (&c, "w2_tiny_tp2_L2_h256.json");
}
END_TEST

START_TEST (fsdp_x_tp_2d_reproduces_the_exported_sample)
{
  GgConfig c;
  cfg_sample (&c, 1024, 2816, 8, 2048, 2, 4);
  c.cluster_gpu = "H100";
  assert_histogram (&c, "dev_fsdp2_tp4_L2_h1024.json");
  assert_matches_sample (&c, "dev_fsdp2_tp4_L2_h1024.json");
}
END_TEST

START_TEST (larger_samples_are_reproduced)
{
  GgConfig c;
  cfg_sample (&c, 1024, 2816, 8, 2048, 8, 1);
  c.cluster_gpu = "H100";
  assert_matches_sample (&c, "dev_fsdp8_L2_h1024.json");
  cfg_sample (&c, 1024, 2816, 8, 2048, 2, 1);
  assert_matches_sample (&c, "w2_fsdp2_L2_h1024.json");
  cfg_sample (&c, 1024, 2816, 8, 2048, 1, 2);
  assert_matches_sample (&c, "w2_tp2_L2_h1024.json");
}
END_TEST

/* --- loading, collectives, shapes ------------------------------------------ */

static const int64_t *
shp (const SgGraph *g, SgNodeId id)
{
  return sg_meta_shape (g, &g->nodes[id].meta);
}

static const int64_t *
strd (const SgGraph *g, SgNodeId id)
{
  return sg_meta_stride (g, &g->nodes[id].meta);
}

static bool
same_shape (const SgGraph *g, SgNodeId a, SgNodeId b)
{
  const SgMeta *ma = &g->nodes[a].meta, *mb = &g->nodes[b].meta;
  return ma->ndim == mb->ndim &&
         memcmp (shp (g, a), shp (g, b), sizeof (int64_t) * (size_t)ma->ndim) == 0;
}

static bool
contiguous (const SgGraph *g, SgNodeId id)
{
  const SgMeta *m = &g->nodes[id].meta;
  int64_t s = 1;
  for (int i = m->ndim - 1; i >= 0; i--) {
    if (shp (g, id)[i] != 1 && strd (g, id)[i] != s)
      return false;
    s *= shp (g, id)[i];
  }
  return true;
}

/* aten's shape rule for every op graphgen emits; fails on any op it does
 * not know, so a new op cannot slip in unchecked. */
static void
check_node_shape (const SgGraph *g, SgNodeId id)
{
  const SgNode *n = &g->nodes[id];
  uint32_t n_in;
  const SgNodeId *in = sg_node_inputs (g, id, &n_in);
  const SgMeta *m = &n->meta;
  const int64_t *s = m->ndim >= 0 ? shp (g, id) : NULL;
  const int64_t *st = m->ndim >= 0 ? strd (g, id) : NULL;
#define REQUIRE(cond) ck_assert_msg ((cond), "node %s (%s): %s", n->name, n->target, #cond)
  switch (n->kind) {
  case SG_OP_PLACEHOLDER:
    REQUIRE (contiguous (g, id));
    break;
  case SG_OP_OUTPUT:
    break;
  case SG_OP_MM: {
    const int64_t *a = shp (g, in[0]), *b = shp (g, in[1]);
    REQUIRE (n_in == 2 && m->ndim == 2 && a[1] == b[0] && s[0] == a[0] && s[1] == b[1]);
    REQUIRE (contiguous (g, id));
    REQUIRE (g->nodes[in[0]].meta.dtype == m->dtype && g->nodes[in[1]].meta.dtype == m->dtype);
    break;
  }
  case SG_OP_T: {
    const int64_t *a = shp (g, in[0]), *sa = strd (g, in[0]);
    REQUIRE (m->ndim == 2 && s[0] == a[1] && s[1] == a[0] && st[0] == sa[1] && st[1] == sa[0]);
    break;
  }
  case SG_OP_TRANSPOSE: {
    const int64_t *a = shp (g, in[0]), *sa = strd (g, in[0]);
    REQUIRE (m->ndim == 4 && s[0] == a[0] && s[1] == a[2] && s[2] == a[1] && s[3] == a[3]);
    REQUIRE (st[0] == sa[0] && st[1] == sa[2] && st[2] == sa[1] && st[3] == sa[3]);
    break;
  }
  case SG_OP_VIEW:
    REQUIRE (sg_meta_numel (g, m) == sg_meta_numel (g, &g->nodes[in[0]].meta));
    REQUIRE (contiguous (g, in[0]) && contiguous (g, id));
    break;
  case SG_OP_EXPAND: {
    const SgMeta *im = &g->nodes[in[0]].meta;
    int off = m->ndim - im->ndim;
    for (int i = 0; i < m->ndim; i++) {
      bool broadcast = i < off || shp (g, in[0])[i - off] == 1;
      REQUIRE (broadcast ? st[i] == 0 : s[i] == shp (g, in[0])[i - off]);
    }
    break;
  }
  case SG_OP_ALL_GATHER:
  case SG_OP_REDUCE_SCATTER: {
    const int64_t *a = shp (g, in[0]);
    int64_t k = n->group_size;
    REQUIRE (m->ndim == g->nodes[in[0]].meta.ndim);
    REQUIRE (n->kind == SG_OP_ALL_GATHER ? s[0] == a[0] * k : a[0] == s[0] * k);
    for (int i = 1; i < m->ndim; i++)
      REQUIRE (s[i] == a[i]);
    REQUIRE (contiguous (g, id));
    break;
  }
  case SG_OP_ALL_REDUCE:
  case SG_OP_WAIT:
  case SG_OP_MUL_SCALAR:
  case SG_OP_DIV_SCALAR:
  case SG_OP_POW_TENSOR_SCALAR:
  case SG_OP_RSQRT:
  case SG_OP_SILU:
  case SG_OP_DETACH:
  case SG_OP_ONES_LIKE:
  case SG_OP_TO_COPY:
    REQUIRE (n_in == 1 && same_shape (g, id, in[0]));
    if (n->kind != SG_OP_TO_COPY)
      REQUIRE (m->dtype == g->nodes[in[0]].meta.dtype);
    else
      REQUIRE (m->dtype != g->nodes[in[0]].meta.dtype);
    if (n->kind != SG_OP_WAIT && n->kind != SG_OP_DETACH)
      REQUIRE (contiguous (g, id));
    break;
  case SG_OP_SILU_BACKWARD:
    REQUIRE (n_in == 2 && same_shape (g, id, in[0]) && same_shape (g, id, in[1]));
    break;
  case SG_OP_ADD_TENSOR:
  case SG_OP_MUL_TENSOR:
    /* broadcasting: every input dim is 1 or the output's */
    for (uint32_t k = 0; k < n_in; k++) {
      const SgMeta *im = &g->nodes[in[k]].meta;
      int off = m->ndim - im->ndim;
      REQUIRE (off >= 0);
      for (int i = 0; i < im->ndim; i++)
        REQUIRE (shp (g, in[k])[i] == 1 || shp (g, in[k])[i] == s[i + off]);
      REQUIRE (im->dtype == m->dtype);
    }
    REQUIRE (contiguous (g, id));
    break;
  case SG_OP_SUM_DIM:
  case SG_OP_MEAN_DIM: {
    const int64_t *a = shp (g, in[0]);
    int reduced = 0;
    REQUIRE (m->ndim == g->nodes[in[0]].meta.ndim);
    for (int i = 0; i < m->ndim; i++) {
      REQUIRE (s[i] == a[i] || s[i] == 1);
      reduced += s[i] != a[i];
    }
    REQUIRE (reduced <= 1);
    break;
  }
  case SG_OP_MEAN:
    REQUIRE (m->ndim == 0);
    break;
  case SG_OP_GETITEM: {
    const SgNode *t = &g->nodes[in[0]];
    REQUIRE (n->getitem_index >= 0 && (uint32_t)n->getitem_index < t->n_tuple);
    const SgMeta *e = sg_node_tuple_meta (g, in[0], (uint32_t)n->getitem_index);
    REQUIRE (e->ndim == m->ndim);
    if (m->ndim >= 0) {
      REQUIRE (e->dtype == m->dtype);
      REQUIRE (memcmp (sg_meta_shape (g, e), s, sizeof (int64_t) * (size_t)m->ndim) == 0);
      REQUIRE (memcmp (sg_meta_stride (g, e), st, sizeof (int64_t) * (size_t)m->ndim) == 0);
    }
    break;
  }
  case SG_OP_SDPA_CUDNN: {
    REQUIRE (n_in == 3 && n->n_tuple == 9);
    const SgMeta *o = sg_node_tuple_meta (g, id, 0), *lse = sg_node_tuple_meta (g, id, 1);
    REQUIRE (o->ndim == 4 && memcmp (sg_meta_shape (g, o), shp (g, in[0]), 4 * 8) == 0);
    REQUIRE (lse->ndim == 4 && lse->dtype == SG_DTYPE_F32);
    REQUIRE (sg_meta_shape (g, lse)[2] == shp (g, in[0])[2] && sg_meta_shape (g, lse)[3] == 1);
    for (uint32_t k = 1; k < 3; k++)
      REQUIRE (same_shape (g, in[0], in[k]));
    break;
  }
  case SG_OP_SDPA_CUDNN_BWD:
    REQUIRE (n->n_tuple == 3 && n_in == 8);
    for (uint32_t k = 0; k < 3; k++) {
      const SgMeta *e = sg_node_tuple_meta (g, id, k);
      REQUIRE (memcmp (sg_meta_shape (g, e), shp (g, in[1 + k]), 4 * 8) == 0);
    }
    REQUIRE (same_shape (g, in[0], in[1]));
    break;
  default:
    ck_abort_msg ("node %s: op %s has no shape rule in this test", n->name, n->target);
  }
#undef REQUIRE
}

static GgDim
dim_of_group (const GgConfig *cfg, const char *name)
{
  for (int d = 0; d < GG_DIM_N; d++) {
    const char *gn = gg_group_name (cfg, (GgDim)d);
    if (gn && strcmp (gn, name) == 0)
      return (GgDim)d;
  }
  ck_abort_msg ("group %s is not a mesh dimension", name);
  return GG_DIM_N;
}

/* Loads @cfg's graph and checks counts, collectives and shapes. */
static void
check_mode (const GgConfig *cfg)
{
  GgStats st;
  SgGraph *g = generate_and_load (cfg, &st);
  ck_assert_int_eq (g->n_nodes, st.nodes);
  ck_assert_int_eq (st.placeholders, 1 + 9 * cfg->layers);
  int64_t seen[GG_COLL_N][GG_DIM_N] = { { 0 } }, expect[GG_COLL_N][GG_DIM_N];
  gg_expected_collectives (cfg, expect);
  int64_t placeholders = 0;
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    const SgNode *n = &g->nodes[i];
    check_node_shape (g, i);
    placeholders += n->kind == SG_OP_PLACEHOLDER;
    int k = n->kind == SG_OP_ALL_GATHER       ? GG_COLL_AG
            : n->kind == SG_OP_REDUCE_SCATTER ? GG_COLL_RS
            : n->kind == SG_OP_ALL_REDUCE     ? GG_COLL_AR
                                              : -1;
    if (k < 0)
      continue;
    GgDim d = dim_of_group (cfg, g->groups[n->group].name);
    seen[k][d]++;
    /* the group the op names has the size it states */
    ck_assert_int_eq (n->group_size, g->groups[n->group].n_ranks);
    int64_t world = cfg->world ? cfg->world : cfg->dp * cfg->tp;
    int64_t size[GG_DIM_N] = { cfg->tp, cfg->dp, world / (cfg->dp * cfg->tp) };
    ck_assert_int_eq (n->group_size, size[d]);
  }
  ck_assert_int_eq (placeholders, st.placeholders);
  for (int k = 0; k < GG_COLL_N; k++)
    for (int d = 0; d < GG_DIM_N; d++) {
      ck_assert_int_eq (seen[k][d], expect[k][d]);
      ck_assert_int_eq (st.collectives[k][d], expect[k][d]);
    }
  /* the output lists the loss and one gradient per parameter, each shaped
   * like its parameter shard */
  uint32_t n_out;
  const SgNodeId *outs = sg_node_inputs (g, g->output, &n_out);
  ck_assert_uint_eq (n_out, 1 + 9 * (uint32_t)cfg->layers);
  ck_assert_int_eq (g->nodes[outs[0]].meta.ndim, 0);
  for (uint32_t i = 1; i < n_out; i++)
    ck_assert_msg (same_shape (g, outs[i], (SgNodeId)i), "gradient %s vs parameter %s",
                   g->nodes[outs[i]].name, g->nodes[i].name);
  sg_graph_free (g);
}

START_TEST (every_mode_loads_with_formula_collectives_and_aten_shapes)
{
  struct {
    int64_t dp, tp, world, layers;
    GgTpMode mode;
    const char *dtype;
    bool norm_ar;
  } modes[] = {
    { 2, 1, 0, 3, GG_TP_SP, "bfloat16", false }, /* fsdp */
    { 4, 1, 0, 2, GG_TP_SP, "float16", false },  /* fsdp, fp16 */
    { 1, 2, 0, 3, GG_TP_SP, "bfloat16", false }, /* tp + sp */
    { 1, 4, 0, 2, GG_TP_ALLREDUCE, "bfloat16", false }, /* tp + all_reduce */
    { 2, 2, 0, 2, GG_TP_SP, "bfloat16", false }, /* 2-D */
    { 2, 4, 0, 2, GG_TP_SP, "bfloat16", true },  /* 2-D, norm grads all_reduced */
    { 2, 2, 0, 2, GG_TP_ALLREDUCE, "float32", false }, /* 2-D, all_reduce, fp32 */
    { 2, 2, 8, 2, GG_TP_SP, "bfloat16", false }, /* 2-D x replicas (HSDP) */
    { 1, 1, 4, 1, GG_TP_SP, "bfloat16", false }, /* pure replicas (DDP) */
    { 1, 1, 0, 1, GG_TP_SP, "float32", false },  /* one rank, no collectives */
  };
  for (size_t i = 0; i < G_N_ELEMENTS (modes); i++) {
    GgConfig c;
    gg_config_init (&c);
    c.hidden = 64, c.ffn = 176, c.heads = 4, c.seq = 32;
    c.dp = modes[i].dp, c.tp = modes[i].tp, c.world = modes[i].world;
    c.layers = modes[i].layers, c.tp_mode = modes[i].mode, c.dtype = modes[i].dtype;
    c.sp_norm_allreduce = modes[i].norm_ar;
    check_mode (&c);
  }
}
END_TEST

START_TEST (groups_are_the_ones_of_the_given_rank)
{
  GgConfig c;
  cfg_sample (&c, 64, 176, 4, 32, 2, 4);
  c.rank = 5;
  SgGraph *g = generate_and_load (&c, NULL);
  int32_t tp = sg_graph_find_group (g, "1"), dp = sg_graph_find_group (g, "2");
  ck_assert_int_ge (tp, 0);
  ck_assert_int_ge (dp, 0);
  ck_assert_int_eq (g->groups[tp].n_ranks, 4);
  for (int i = 0; i < 4; i++)
    ck_assert_int_eq (g->groups[tp].ranks[i], 4 + i);
  ck_assert_int_eq (g->groups[dp].n_ranks, 2);
  ck_assert_int_eq (g->groups[dp].ranks[0], 1);
  ck_assert_int_eq (g->groups[dp].ranks[1], 5);
  ck_assert_int_eq (g->rank, 5);
  sg_graph_free (g);
}
END_TEST

/* The loader infers every other rank's instance of a group from the ranks
 * the file lists; for graphgen's mesh (rank = (rep * dp + d) * tp + t) that
 * must give each rank's own tp, dp and replica groups. */
START_TEST (loader_infers_the_mesh_graphgen_describes)
{
  GgConfig c;
  cfg_sample (&c, 64, 176, 4, 32, 2, 2);
  c.world = 16;
  for (int64_t rank = 0; rank < c.world; rank += 3) {
    c.rank = rank;
    SgGraph *g = generate_and_load (&c, NULL);
    for (int d = 0; d < GG_DIM_N; d++) {
      int32_t gi = sg_graph_find_group (g, gg_group_name (&c, (GgDim)d));
      ck_assert_int_ge (gi, 0);
      const SgGroup *grp = &g->groups[gi];
      for (int32_t r = 0; r < (int32_t)c.world; r++) {
        int32_t t = r % 2, dd = (r / 2) % 2, rep = r / 4;
        const int32_t *inst = sg_group_instance_of (grp, r);
        for (int32_t i = 0; i < grp->n_ranks; i++) {
          int32_t want = d == GG_DIM_TP   ? (rep * 2 + dd) * 2 + i
                         : d == GG_DIM_DP ? (rep * 2 + i) * 2 + t
                                          : (i * 2 + dd) * 2 + t;
          ck_assert_msg (inst[i] == want, "rank %d group %s [%d]: %d, want %d", r, grp->name, i,
                         inst[i], want);
        }
      }
    }
    sg_graph_free (g);
  }
}
END_TEST

/* --- scale ------------------------------------------------------------------ */

START_TEST (node_count_grows_by_a_fixed_block_per_layer)
{
  GgConfig c;
  cfg_sample (&c, 256, 688, 4, 256, 2, 1);
  int64_t n[4];
  for (int L = 1; L <= 4; L++) {
    c.layers = L;
    n[L - 1] = gg_count_nodes (&c);
  }
  /* the sample (L=2) has 382 nodes */
  ck_assert_int_eq (n[1], 382);
  ck_assert_int_eq (n[1] - n[0], n[2] - n[1]);
  ck_assert_int_eq (n[3] - n[2], n[2] - n[1]);
  /* counting and writing agree */
  GgStats st;
  c.layers = 3;
  free (generate (&c, NULL, &st));
  ck_assert_int_eq (st.nodes, n[2]);
}
END_TEST

START_TEST (target_nodes_picks_the_nearest_layer_count)
{
  GgConfig c;
  cfg_sample (&c, 4096, 14336, 32, 8192, 2, 4);
  const int64_t targets[] = { 100000, 1000000 };
  for (size_t i = 0; i < G_N_ELEMENTS (targets); i++) {
    int64_t L = gg_layers_for_nodes (&c, targets[i]);
    c.layers = L;
    int64_t n = gg_count_nodes (&c);
    c.layers = L + 1;
    int64_t per = gg_count_nodes (&c) - n;
    ck_assert_int_gt (per, 100);
    ck_assert_int_le (llabs (n - targets[i]), per / 2 + 1);
  }
  ck_assert_int_eq (gg_layers_for_nodes (&c, 1), 1);
}
END_TEST

START_TEST (large_graph_loads_and_validates)
{
  GgConfig c;
  cfg_sample (&c, 512, 1376, 8, 512, 2, 2);
  c.layers = gg_layers_for_nodes (&c, 20000);
  check_mode (&c);
}
END_TEST

static Suite *
graphgen_suite (void)
{
  Suite *s = suite_create ("graphgen");
  TCase *tc = tcase_create ("samples");
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, fsdp_tiny_reproduces_the_exported_sample);
  tcase_add_test (tc, tp_sp_tiny_reproduces_the_exported_sample);
  tcase_add_test (tc, fsdp_x_tp_2d_reproduces_the_exported_sample);
  tcase_add_test (tc, larger_samples_are_reproduced);
  suite_add_tcase (s, tc);
  tc = tcase_create ("modes");
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, every_mode_loads_with_formula_collectives_and_aten_shapes);
  tcase_add_test (tc, groups_are_the_ones_of_the_given_rank);
  tcase_add_test (tc, loader_infers_the_mesh_graphgen_describes);
  tcase_add_test (tc, node_count_grows_by_a_fixed_block_per_layer);
  tcase_add_test (tc, target_nodes_picks_the_nearest_layer_count);
  tcase_add_test (tc, large_graph_loads_and_validates);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (graphgen_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}

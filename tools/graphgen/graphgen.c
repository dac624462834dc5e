/* graphgen.c: configuration checks and the top level of the generated graph
 * (header, groups, placeholders, forward, loss, backward, output, cluster).
 *
 * Mirrors python/tools/export_samples.py's output: the same top-level keys in the
 * same order (format, version, world_size, rank, groups, nodes, cluster,
 * description), the output node listing the loss then one gradient per
 * parameter in parameter order, groups in order of first use.
 * Requires: a configuration that gg_config_check() accepts.
 */
#include "graphgen-private.h"

#include <errno.h>
#include <string.h>

G_DEFINE_QUARK (gg-error-quark, gg_error)

/* Large enough for any realistic model, small enough that every product of
 * two sizes fits in int64 and every name counter in int32. */
#define GG_MAX_DIM (INT64_C (1) << 24)
#define GG_MAX_LAYERS INT64_C (2000000)
#define GG_MAX_WORLD (INT64_C (1) << 20)

void
gg_config_init (GgConfig *cfg)
{
  *cfg = (GgConfig){
    .layers = 2,
    .hidden = 256,
    .ffn = 688,
    .heads = 4,
    .seq = 256,
    .dp = 2,
    .tp = 1,
    .world = 0,
    .rank = 0,
    .tp_mode = GG_TP_SP,
    .dtype = "bfloat16",
    .cluster_gpu = "H200",
  };
}

static bool
in_range (const char *opt, int64_t v, int64_t lo, int64_t hi, GError **error)
{
  if (v >= lo && v <= hi)
    return true;
  g_set_error (error, GG_ERROR, GG_ERROR_ARGS, "--%s %" G_GINT64_FORMAT " is out of range [%"
               G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]", opt, v, lo, hi);
  return false;
}

static bool
divides (const char *what, int64_t v, const char *by_what, int64_t by, GError **error)
{
  if (v % by == 0)
    return true;
  g_set_error (error, GG_ERROR, GG_ERROR_ARGS,
               "%s (%" G_GINT64_FORMAT ") is not divisible by %s (%" G_GINT64_FORMAT ")", what, v,
               by_what, by);
  return false;
}

static int64_t
world_of (const GgConfig *cfg)
{
  return cfg->world > 0 ? cfg->world : cfg->dp * cfg->tp;
}

bool
gg_config_check (const GgConfig *cfg, GError **error)
{
  g_return_val_if_fail (cfg != NULL, false);
  if (!in_range ("layers", cfg->layers, 1, GG_MAX_LAYERS, error) ||
      !in_range ("hidden", cfg->hidden, 1, GG_MAX_DIM, error) ||
      !in_range ("ffn", cfg->ffn, 1, GG_MAX_DIM, error) ||
      !in_range ("heads", cfg->heads, 1, GG_MAX_DIM, error) ||
      !in_range ("seq", cfg->seq, 1, GG_MAX_DIM, error) ||
      !in_range ("dp", cfg->dp, 1, GG_MAX_WORLD, error) ||
      !in_range ("tp", cfg->tp, 1, GG_MAX_WORLD, error) ||
      !in_range ("world", cfg->world, 0, GG_MAX_WORLD, error))
    return false;
  if (cfg->dtype == NULL ||
      (strcmp (cfg->dtype, "bfloat16") && strcmp (cfg->dtype, "float16") &&
       strcmp (cfg->dtype, "float32"))) {
    g_set_error (error, GG_ERROR, GG_ERROR_ARGS,
                 "--dtype %s is not one of bfloat16, float16, float32",
                 cfg->dtype ? cfg->dtype : "(null)");
    return false;
  }
  if (cfg->cluster_gpu && strcmp (cfg->cluster_gpu, "H200") &&
      strcmp (cfg->cluster_gpu, "H100") && strcmp (cfg->cluster_gpu, "A100")) {
    g_set_error (error, GG_ERROR, GG_ERROR_ARGS,
                 "--cluster-gpu %s is not one of H200, H100, A100, none", cfg->cluster_gpu);
    return false;
  }
  if (cfg->tp_mode != GG_TP_SP && cfg->tp_mode != GG_TP_ALLREDUCE) {
    g_set_error (error, GG_ERROR, GG_ERROR_ARGS, "--tp-mode must be sp or allreduce");
    return false;
  }
  if (cfg->sp_norm_allreduce && (cfg->tp < 2 || cfg->tp_mode != GG_TP_SP)) {
    g_set_error (error, GG_ERROR, GG_ERROR_ARGS,
                 "--sp-norm-allreduce needs --tp > 1 with --tp-mode sp");
    return false;
  }
  int64_t mesh = cfg->dp * cfg->tp;
  if (mesh > GG_MAX_WORLD) {
    g_set_error (error, GG_ERROR, GG_ERROR_ARGS,
                 "--dp %" G_GINT64_FORMAT " x --tp %" G_GINT64_FORMAT " exceeds %" G_GINT64_FORMAT
                 " ranks", cfg->dp, cfg->tp, GG_MAX_WORLD);
    return false;
  }
  if (cfg->world > 0 && !divides ("--world", cfg->world, "--dp x --tp", mesh, error))
    return false;
  int64_t world = world_of (cfg);
  if (cfg->rank < 0 || cfg->rank >= world) {
    g_set_error (error, GG_ERROR, GG_ERROR_ARGS,
                 "--rank %" G_GINT64_FORMAT " is outside the world of %" G_GINT64_FORMAT " ranks",
                 cfg->rank, world);
    return false;
  }
  if (!divides ("--hidden", cfg->hidden, "--heads", cfg->heads, error) ||
      !divides ("--heads", cfg->heads, "--tp", cfg->tp, error) ||
      !divides ("--ffn", cfg->ffn, "--tp", cfg->tp, error))
    return false;
  if (cfg->tp > 1 && cfg->tp_mode == GG_TP_SP &&
      !divides ("--seq", cfg->seq, "--tp (sequence parallelism)", cfg->tp, error))
    return false;
  /* FSDP shards dim 0 of every tp-local weight */
  if (!divides ("--hidden (norm and wo/w2 shards)", cfg->hidden, "--dp", cfg->dp, error) ||
      !divides ("--hidden / --tp (wq/wk/wv shards)", cfg->hidden / cfg->tp, "--dp", cfg->dp,
                error) ||
      !divides ("--ffn / --tp (w1/w3 shards)", cfg->ffn / cfg->tp, "--dp", cfg->dp, error))
    return false;
  return true;
}

const char *
gg_group_name (const GgConfig *cfg, GgDim dim)
{
  int64_t rep = world_of (cfg) / (cfg->dp * cfg->tp);
  int64_t size[GG_DIM_N] = { cfg->tp, cfg->dp, rep };
  static const char *const names[GG_DIM_N] = { "1", "2", "3" };
  int n_par = (size[0] > 1) + (size[1] > 1) + (size[2] > 1);
  if (size[dim] <= 1)
    return NULL;
  return n_par == 1 ? "0" : names[dim];
}

void
gg_expected_collectives (const GgConfig *cfg, int64_t out[GG_COLL_N][GG_DIM_N])
{
  memset (out, 0, sizeof (int64_t) * GG_COLL_N * GG_DIM_N);
  int64_t L = cfg->layers;
  int64_t rep = world_of (cfg) / (cfg->dp * cfg->tp);
  if (cfg->dp > 1) {
    out[GG_COLL_AG][GG_DIM_DP] = 9 * L; /* every weight before use */
    out[GG_COLL_RS][GG_DIM_DP] = 9 * L; /* every weight gradient */
  }
  if (cfg->tp > 1 && cfg->tp_mode == GG_TP_SP) {
    out[GG_COLL_AG][GG_DIM_TP] = 4 * L; /* 2 forward (norm outputs), 2 backward */
    out[GG_COLL_RS][GG_DIM_TP] = 4 * L; /* 2 forward (block outputs), 2 backward */
    if (cfg->sp_norm_allreduce)
      out[GG_COLL_AR][GG_DIM_TP] = 2 * L; /* the two norm-weight gradients */
  } else if (cfg->tp > 1) {
    out[GG_COLL_AR][GG_DIM_TP] = 4 * L;
  }
  if (rep > 1)
    out[GG_COLL_AR][GG_DIM_REP] = 9 * L;
}

static void
w_group (GgGen *g, const char *name, int64_t first, int64_t n, int64_t stride, bool *any)
{
  if (!name)
    return;
  gg_w (g, *any ? ", \"" : "\"");
  *any = true;
  gg_w (g, name);
  gg_w (g, "\": {\"ranks\": [");
  for (int64_t i = 0; i < n; i++) {
    if (i)
      gg_w (g, ", ");
    gg_w_i64 (g, first + i * stride);
  }
  gg_w (g, "]}");
}

static void
w_header (GgGen *g, int64_t world)
{
  const GgConfig *c = g->cfg;
  int64_t r = c->rank, mesh = g->dp * g->tp;
  gg_w (g, "{\"format\": \"schedgraph.graph\", \"version\": 1, \"world_size\": ");
  gg_w_i64 (g, world);
  gg_w (g, ", \"rank\": ");
  gg_w_i64 (g, r);
  gg_w (g, ", \"groups\": {");
  bool any = false;
  /* first use: the dp all_gather of the first norm weight, then tp, then
   * the replica all_reduce of the first gradient */
  w_group (g, g->g_dp, r / mesh * mesh + r % g->tp, g->dp, g->tp, &any);
  w_group (g, g->g_tp, r / g->tp * g->tp, g->tp, 1, &any);
  w_group (g, g->g_rep, r % mesh, g->rep, mesh, &any);
  gg_w (g, "}, \"nodes\": [");
}

static void
w_trailer (GgGen *g, int64_t world)
{
  const GgConfig *c = g->cfg;
  gg_w (g, "\n]");
  if (c->cluster_gpu) {
    gg_w (g, ", \"cluster\": {\"gpus_per_node\": ");
    gg_w_i64 (g, MIN (world, 8));
    gg_w (g, ", \"nodes\": ");
    gg_w_i64 (g, (world + 7) / 8);
    gg_w (g, ", \"gpu\": \"");
    gg_w (g, c->cluster_gpu);
    gg_w (g, "\"}");
  }
  char *d = g_strdup_printf (
      "llama-like L=%" G_GINT64_FORMAT " H=%" G_GINT64_FORMAT " F=%" G_GINT64_FORMAT
      " heads=%" G_GINT64_FORMAT " S=%" G_GINT64_FORMAT " dp=%" G_GINT64_FORMAT
      " tp=%" G_GINT64_FORMAT ", fwd+bwd joint graph, written by graphgen (tp-mode %s%s, %s, "
      "world %" G_GINT64_FORMAT ")",
      c->layers, c->hidden, c->ffn, c->heads, c->seq, c->dp, c->tp,
      c->tp_mode == GG_TP_SP ? "sp" : "allreduce",
      c->tp_mode == GG_TP_SP && c->sp_norm_allreduce ? " + norm-grad all_reduce" : "", c->dtype,
      world);
  gg_w (g, ", \"description\": \"");
  gg_w (g, d);
  gg_w (g, "\"}\n");
  g_free (d);
}

static void
gen_init (GgGen *g, const GgConfig *c, FILE *out)
{
  memset (g, 0, sizeof *g);
  g->cfg = c;
  g->out = out;
  g->first_node = true;
  g->counter[B_POW] = 1; /* Python builtins: fx starts them at _1 */
  g->counter[B_SUM] = 1;
  g->dp = c->dp;
  g->tp = c->tp;
  g->rep = world_of (c) / (c->dp * c->tp);
  g->sp = c->tp > 1 && c->tp_mode == GG_TP_SP;
  g->ar = c->tp > 1 && c->tp_mode == GG_TP_ALLREDUCE;
  g->S = c->seq;
  g->Sl = g->sp ? c->seq / c->tp : c->seq;
  g->H = c->hidden;
  g->Hl = c->hidden / c->tp;
  g->Fl = c->ffn / c->tp;
  g->nhl = c->heads / c->tp;
  g->hd = c->hidden / c->heads;
  g->dt = c->dtype;
  g->f32 = strcmp (c->dtype, "float32") == 0;
  g->g_tp = gg_group_name (c, GG_DIM_TP);
  g->g_dp = gg_group_name (c, GG_DIM_DP);
  g->g_rep = gg_group_name (c, GG_DIM_REP);
  if (out) {
    g->cap = (size_t)1 << 20;
    g->buf = g_malloc (g->cap);
  }
}

static void
placeholders (GgGen *g)
{
  GgMeta x = gg_meta2 (g->Sl, g->H, g->dt);
  gg_placeholder (g, 0, &x);
  int64_t dp = g->dp;
  GgMeta norm = { .nd = 1, .sh = { g->H / dp }, .st = { 1 }, .dt = g->dt };
  GgMeta col = gg_meta2 (g->Hl / dp, g->H, g->dt);   /* wq, wk, wv */
  GgMeta wo = gg_meta2 (g->H / dp, g->Hl, g->dt);
  GgMeta up = gg_meta2 (g->Fl / dp, g->H, g->dt);    /* w1, w3 */
  GgMeta down = gg_meta2 (g->H / dp, g->Fl, g->dt);  /* w2 */
  const GgMeta *shapes[9] = { &norm, &col, &col, &col, &wo, &norm, &up, &up, &down };
  for (int64_t l = 0; l < g->cfg->layers; l++)
    for (int j = 0; j < 9; j++)
      gg_placeholder (g, (int32_t)(1 + 9 * l + j), shapes[j]);
}

static void
output (GgGen *g, GgRef loss, const GgLayerGrads *grads)
{
  g->stats.nodes++;
  if (!g->out)
    return;
  gg_w (g, ",\n{\"name\": \"output\", \"op\": \"output\", \"target\": \"output\", \"args\": [[");
  gg_w_ref (g, loss);
  for (int64_t l = 0; l < g->cfg->layers; l++)
    for (int j = 0; j < 9; j++) {
      gg_w (g, ", ");
      gg_w_ref (g, grads[l].g[j]);
    }
  gg_w (g, "]], \"kwargs\": {}}");
}

bool
gg_write (const GgConfig *cfg, FILE *out, GgStats *stats, GError **error)
{
  if (!gg_config_check (cfg, error))
    return false;
  GgGen g;
  gen_init (&g, cfg, out);
  int64_t world = world_of (cfg), L = cfg->layers;
  GgLayerSaved *saved = g_new0 (GgLayerSaved, L);
  GgLayerGrads *grads = g_new0 (GgLayerGrads, L);

  if (out)
    w_header (&g, world);
  placeholders (&g);
  GgRef h = { B_ARG, 0 };
  for (int64_t l = 0; l < L; l++)
    h = gg_forward_layer (&g, l, h, &saved[l]);
  GgRef grad;
  GgRef loss = gg_loss (&g, h, &grad);
  for (int64_t l = L - 1; l >= 0; l--)
    grad = gg_backward_layer (&g, l, &saved[l], grad, &grads[l]);
  output (&g, loss, grads);
  if (out) {
    w_trailer (&g, world);
  }
  g_free (saved);
  g_free (grads);
  bool ok = true;
  if (out) {
    /* flush: emit.c flushes on overflow only */
    if (g.len > 0 && fwrite (g.buf, 1, g.len, out) != g.len)
      g.failed = true;
    if (fflush (out) != 0 || ferror (out))
      g.failed = true;
    g_free (g.buf);
    if (g.failed) {
      g_set_error (error, GG_ERROR, GG_ERROR_IO, "writing the graph failed: %s",
                   g_strerror (errno));
      ok = false;
    }
  }
  if (stats)
    *stats = g.stats;
  return ok;
}

int64_t
gg_count_nodes (const GgConfig *cfg)
{
  GgStats st = { 0 };
  if (!gg_write (cfg, NULL, &st, NULL))
    return -1;
  return st.nodes;
}

int64_t
gg_layers_for_nodes (const GgConfig *cfg, int64_t target_nodes)
{
  GgConfig c = *cfg;
  c.layers = 1;
  int64_t n1 = gg_count_nodes (&c);
  c.layers = 2;
  int64_t n2 = gg_count_nodes (&c);
  if (n1 < 0 || n2 <= n1)
    return 1;
  int64_t per = n2 - n1, fixed = n1 - per;
  int64_t L = (target_nodes - fixed + per / 2) / per;
  return CLAMP (L, 1, GG_MAX_LAYERS);
}

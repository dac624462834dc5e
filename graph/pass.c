/* pass.c: configuration defaults, the pass runner and the IR dump.
 *
 * Mirrors the pass managers of QBE and Mesa: passes share one signature
 * (a driver's steps one more argument, its state), the runner times each
 * one, runs the validator after each when asked (on by default in debug
 * builds: the CLI sets cfg->validate_between), checks that the analysis
 * kept with the graph still describes it, and dumps the IR after a named
 * pass. The dump is diffable: fixed field order,
 * integers for bytes, no pointers, no hash order.
 *
 * Requires: nothing. Invalidates: whatever the passes it runs invalidate.
 */
#include "graph.h"

#include <string.h>

void
sg_config_init (SgConfig *cfg)
{
  g_return_if_fail (cfg != NULL);
  *cfg = (SgConfig){
    .cluster = NULL,
    .profile = NULL,
    .decompose = SG_DECOMPOSE_AUTO,
    .reorder = true,
    .max_in_flight_bytes = 0,
    .max_peak_increase = 0.05,
    .prefetch_limit = 0,
    .exact = false,
    .bucket = true,
    .bucket_cap_bytes = (uint64_t)256 << 20,
    .bucket_mode = SG_BUCKET_MODE_AUTO,
    .bucket_lowering = SG_BUCKET_LOWERING_AUTO,
    .validate_between = false,
    .dump_pass = NULL,
    .dump_file = NULL,
    .pool = NULL,
  };
}

static const char *const decompose_modes[] = {
  [SG_DECOMPOSE_AUTO] = "auto",
  [SG_DECOMPOSE_OFF] = "off",
  [SG_DECOMPOSE_ALL] = "all",
  [SG_DECOMPOSE_ALL_GATHER] = "all-gather",
};

const char *
sg_decompose_mode_name (SgDecomposeMode mode)
{
  return (unsigned)mode < G_N_ELEMENTS (decompose_modes) ? decompose_modes[mode] : "auto";
}

bool
sg_decompose_mode_from_name (const char *name, SgDecomposeMode *out)
{
  for (size_t i = 0; name && i < G_N_ELEMENTS (decompose_modes); i++)
    if (strcmp (name, decompose_modes[i]) == 0) {
      *out = (SgDecomposeMode)i;
      return true;
    }
  return false;
}

const char *
sg_bucket_mode_name (SgBucketMode mode)
{
  return mode == SG_BUCKET_MODE_PER_LAYER ? "per-layer" : "auto";
}

bool
sg_bucket_mode_from_name (const char *name, SgBucketMode *out)
{
  for (int m = SG_BUCKET_MODE_AUTO; m <= SG_BUCKET_MODE_PER_LAYER; m++)
    if (g_strcmp0 (name, sg_bucket_mode_name ((SgBucketMode)m)) == 0) {
      *out = (SgBucketMode)m;
      return true;
    }
  return false;
}

static const char *const lowering_names[] = { "auto", "flat", "grouped" };

const char *
sg_bucket_lowering_name (SgBucketLowering lowering)
{
  g_return_val_if_fail ((size_t)lowering < G_N_ELEMENTS (lowering_names), "auto");
  return lowering_names[lowering];
}

bool
sg_bucket_lowering_from_name (const char *name, SgBucketLowering *out)
{
  for (size_t l = 0; l < G_N_ELEMENTS (lowering_names); l++)
    if (g_strcmp0 (name, lowering_names[l]) == 0) {
      *out = (SgBucketLowering)l;
      return true;
    }
  return false;
}

static bool
dump_wanted (const SgConfig *cfg, const char *pass)
{
  return cfg->dump_pass && (strcmp (cfg->dump_pass, pass) == 0 || strcmp (cfg->dump_pass, "all") == 0);
}

bool
sg_graph_validate_pass (SgGraph *g, const SgConfig *cfg, GError **error)
{
  return sg_graph_validate_with (g, cfg->pool, error);
}

/* The validator (on cfg->pool) and the kept analysis's check after pass
 * @p. */
static bool
check_after (const SgGraph *g, const SgConfig *cfg, const SgPass *p, GError **error)
{
  if (!sg_graph_validate_with (g, cfg->pool, error)
      || (g->kept && g->kept_class->check && !g->kept_class->check (g, g->kept, error))) {
    g_prefix_error (error, "invalid IR after %s '%s' (a schedgraph bug): ",
                    p->run ? "pass" : "step", p->name);
    return false;
  }
  return true;
}

bool
sg_pass_run (SgGraph **g, const SgConfig *cfg, const SgPass *passes, size_t n_passes,
             gpointer data, SgPassTime *times, GError **error)
{
  g_return_val_if_fail (g != NULL && cfg != NULL, false);
  g_return_val_if_fail (passes != NULL || n_passes == 0, false);
  g_return_val_if_fail (error == NULL || *error == NULL, false);
  for (size_t i = 0; i < n_passes; i++) {
    const SgPass *p = &passes[i];
    g_return_val_if_fail ((p->run != NULL) != (p->step != NULL), false);
    g_return_val_if_fail (p->step || *g, false);
    gint64 t0 = g_get_monotonic_time ();
    bool ok = p->run ? p->run (*g, cfg, error) : p->step (g, cfg, data, error);
    if (times)
      times[i] = (SgPassTime){ p->name, (double)(g_get_monotonic_time () - t0) / 1000.0 };
    if (!ok) {
      if (p->run)
        g_prefix_error (error, "%s: ", p->name);
      return false;
    }
    if (!*g)
      continue;
    if (cfg->validate_between && !p->unchecked && !check_after (*g, cfg, p, error))
      return false;
    if (dump_wanted (cfg, p->name)) {
      FILE *out = cfg->dump_file ? cfg->dump_file : stderr;
      fprintf (out, "# after %s\n", p->name);
      sg_graph_dump (*g, out);
    }
  }
  return true;
}

static void
dump_meta (const SgGraph *g, const SgMeta *m, FILE *out)
{
  if (m->ndim < 0) {
    fputs ("-", out);
    return;
  }
  const int64_t *sh = sg_meta_shape (g, m), *st = sg_meta_stride (g, m);
  fprintf (out, "%s[", sg_dtype_name (m->dtype));
  for (int32_t d = 0; d < m->ndim; d++)
    fprintf (out, "%s%" G_GINT64_FORMAT, d ? "," : "", sh[d]);
  fputs ("]/[", out);
  for (int32_t d = 0; d < m->ndim; d++)
    fprintf (out, "%s%" G_GINT64_FORMAT, d ? "," : "", st[d]);
  fputs ("]", out);
}

void
sg_graph_dump (const SgGraph *g, FILE *out)
{
  g_return_if_fail (g != NULL && out != NULL);
  fprintf (out, "graph %s: world_size %d rank %d, %d nodes, %d groups\n", g->source,
           g->world_size, g->rank, g->n_nodes, g->n_groups);
  for (int32_t i = 0; i < g->n_groups; i++) {
    const SgGroup *grp = &g->groups[i];
    fprintf (out, "group %d '%s' ranks [", i, grp->name);
    for (int32_t r = 0; r < grp->n_ranks; r++)
      fprintf (out, "%s%d", r ? "," : "", grp->ranks[r]);
    fprintf (out, "] instances %d\n", grp->n_instances);
  }
  for (SgNodeId id = 0; id < g->n_nodes; id++) {
    const SgNode *n = &g->nodes[id];
    fprintf (out, "%d %s = %s(", id, n->name, sg_op_name (n->kind));
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, id, &k);
    for (uint32_t j = 0; j < k; j++)
      fprintf (out, "%s%s", j ? ", " : "", g->nodes[in[j]].name);
    fputs (") : ", out);
    if (n->n_tuple) {
      fputs ("(", out);
      for (uint32_t t = 0; t < n->n_tuple; t++) {
        if (t)
          fputs (", ", out);
        dump_meta (g, sg_node_tuple_meta (g, id, t), out);
      }
      fputs (")", out);
    } else {
      dump_meta (g, &n->meta, out);
    }
    if (n->group >= 0)
      fprintf (out, " group '%s' size %d", g->groups[n->group].name, n->group_size);
    if (n->reduce != SG_REDUCE_NONE)
      fprintf (out, " reduce %s", sg_reduce_name (n->reduce));
    if (n->getitem_index >= 0)
      fprintf (out, " index %d", n->getitem_index);
    if (n->kind == SG_OP_UNKNOWN)
      fprintf (out, " target %s", n->target);
    if (!isnan (n->cost_us))
      fprintf (out, " cost_us %.3f", n->cost_us);
    if (n->sm_count)
      fprintf (out, " sm_count %d", n->sm_count);
    if (n->est_src != SG_COST_NONE)
      fprintf (out, " est_us %.3f (%s)", n->est_us, sg_cost_source_name (n->est_src));
    fputc ('\n', out);
  }
}

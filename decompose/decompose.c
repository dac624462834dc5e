/* decompose.c: the decomposition pass (sg_decompose_pass) and its
 * statistics.
 *
 * Finds the sites (find.c), judges them (judge.c), commits the chosen
 * rewrites in one batch (emit.c through the rewrite API), costs the new
 * nodes and records what it saw and chose for the report and the summary
 * (report.c); finding the sites, their bounds and their records run in
 * tasks on cfg->pool. Runs after estimate and before schedule: the scheduler
 * orders the ring steps like any other collectives.
 * Mirrors: XLA's collective-matmul decomposition pass and PyTorch's
 * micro-pipeline TP pass (torch/_inductor/fx_passes/micro_pipeline_tp.py),
 * chosen by simulation instead of by pattern alone.
 * Requires: estimate (est_us, the cost model); a topological id order.
 * Invalidates: node ids, users; implicit edges of removed nodes are
 * dropped (the pass runs before the scheduler records any).
 */
#include "decompose-private.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK (sg-decompose-error-quark, sg_decompose_error)

static void
stats_free (gpointer p)
{
  SgDecomposeStats *st = p;
  g_free (st->names);
  g_free (st->sites);
  g_free (st);
}

const SgDecomposeStats *
sg_decompose_stats (const SgGraph *g)
{
  g_return_val_if_fail (g, NULL);
  return g->decompose_stats_free == stats_free ? g->decompose_stats : NULL;
}

static void
attach (SgGraph *g, SgDecomposeStats *st)
{
  if (g->decompose_stats && g->decompose_stats_free)
    g->decompose_stats_free (g->decompose_stats);
  g->decompose_stats = st;
  g->decompose_stats_free = stats_free;
}

/* Sites per task of record_task. */
#define SITES_PER_TASK 1024

typedef struct {
  const SgGraph *g;
  const SgSite *sites;
  int32_t n;
  const SgSiteChoice *choice;
  SgSiteInfo *info;
  size_t *at;  /* per task: its names' bytes, then where they start */
  char *names; /* every site's name and group, NUL after each */
} Recording;

static const char *
group_name (const SgGraph *g, const SgNode *c)
{
  return c->group >= 0 ? g->groups[c->group].name : "";
}

/* The bytes of task @t's names and groups. */
static void
measure_task (gpointer data, int32_t t, int32_t worker)
{
  (void)worker;
  Recording *r = data;
  size_t bytes = 0;
  for (int32_t i = t * SITES_PER_TASK; i < MIN (r->n, (t + 1) * SITES_PER_TASK); i++) {
    const SgNode *c = &r->g->nodes[r->sites[i].coll];
    bytes += strlen (c->name) + strlen (group_name (r->g, c)) + 2;
  }
  r->at[t] = bytes;
}

static void
record_task (gpointer data, int32_t t, int32_t worker)
{
  (void)worker;
  const Recording *r = data;
  const SgGraph *g = r->g;
  char *at = r->names + r->at[t];
  for (int32_t i = t * SITES_PER_TASK; i < MIN (r->n, (t + 1) * SITES_PER_TASK); i++) {
    const SgSite *s = &r->sites[i];
    const SgNode *c = &g->nodes[s->coll];
    SgSiteInfo *info = &r->info[i];
    info->name = at;
    at = g_stpcpy (at, c->name) + 1;
    info->group = at;
    at = g_stpcpy (at, group_name (g, c)) + 1;
    info->kind = s->kind;
    info->reason = s->reason;
    info->n_mm = s->kind == SG_SITE_ALL_GATHER_MM ? s->n_mm : s->n_leaves;
    info->n_whole = s->n_whole;
    info->form = r->choice[i].form;
    info->exposed_us = r->choice[i].exposed_us;
    info->gain_us = r->choice[i].gain_us;
    info->bound_us = r->choice[i].bound_us;
  }
}

/* What the statistics keep of the sites (names resolved before the
 * commit renumbers, copied into one block), in tasks on @pool. */
static void
record_sites (const SgGraph *g, SgPool *pool, const SgSite *sites, int32_t n,
              const SgSiteChoice *choice, SgDecomposeStats *st)
{
  st->n_sites = n;
  st->sites = g_new0 (SgSiteInfo, (size_t)n + 1);
  int32_t tasks = (n + SITES_PER_TASK - 1) / SITES_PER_TASK;
  Recording r = { g, sites, n, choice, st->sites, g_new (size_t, (size_t)tasks + 1), NULL };
  sg_pool_run (pool, tasks, measure_task, &r);
  size_t bytes = 0;
  for (int32_t t = 0; t < tasks; t++) {
    size_t b = r.at[t];
    r.at[t] = bytes;
    bytes += b;
  }
  st->names = r.names = g_new (char, bytes + 1);
  sg_pool_run (pool, tasks, record_task, &r);
  g_free (r.at);
  for (int32_t i = 0; i < n; i++) {
    st->candidates += sites[i].reason >= SG_SITE_OFF || sites[i].reason == SG_SITE_DECOMPOSED;
    st->decomposed += sites[i].reason == SG_SITE_DECOMPOSED;
  }
}

bool
sg_decompose_pass (SgGraph *g, const SgConfig *cfg, GError **error)
{
  g_return_val_if_fail (g, false);
  SgConfig dflt;
  if (!cfg) {
    sg_config_init (&dflt);
    cfg = &dflt;
  }
  SgDecomposeStats *st = g_new0 (SgDecomposeStats, 1);
  st->mode = cfg->exact ? SG_DECOMPOSE_OFF : cfg->decompose;
  st->nodes_before = st->nodes_after = g->n_nodes;
  sg_graph_fill_users (g);
  int32_t n = 0, cands = 0;
  SgSite *sites = sg_sites_find_pool (g, cfg->pool, &n);
  for (int32_t i = 0; i < n; i++)
    cands += sites[i].reason == SG_SITE_DECOMPOSED;
  g_autofree SgSiteChoice *choice = g_new0 (SgSiteChoice, (size_t)n + 1);
  for (int32_t i = 0; i < n; i++)
    choice[i].bound_us = NAN;
  bool ok = true;
  const SgCostModel *cm = sg_graph_cost_model (g);
  for (int32_t i = 0; i < n; i++) {
    const bool off = st->mode == SG_DECOMPOSE_OFF
                     || (st->mode == SG_DECOMPOSE_ALL_GATHER && sites[i].kind != SG_SITE_ALL_GATHER_MM);
    if (off && sites[i].reason == SG_SITE_DECOMPOSED) {
      sites[i].reason = SG_SITE_OFF;
      cands--;
    }
  }
  if (cands > 0 && !cm) {
    g_set_error (error, SG_DECOMPOSE_ERROR, SG_DECOMPOSE_ERROR_COST,
                 "decompose: the graph has no cost model (run the estimate pass first)");
    ok = false;
  }
  SgRewrite *rw = sg_rewrite_new (g);
  if (ok && cands > 0 && cm)
    ok = sg_decompose_judge (g, cfg, sites, n, choice, st, rw, error);
  if (ok)
    record_sites (g, cfg->pool, sites, n, choice, st);
  if (ok && st->decomposed > 0) {
    /* the judge left the chosen rewrites in rw */
    ok = sg_rewrite_commit (rw, error);
    if (ok)
      sg_cost_new_nodes (cm, g, NULL, 0, cfg->pool);
    else
      g_prefix_error (error, "decompose: ");
    st->nodes_after = g->n_nodes;
  }
  sg_rewrite_free (rw);
  sg_sites_free (sites, n);
  if (!ok) {
    stats_free (st);
    return false;
  }
  attach (g, st);
  return true;
}

/* codegen.c: assembles the plan (sg_codegen_plan, codegen.h).
 *
 * Mirrors: Inductor's wrapper codegen (frees at last use, outputs kept).
 * Requires: lower.c's values (step 1), emit.c's layout and operands (step
 * 2a). Invalidates: nothing (the graph is read only).
 *
 * Step 3: buffer lifetimes in pre-FREE instruction indices (producer to
 * last use; a collective's operands extended to its WAIT_EVENT, since the
 * comm stream may still read or write them until then; placeholders and
 * outputs live for the whole step), a FREE after each buffer's last use
 * (ascending buffer id), indices renumbered; then emit.c writes every
 * instruction once at its final index, FREEs included (step 2b). Step 4:
 * groups, inputs/outputs, predictions, then the validator as a final
 * check, with the offsets (memplan.c) placed on cfg->pool beside its rules
 * that read none (sg_plan_validate_with). The pool also runs emit.c's
 * passes over nodes.
 */
#include "codegen-private.h"

#include <string.h>

G_DEFINE_QUARK (sg-codegen-error-quark, sg_codegen_error)

/* Touches operands @o at pre-FREE index @i: a buffer's first and last. */
static inline void
touch (SgLower *l, const SgOperands *o, int32_t i)
{
  SgPlanBuffer *bufs = l->buffers;
  for (int32_t side = 0; side < 2; side++) {
    const int32_t *v = side ? o->out : o->in, n = side ? o->n_out : o->n_in;
    for (int32_t j = 0; j < n; j++) {
      int32_t b = v[j] >= 0 ? l->values[v[j]].buffer : -1;
      if (b >= 0) {
        if (bufs[b].first_ins < 0)
          bufs[b].first_ins = i;
        if (bufs[b].last_ins < i)
          bufs[b].last_ins = i;
      }
    }
  }
}

/* Step 3: lifetimes in pre-FREE indices (from step 2a's layout and
 * operands: a KERNEL's or COLLECTIVE's own, a WAIT_EVENT's collective's),
 * then where the FREEs go (l->free_before, l->dying, l->n_ins), then the
 * final indices. @keep marks buffers that must live to the end. */
static void
place_frees (SgLower *l, const bool *keep)
{
  int32_t nb = l->n_buffers, ni = l->n_pre;
  SgPlanBuffer *bufs = l->buffers;
  const int32_t END = INT32_MAX;
  for (int32_t b = 0; b < nb; b++) {
    bufs[b].first_ins = keep[b] && l->pinned[b] ? 0 : -1;
    bufs[b].last_ins = keep[b] ? END : -1;
  }
  /* in ascending index: main_ins grows with the id, the end's waits last */
  for (SgNodeId id = 0; id < l->g->n_nodes; id++)
    if (l->main_ins[id] >= 0)
      touch (l, &l->ops[l->wait_for[id] >= 0 ? l->wait_for[id] : id], l->main_ins[id]);
  const int32_t end_first = ni - (int32_t)l->end_waits->len;
  for (guint k = 0; k < l->end_waits->len; k++)
    touch (l, &l->ops[g_array_index (l->end_waits, SgNodeId, k)], end_first + (int32_t)k);
  /* FREEs after each instruction, ascending buffer id (counting sort) */
  int32_t *cnt = l->free_before = g_new0 (int32_t, (size_t)ni + 2);
  for (int32_t b = 0; b < nb; b++) {
    if (bufs[b].first_ins < 0) /* never written nor read: lives at 0 only */
      bufs[b].first_ins = bufs[b].last_ins = 0;
    if (bufs[b].last_ins != END)
      cnt[bufs[b].last_ins + 1]++;
  }
  for (int32_t i = 0; i < ni; i++)
    cnt[i + 1] += cnt[i];
  l->dying = g_new (int32_t, (size_t)cnt[ni] + 1);
  g_autofree int32_t *fill = g_memdup2 (cnt, sizeof (int32_t) * ((size_t)ni + 1));
  for (int32_t b = 0; b < nb; b++)
    if (bufs[b].last_ins != END)
      l->dying[fill[bufs[b].last_ins]++] = b;
  /* Instruction i goes to i + cnt[i], its FREEs after it (step 2b). */
  l->n_ins = ni + cnt[ni];
  int32_t end = l->n_ins ? l->n_ins - 1 : 0;
  for (int32_t b = 0; b < nb; b++) {
    int32_t first = ni ? MIN (bufs[b].first_ins, ni - 1) : 0, last = bufs[b].last_ins;
    bufs[b].first_ins = ni ? first + cnt[first] : 0;
    bufs[b].last_ins = last == END ? end : (ni ? last + cnt[last] : 0);
  }
}

/* The output node's values, in order (-1 for what is not a tensor). */
static void
collect_outputs (SgLower *l, GArray *outputs)
{
  const SgGraph *g = l->g;
  if (g->output == SG_NO_NODE)
    return;
  SgNodeId out = g->output;
  const SgArg *first = sg_node_arg (g, out, 0);
  uint32_t n = 1;
  const SgArg *list = first && first->type == SG_ARG_LIST ? sg_arg_items (g, first, &n) : first;
  for (uint32_t i = 0; i < n; i++) {
    SgNodeId r = list ? sg_arg_node (g, out, &list[i]) : SG_NO_NODE;
    int32_t v = r != SG_NO_NODE && (!g->nodes[r].n_tuple || list == first) ? l->nval[r] : -1;
    g_array_append_val (outputs, v);
  }
}

static void
fill_groups (SgPlan *p, const SgGraph *g)
{
  p->world_size = g->world_size;
  p->n_groups = g->n_groups;
  p->groups = g_new0 (SgPlanGroup, (size_t)g->n_groups + 1);
  for (int32_t i = 0; i < g->n_groups; i++) {
    const SgGroup *gr = &g->groups[i];
    p->groups[i].name = g_strdup (gr->name);
    p->groups[i].n_ranks = gr->n_ranks;
    p->groups[i].n_instances = gr->n_instances;
    p->groups[i].partition =
      g_memdup2 (gr->partition, sizeof (int32_t) * (size_t)gr->n_ranks * (size_t)gr->n_instances);
  }
  p->n_streams = 1 + g->n_groups;
}

/* Frees the lowering's per-node arrays. */
static void
lower_clear (SgLower *l)
{
  g_clear_pointer (&l->nval, g_free);
  g_clear_pointer (&l->tval, g_free);
  g_clear_pointer (&l->main_ins, g_free);
  g_clear_pointer (&l->coll_done, g_free);
  g_clear_pointer (&l->coll_waited, g_free);
  g_clear_pointer (&l->wait_for, g_free);
  g_clear_pointer (&l->ops, g_free);
  g_clear_pointer (&l->end_waits, g_array_unref);
  g_clear_pointer (&l->free_before, g_free);
  g_clear_pointer (&l->dying, g_free);
  g_clear_error (&l->layout_error);
  g_clear_pointer (&l->pred_row, g_free);
  g_clear_pointer (&l->group_buf, g_free);
  g_clear_pointer (&l->val_node, g_free);
  g_clear_pointer (&l->val_elem, g_free);
  g_clear_pointer (&l->buf_node, g_free);
  g_clear_pointer (&l->buf_elem, g_free);
  sg_elision_clear (&l->el);
  g_mutex_clear (&l->strings_lock);
}

static void
pool_run (gpointer pool, int32_t n_tasks, SgPlanTaskFunc fn, gpointer ctx)
{
  sg_pool_run (pool, n_tasks, fn, ctx);
}

void
sg_codegen_plan_runner (const SgConfig *cfg, SgPlanRunner *out)
{
  SgPool *pool = cfg ? cfg->pool : NULL;
  *out = (SgPlanRunner){ pool_run, pool, sg_pool_size (pool) };
}

typedef struct {
  SgPlan *p;
  const bool *pinned;
} Placing;

static void
place_buffers (gpointer ctx, int32_t task, int32_t worker)
{
  (void)task, (void)worker;
  Placing *pl = ctx;
  sg_codegen_pack_buffers (pl->p, pl->pinned);
}

bool
sg_codegen_plan (const SgGraph *g, const SgConfig *cfg, const SgSimResult *pred,
                 const char *graph_name, const char *options_text, SgPlan **out, GError **error)
{
  g_return_val_if_fail (g != NULL && out != NULL, false);
  *out = NULL;
  size_t nn = (size_t)g->n_nodes + 1;
  SgLower l = { 0 };
  l.g = g;
  l.pred = pred;
  l.pool = cfg ? cfg->pool : NULL;
  g_mutex_init (&l.strings_lock);
  l.error = error;
  l.nval = g_new (int32_t, nn);
  l.tval = g_new (int32_t, (size_t)g->tuple_metas->len + 1);
  l.main_ins = g_new (int32_t, nn);
  l.coll_done = g_new (int32_t, nn);
  l.coll_waited = g_new0 (bool, nn);
  l.pred_row = g_new (int32_t, nn);
  l.group_buf = g_new (int32_t, nn);
  l.wait_for = g_new (int32_t, nn);
  l.ops = g_new (SgOperands, nn); /* read where main_ins says an instruction is */
  l.end_waits = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  for (size_t i = 0; i < nn; i++)
    l.nval[i] = l.main_ins[i] = l.coll_done[i] = l.pred_row[i] = l.group_buf[i] = l.wait_for[i]
        = -1;
  sg_graph_elision (g, &l.el);
  for (guint i = 0; i < g->tuple_metas->len; i++)
    l.tval[i] = -1;
  if (pred)
    for (int32_t r = 0; r < pred->n_rows; r++)
      if (pred->rows[r].node >= 0 && pred->rows[r].node < g->n_nodes)
        l.pred_row[pred->rows[r].node] = r;
  /* Sized once for what the lowering makes (a value per node or tuple
   * element; more grows them): arrays grown by doubling leave their old
   * copies as holes in the heap, which raised the run's peak RSS. The
   * instructions are allocated once their number is known (step 3). */
  l.cap_values = (int32_t)(nn + g->tuple_metas->len);
  l.values = g_new (SgPlanValue, (size_t)l.cap_values);
  l.val_node = g_new (int32_t, (size_t)l.cap_values);
  l.val_elem = g_new (int32_t, (size_t)l.cap_values);
  GArray *outputs = g_array_new (FALSE, FALSE, sizeof (int32_t));
  SgPlan *p = sg_plan_new ();
  l.plan = p;
  bool ok = g->output != SG_NO_NODE;
  if (!ok)
    g_set_error (error, SG_CODEGEN_ERROR, SG_CODEGEN_ERROR_GRAPH,
                 "%s: the graph has no output node",
                 g->source ? g->source : "graph");
  ok = ok && sg_lower_values (&l);
  if (ok) {
    sg_lower_lay_out (&l);
    collect_outputs (&l, outputs);
    g_autofree bool *keep = g_new0 (bool, (size_t)l.n_buffers + 1);
    for (int32_t b = 0; b < l.n_buffers; b++)
      keep[b] = l.pinned[b];
    for (guint i = 0; i < outputs->len; i++) {
      int32_t v = g_array_index (outputs, int32_t, i);
      int32_t b = v >= 0 ? l.values[v].buffer : -1;
      if (b >= 0)
        keep[b] = true;
    }
    place_frees (&l, keep);
    ok = sg_lower_emit (&l);
  }
  /* hand everything to the plan (it frees it on failure too) */
  p->n_values = l.n_values;
  p->values = g_steal_pointer (&l.values);
  p->n_buffers = l.n_buffers;
  p->buffers = g_steal_pointer (&l.buffers);
  p->n_ins = l.n_ins;
  p->ins = g_steal_pointer (&l.ins);
  p->outputs = sg_lower_steal_ids (outputs, &p->n_outputs);
  lower_clear (&l); /* before the packer's and the validator's arrays */
  if (ok) {
    p->n_events = l.n_events;
    fill_groups (p, g);
    p->graph = g_strdup (graph_name ? graph_name : (g->source ? g->source : ""));
    p->options = g_strdup (options_text ? options_text : "");
    GArray *inputs = g_array_new (FALSE, FALSE, sizeof (int32_t));
    for (int32_t v = 0; v < p->n_values; v++)
      if (p->values[v].init == SG_INIT_INPUT)
        g_array_append_val (inputs, v);
    p->inputs = sg_lower_steal_ids (inputs, &p->n_inputs);
    if (pred) {
      p->pred.step_us = pred->step_us;
      p->pred.compute_us = pred->compute_us;
      p->pred.comm_us = pred->comm_us;
      p->pred.exposed_us = pred->exposed_us;
      p->pred.lower_bound_us = pred->lower_bound_us;
      p->pred.peak_bytes = pred->peak_bytes;
      p->pred.collectives = pred->n_rows;
      p->pred.hidden = pred->hidden;
      p->pred.partial = pred->partial;
      p->pred.exposed = pred->exposed;
    } else
      p->pred.peak_bytes = sg_graph_peak_bytes (g, NULL);
    /* Step 4 (the offsets) beside the rules that read none; a plan
     * whose arena is too large is that error, not an invalid one. */
    GError *e = NULL;
    SgPlanRunner runner;
    sg_codegen_plan_runner (cfg, &runner);
    Placing pl = { p, l.pinned };
    const bool valid = sg_plan_validate_with (p, &runner, place_buffers, &pl, &e);
    if ((double)p->arena_bytes > SG_PLAN_MAX_INT) {
      g_set_error (error, SG_CODEGEN_ERROR, SG_CODEGEN_ERROR_GRAPH,
                   "the plan needs an arena of %" G_GUINT64_FORMAT
                   " bytes, more than a plan can hold (2^53)",
                   (guint64)p->arena_bytes);
      ok = false;
    } else if (!valid) {
      g_set_error (error, SG_CODEGEN_ERROR, SG_CODEGEN_ERROR_PLAN,
                   "%s: the lowered plan is invalid: %s", g->source ? g->source : "graph",
                   e->message);
      ok = false;
    }
    g_clear_error (&e);
  }
  g_free (l.pinned);
  if (!ok) {
    sg_plan_free (p);
    return false;
  }
  *out = p;
  return true;
}

/* A cluster or profile file by its last component: the same plan however
 * the path is spelt or wherever the file lies (a preset name is kept). */
static char *
file_option (const char *v)
{
  if (!v)
    return g_strdup ("-");
  return strchr (v, '/') ? g_path_get_basename (v) : g_strdup (v);
}

char *
sg_codegen_options_text (const SgConfig *cfg)
{
  SgConfig dflt;
  if (!cfg) {
    sg_config_init (&dflt);
    cfg = &dflt;
  }
  char frac[G_ASCII_DTOSTR_BUF_SIZE];
  g_ascii_formatd (frac, sizeof frac, "%.6f", cfg->max_peak_increase);
  g_autofree char *cluster = file_option (cfg->cluster);
  g_autofree char *profile = file_option (cfg->profile);
  return g_strdup_printf ("cluster=%s profile=%s reorder=%d max_in_flight_bytes=%" G_GUINT64_FORMAT
                          " max_peak_increase=%s prefetch_limit=%d bucket=%d"
                          " bucket_cap_bytes=%" G_GUINT64_FORMAT " bucket_mode=%s%s%s%s%s%s",
                          cluster, profile,
                          cfg->reorder ? 1 : 0, cfg->max_in_flight_bytes, frac,
                          (int)cfg->prefetch_limit, cfg->bucket ? 1 : 0, cfg->bucket_cap_bytes,
                          sg_bucket_mode_name (cfg->bucket_mode),
                          /* only when set: plans made without them keep their bytes */
                          cfg->bucket_lowering ? " bucket_lowering=" : "",
                          cfg->bucket_lowering ? sg_bucket_lowering_name (cfg->bucket_lowering)
                                               : "",
                          cfg->exact ? " exact=1" : "",
                          cfg->decompose != SG_DECOMPOSE_AUTO ? " decompose=" : "",
                          cfg->decompose != SG_DECOMPOSE_AUTO
                              ? sg_decompose_mode_name (cfg->decompose) : "");
}

bool
sg_codegen_write_plan (SgPlan *plan, const SgConfig *cfg, const char *path, GError **error)
{
  SgPlanRunner runner;
  sg_codegen_plan_runner (cfg, &runner);
  return sg_plan_write_file_with (plan, path, &runner, error);
}

bool
sg_codegen_write (const SgGraph *g, const SgConfig *cfg, const char *graph_name, const char *path,
                  SgPlan **plan_out, GError **error)
{
  g_return_val_if_fail (g != NULL && path != NULL, false);
  SgSimResult sim = { 0 };
  bool have_sim = false;
  if (sg_graph_cost_model (g)) {
    if (!sg_simulate (g, NULL, &sim, error))
      return false;
    have_sim = true;
  }
  g_autofree char *opts = sg_codegen_options_text (cfg);
  SgPlan *p = NULL;
  bool ok = sg_codegen_plan (g, cfg, have_sim ? &sim : NULL, graph_name, opts, &p, error) &&
            sg_codegen_write_plan (p, cfg, path, error);
  if (have_sim)
    sg_sim_result_clear (&sim);
  if (ok && plan_out)
    *plan_out = p;
  else
    sg_plan_free (p);
  return ok;
}

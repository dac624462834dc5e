/* judge.c: which sites to decompose, and in which form, by simulation.
 *
 * 0. Mode auto bounds what any form of a site could be judged to save,
 *    from the cost model alone (gain_bound_us; the sites in tasks on
 *    cfg->pool, each writing its own entries); sites whose bound is at
 *    most SG_DECOMPOSE_MIN_GAIN_US are left unpriced, and when no site is
 *    left the judge ends there: no trial graph, no simulation.
 * 1. The undecomposed graph is scheduled (sg_schedule_order, the
 *    schedule pass's own order; the id order with --no-reorder) and
 *    simulated: each site's collective has an exposure e there. In mode
 *    auto the input order (the simulation the driver keeps with the graph)
 *    is tried first: when no site saves time even against that, nothing is
 *    scheduled.
 * 2. Each form (sg_site_forms: ring steps over NCCL or the copy engine,
 *    direct reduce_scatter, all_reduce chunks, chunk GEMMs on every SM or
 *    with an SM-count target) is priced once per class of sites (the same
 *    new nodes: sg_sites_classes), the forms of all classes in one trial
 *    graph (form f on the class's site f), costed by the model, each run
 *    in ring order through the simulator's engine on an idle timeline
 *    (sg_span_run): L. The undecomposed site takes its compute C plus e
 *    (at most the collective's own run) on the scheduled timeline, so the
 *    form saves C + e - L. Per site the form of largest saving wins.
 * 3. The sites with a saving above SG_DECOMPOSE_MIN_GAIN_US are written
 *    together and the result simulated once, in the order of 1 carried
 *    over (each new node just before the node it is placed before, the
 *    ring's nodes in ring order): accepted if the step is shorter (and the
 *    peak within the scheduler's allowance); where not, the rewritten
 *    graph is scheduled as in 1 and judged the same way; else the half
 *    with the smaller savings is dropped and the rest tried again, at most
 *    SG_DECOMPOSE_ROUNDS times. The rewrite of the accepted set is left in
 *    the caller's SgRewrite to commit.
 * Modes all and all-gather take every site (every all_gather site) in its
 * best form, whatever its saving, and only measure the whole graph once.
 * Mirrors: bucket/'s judge (trial graphs of the rewrite API simulated by
 * the one simulator) and XLA's collective-matmul threshold, with the
 * threshold replaced by the timeline.
 * Requires: estimate (costs, model). Invalidates: nothing (trials only).
 */
#include "decompose-private.h"

#include <math.h>
#include <string.h>

/* A site's form must save this much on the site to be tried. */
#define SG_DECOMPOSE_MIN_GAIN_US 1.0
/* Whole-graph rounds of confirmation (each halves the set). */
#define SG_DECOMPOSE_ROUNDS 3
/* A step shorter by less than this fraction is a tie (kept undecomposed). */
#define SG_DECOMPOSE_TIE 1e-6
/* A whole step shorter by less than this fraction is kept undecomposed:
 * the scheduler's own tie band (schedule/scheduler.c), within which the
 * passes after this one (bucketing, polish) move a step anyway. */
#define SG_DECOMPOSE_STEP_TIE 5e-4

int32_t
sg_site_forms (const SgGraph *g, const SgSite *s, SgSiteForm *out)
{
  const SgCostModel *cm = sg_graph_cost_model (g);
  const int32_t all = cm ? sg_cost_model_sm_count (cm) : 0;
  const int32_t sms[2] = { 0, all > SG_DECOMPOSE_SM_FREE ? all - SG_DECOMPOSE_SM_FREE : 0 };
  const int32_t n_sms = sms[1] > 0 ? 2 : 1;
  int32_t n = 0;
  if (s->kind == SG_SITE_MM_ALL_REDUCE) {
    /* 2, 4 or 8 row chunks, as the rows allow */
    for (int32_t q = 2; q <= 8; q *= 2)
      for (int32_t j = 0; j < n_sms && s->rows % q == 0; j++)
        out[n++] = (SgSiteForm){ q, SG_TRANSPORT_NCCL, sms[j], false, false };
    return n;
  }
  const bool one_node = cm && sg_cost_group_nodes (cm, &g->groups[g->nodes[s->coll].group]) == 1;
  /* the second shape: an all_gather's whole users re-gathered, a
   * reduce_scatter's partials sent direct (the same as the ring at k = 2) */
  const bool two = s->kind == SG_SITE_ALL_GATHER_MM ? s->n_whole > 0 : s->k > 2;
  for (int32_t w = 0; w < (two ? 2 : 1); w++)
    for (int32_t t = 0; t < (one_node ? 2 : 1); t++)
      for (int32_t j = 0; j < n_sms; j++)
        out[n++] = (SgSiteForm){ s->k, t ? SG_TRANSPORT_CE : SG_TRANSPORT_NCCL, sms[j],
                                 w == 1 && s->kind == SG_SITE_ALL_GATHER_MM,
                                 w == 1 && s->kind == SG_SITE_MM_REDUCE_SCATTER };
  return n;
}

/* The order the schedule pass would give @g (the id order with
 * --no-reorder) as positions (*@pos, transfer full: node -> position), and
 * its simulation. */
static bool
scheduled (const SgGraph *g, const SgConfig *cfg, SgSimResult *r, int32_t **pos, GError **error)
{
  g_autofree SgNodeId *order = NULL;
  if (cfg->reorder) {
    SgConfig c = *cfg;
    c.exact = false;
    c.dump_pass = NULL;
    if (!(order = sg_schedule_order (g, &c, error)))
      return false;
  }
  *pos = g_new (int32_t, (size_t)g->n_nodes + 1);
  for (int32_t p = 0; p < g->n_nodes; p++)
    (*pos)[order ? order[p] : p] = p;
  return sg_simulate (g, order, r, error);
}

/* The longest the simulator can run collective @c once started: its solo
 * time slowed by the most disturbing kernel class beside it (the largest
 * comm_x of its pairs). */
static double
coll_max_us (const SgGraph *g, SgNodeId c)
{
  const SgCostModel *cm = sg_graph_cost_model (g);
  const SgNode *n = &g->nodes[c];
  const int32_t ns = sg_cost_contention_slots (cm);
  g_autofree SgPairRates *r = g_new (SgPairRates, (size_t)ns);
  sg_cost_contention_rates (cm, sg_cost_collective_transport (cm, g, c), n->kind,
                            sg_node_comm_bytes (g, c), n->group_size,
                            sg_cost_group_nodes (cm, &g->groups[n->group]), r);
  double x = 1.0;
  for (int32_t i = 0; i < ns; i++)
    x = MAX (x, r[i].comm_x);
  return n->est_us * x;
}

/* The compute-stream time of one form's chunk GEMMs of site @s, each on
 * every SM: mm @mm (or each leaf) in @chunks row chunks. */
static double
form_gemms_us (const SgGraph *g, const SgSite *s, int32_t chunks)
{
  const SgCostModel *cm = sg_graph_cost_model (g);
  double us = 0.0;
  const int32_t n = s->kind == SG_SITE_ALL_GATHER_MM ? s->n_mm : s->n_terms;
  for (int32_t i = 0; i < n; i++) {
    SgNodeId mm = s->kind == SG_SITE_ALL_GATHER_MM ? s->mm[i] : s->terms[i].node;
    if (s->kind != SG_SITE_ALL_GATHER_MM && s->terms[i].a >= 0)
      continue; /* an add */
    SgParam pa, pb;
    g_assert (sg_op_matmul_params (g->nodes[mm].kind, &pa, &pb));
    const SgMeta *a = sg_node_param_meta (g, mm, pa);
    const int64_t *os = sg_meta_shape (g, &g->nodes[mm].meta);
    us += chunks * sg_cost_mm_us (cm, a->dtype, os[0] / chunks, sg_meta_shape (g, a)[1], os[1]);
  }
  return us;
}

/* An upper bound on what any form of site @s can be judged to save
 * (choose_forms): the compute it replaces plus the longest its collective
 * can run, less the fewest chunk GEMMs a form runs (a form's span holds
 * them back to back at least; SM-count targets, adds, copies, ring steps
 * and contention only lengthen it). */
static double
gain_bound_us (const SgGraph *g, const SgSite *s, double compute_us, const SgSiteForm *forms,
               int32_t n_forms)
{
  double gemms = INFINITY;
  for (int32_t f = 0; f < n_forms; f++) {
    bool again = false; /* forms of one chunk count run the same GEMMs */
    for (int32_t q = 0; q < f; q++)
      again |= forms[q].chunks == forms[f].chunks;
    if (!again)
      gemms = MIN (gemms, form_gemms_us (g, s, forms[f].chunks));
  }
  return compute_us + coll_max_us (g, s->coll) - gemms;
}

/* Solo compute time of the undecomposed site (the mms and adds it replaces). */
static double
base_compute_us (const SgGraph *g, const SgSite *s, GArray *tmp)
{
  g_array_set_size (tmp, 0);
  sg_site_base_nodes (s, tmp);
  double us = 0.0;
  for (guint i = 0; i < tmp->len; i++)
    us += g->nodes[g_array_index (tmp, SgNodeId, i)].est_us;
  return us;
}

typedef SgSiteForm SgFormSet[SG_SITE_MAX_FORMS];

typedef struct {
  SgGraph *g;
  const SgConfig *cfg;
  SgSite *sites;
  int32_t n;
  SgSiteChoice *choice;
  SgFormSet *forms;
  int32_t *n_forms;
  SgRewrite *rw;
  double *compute_us;      /* per site: the compute it replaces, solo */
  /* the candidates' classes (sg_sites_classes): per site its class; per
   * class its sites (cls_size of them at cls_sites[cls_at ..]) and its
   * first site */
  int32_t *cls, n_cls, *cls_size, *cls_first, *cls_at, *cls_sites;
  double *span_us;         /* per class and form: its new nodes on an idle timeline */
  double *ring_us;         /* per class and form: its permutes' solo time */
  const SgSimResult *base; /* the undecomposed graph's timeline, node times kept */
  int32_t *pos;            /* each node's position in that order */
} Judge;

/* What keeping the all_gather of site @s for its whole users costs beyond
 * the ring (form regather): nothing when the scheduled undecomposed graph
 * leaves room between the shard's producer and the first whole user for
 * the ring's steps (@ring_us) and the gather, else what does not fit. */
static double
regather_us (const Judge *j, const SgSite *s, double ring_us)
{
  uint32_t nin;
  const SgNodeId x = sg_node_inputs (j->g, s->coll, &nin)[0];
  const SgNodeId u = sg_site_first_whole (j->g, s);
  const double window = j->base->node_start[u] - j->base->node_end[x];
  return MAX (0.0, j->g->nodes[s->coll].est_us + ring_us - window);
}

/* Prices, in one trial graph, every form f of every class whose turn is
 * @round (f / the class's sites): form f on the class's site f mod that
 * many, so that each trial holds many forms, one per site. Fills
 * j->span_us and j->ring_us of those (class, form). */
static bool
price_round (Judge *j, int32_t round, GError **error)
{
  sg_rewrite_reset (j->rw);
  g_autoptr (GArray) span = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  g_autoptr (GArray) first = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr (GArray) what = g_array_new (FALSE, FALSE, sizeof (size_t)); /* class x form */
  for (int32_t c = 0; c < j->n_cls; c++) {
    const int32_t size = j->cls_size[c], i0 = j->cls_first[c];
    for (int32_t f = round * size; f < MIN (j->n_forms[i0], (round + 1) * size); f++) {
      const int32_t i = j->cls_sites[j->cls_at[c] + f % size];
      const size_t at = (size_t)c * SG_SITE_MAX_FORMS + (size_t)f;
      const guint len = span->len;
      g_array_append_val (first, len);
      g_array_append_val (what, at);
      if (!sg_site_emit (j->rw, &j->sites[i], &j->forms[i][f], span, NULL, error))
        return false;
    }
  }
  if (what->len == 0)
    return true;
  const guint end = span->len;
  g_array_append_val (first, end);
  SgGraph *t = sg_rewrite_trial (j->rw, error);
  if (!t)
    return false;
  sg_cost_new_nodes (sg_graph_cost_model (t), t, NULL, 0, j->cfg->pool);
  for (guint i = 0; i < span->len; i++) {
    SgNodeId *v = &g_array_index (span, SgNodeId, i);
    *v = sg_rewrite_result_id (j->rw, *v);
  }
  SgSpan *sp = sg_span_new (t);
  for (guint e = 0; e < what->len; e++) {
    const guint a = g_array_index (first, guint, e), b = g_array_index (first, guint, e + 1);
    const SgNodeId *ids = &g_array_index (span, SgNodeId, a);
    const size_t at = g_array_index (what, size_t, e);
    j->span_us[at] = sg_span_run (sp, ids, (int32_t)(b - a));
    j->ring_us[at] = 0.0;
    for (guint q = 0; q < b - a; q++)
      j->ring_us[at] += t->nodes[ids[q]].kind == SG_OP_COLLECTIVE_PERMUTE ? t->nodes[ids[q]].est_us : 0;
  }
  sg_span_free (sp);
  sg_graph_free (t);
  return true;
}

/* The classes of the candidates (sg_sites_classes) and their sites in
 * graph order; the rounds price_round needs. */
static int32_t
class_sites (Judge *j)
{
  g_free (j->cls);
  j->cls = sg_sites_classes (j->g, j->sites, j->n, &j->n_cls);
  j->cls_size = g_new0 (int32_t, (size_t)j->n_cls + 1);
  j->cls_first = g_new (int32_t, (size_t)j->n_cls + 1);
  j->cls_at = g_new0 (int32_t, (size_t)j->n_cls + 1);
  j->cls_sites = g_new (int32_t, (size_t)j->n + 1);
  for (int32_t i = j->n - 1; i >= 0; i--)
    if (j->cls[i] >= 0 && j->n_forms[i] > 0) {
      j->cls_size[j->cls[i]]++;
      j->cls_first[j->cls[i]] = i;
    }
  int32_t rounds = 0, at = 0;
  for (int32_t c = 0; c < j->n_cls; c++) {
    j->cls_at[c] = at;
    at += j->cls_size[c];
    if (j->cls_size[c] > 0)
      rounds = MAX (rounds, (j->n_forms[j->cls_first[c]] + j->cls_size[c] - 1) / j->cls_size[c]);
    j->cls_size[c] = 0; /* filled again below */
  }
  for (int32_t i = 0; i < j->n; i++)
    if (j->cls[i] >= 0 && j->n_forms[i] > 0)
      j->cls_sites[j->cls_at[j->cls[i]] + j->cls_size[j->cls[i]]++] = i;
  return rounds;
}

/* Every candidate's best form against the timeline j->base (its
 * collective's exposure there, and room for a re-gather): choice[i].form,
 * gain_us, exposed_us. True when the sites that save more than the
 * threshold save more together than the tie band of the step (less could
 * not confirm). */
static bool
choose_forms (Judge *j)
{
  g_autofree double *expo = g_new0 (double, (size_t)j->g->n_nodes);
  g_autofree double *runs = g_new0 (double, (size_t)j->g->n_nodes);
  for (int32_t r = 0; r < j->base->n_rows; r++) {
    const SgCollRow *row = &j->base->rows[r];
    expo[row->node] += row->exposed_us;
    runs[row->node] += row->end_us - row->start_us;
  }
  double sum = 0.0;
  for (int32_t i = 0; i < j->n; i++) {
    if (j->sites[i].reason != SG_SITE_DECOMPOSED)
      continue;
    SgSiteChoice *c = &j->choice[i];
    c->exposed_us = expo[j->sites[i].coll];
    /* waiting for collectives queued before it on the group's stream
     * would not go away: the ring's steps queue there too */
    const double hideable = MIN (c->exposed_us, runs[j->sites[i].coll]);
    for (int32_t f = 0; f < j->n_forms[i]; f++) {
      const size_t at = (size_t)j->cls[i] * SG_SITE_MAX_FORMS + (size_t)f;
      double l = j->span_us[at];
      if (j->forms[i][f].regather && j->sites[i].n_whole > 0)
        l += regather_us (j, &j->sites[i], j->ring_us[at]);
      const double gain = j->compute_us[i] + hideable - l;
      /* ties (within rounding) go to the earlier form: the ring before the
       * re-gather (one collective fewer), nccl before ce, every SM first */
      if (f == 0 || gain > c->gain_us + SG_DECOMPOSE_TIE * (1.0 + fabs (c->gain_us))) {
        c->gain_us = gain;
        c->form = j->forms[i][f];
      }
    }
    sum += c->gain_us > SG_DECOMPOSE_MIN_GAIN_US ? c->gain_us : 0.0;
  }
  return sum > SG_DECOMPOSE_STEP_TIE * j->base->step_us;
}

/* The scheduled order of the undecomposed graph carried over to trial @t:
 * a kept node at its position there, an added node just before its
 * anchor's (@anchors, by added id - n_nodes; added nodes of one anchor in
 * the order they were added: the ring's), as a stable topological sort by
 * that key (data and implicit edges). (transfer full) */
static SgNodeId *
carried_order (const Judge *j, SgGraph *t, const GArray *anchors)
{
  const int32_t n0 = j->g->n_nodes;
  g_autofree int64_t *key = g_new (int64_t, (size_t)t->n_nodes + 1);
  for (SgNodeId v = 0; v < n0; v++) {
    const SgNodeId r = sg_rewrite_result_id (j->rw, v);
    if (r != SG_NO_NODE)
      key[r] = 2 * (int64_t)j->pos[v] + 1;
  }
  for (guint a = 0; a < anchors->len; a++)
    key[sg_rewrite_result_id (j->rw, n0 + (SgNodeId)a)]
        = 2 * (int64_t)j->pos[g_array_index (anchors, SgNodeId, a)];
  /* a kept all_gather (regather) goes after its ring, its wait before the
   * first user left to it */
  for (int32_t i = 0; i < j->n; i++) {
    const SgSite *s = &j->sites[i];
    if (!j->choice[i].chosen || !j->choice[i].form.regather || s->n_whole == 0)
      continue;
    SgNodeId last = s->mm[0];
    for (int32_t q = 0; q < s->n_mm; q++)
      last = j->pos[s->mm[q]] > j->pos[last] ? s->mm[q] : last;
    key[sg_rewrite_result_id (j->rw, s->coll)] = 2 * (int64_t)j->pos[last] + 1;
    key[sg_rewrite_result_id (j->rw, s->wait)] = 2 * (int64_t)j->pos[sg_site_first_whole (j->g, s)];
  }
  SgNodeId *order = sg_graph_order_by_key (t, key);
  g_assert (order); /* the trial is acyclic: the rewrite laid it out */
  return order;
}

/* Simulates @g with the chosen sites rewritten: in the undecomposed
 * graph's scheduled order carried over (one simulation), or, @schedule,
 * in the order the schedule pass gives it. */
static bool
try_chosen (Judge *j, bool schedule, SgSimResult *r, GError **error)
{
  g_autoptr (GArray) anchors = g_array_new (FALSE, TRUE, sizeof (SgNodeId)); /* 0: unplaced */
  if (!sg_decompose_rewrite (j->rw, j->sites, j->n, j->choice, anchors, error))
    return false;
  SgGraph *t = sg_rewrite_trial (j->rw, error);
  if (!t)
    return false;
  sg_cost_new_nodes (sg_graph_cost_model (t), t, NULL, 0, j->cfg->pool);
  bool ok;
  if (schedule) {
    g_autofree int32_t *pos = NULL;
    ok = scheduled (t, j->cfg, r, &pos, error);
  } else {
    g_autofree SgNodeId *order = carried_order (j, t, anchors);
    ok = sg_simulate (t, order, r, error);
  }
  sg_graph_free (t);
  return ok;
}

static int
gain_cmp (const void *pa, const void *pb, void *ud)
{
  const SgSiteChoice *c = ud;
  const int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
  if (c[a].gain_us != c[b].gain_us)
    return c[a].gain_us > c[b].gain_us ? -1 : 1;
  return a - b;
}

/* Confirms the chosen set on the whole graph, halving it until the
 * predicted step is shorter (auto), or measures it once (all). */
static bool
confirm (Judge *j, SgDecomposeStats *st, GError **error)
{
  g_autofree int32_t *by_gain = g_new (int32_t, (size_t)j->n + 1);
  int32_t m = 0;
  for (int32_t i = 0; i < j->n; i++)
    if (j->choice[i].chosen)
      by_gain[m++] = i;
  g_qsort_with_data (by_gain, m, sizeof *by_gain, gain_cmp, j->choice);
  const uint64_t peak_limit = (uint64_t)((double)st->peak_before_bytes
                                         * (1.0 + MAX (j->cfg->max_peak_increase, 0.0)));
  for (int32_t round = 0; m > 0; round++) {
    /* the carried order first; where it does not show a gain, the schedule
     * pass's own order of the rewritten graph */
    SgSimResult r;
    bool shorter = false, fits = false;
    for (int schedule = 0; schedule < 2 && !(shorter && fits); schedule++) {
      if (schedule)
        sg_sim_result_clear (&r);
      if (!try_chosen (j, schedule, &r, error))
        return false;
      st->confirm_rounds++;
      shorter = r.step_us < st->step_before_us * (1.0 - SG_DECOMPOSE_STEP_TIE);
      fits = r.peak_bytes <= MAX (peak_limit, st->peak_before_bytes);
      if (j->cfg->decompose != SG_DECOMPOSE_AUTO)
        break;
    }
    if (j->cfg->decompose != SG_DECOMPOSE_AUTO || (shorter && fits)) {
      st->step_after_us = r.step_us;
      st->exposed_after_us = r.exposed_us;
      st->peak_after_bytes = r.peak_bytes;
      sg_sim_result_clear (&r);
      return true;
    }
    sg_sim_result_clear (&r);
    /* drop the half with the smaller savings (all of them in the last round) */
    const int32_t keep = round + 1 < SG_DECOMPOSE_ROUNDS ? m / 2 : 0;
    for (int32_t i = keep; i < m; i++) {
      j->choice[by_gain[i]].chosen = false;
      j->sites[by_gain[i]].reason = shorter ? SG_SITE_PEAK : SG_SITE_GRAPH_LONGER;
    }
    m = keep;
  }
  return true;
}

/* Sets j->base (and j->pos) to the timeline of @g: the input order's
 * (@schedule false: the simulation kept with the graph, borrowed: *@base
 * is left empty) or the schedule pass's (filled into *@base); the
 * statistics' before. */
static bool
base_timeline (Judge *j, SgSimResult *base, bool schedule, SgDecomposeStats *st, GError **error)
{
  SgConfig c = *j->cfg;
  c.reorder = c.reorder && schedule;
  g_clear_pointer (&j->pos, g_free);
  const SgSimResult *r = base;
  if (c.reorder) {
    if (!scheduled (j->g, &c, base, &j->pos, error))
      return false;
  } else {
    if (!(r = sg_graph_simulation (j->g, error)))
      return false;
    j->pos = g_new (int32_t, (size_t)j->g->n_nodes + 1);
    for (int32_t p = 0; p < j->g->n_nodes; p++)
      j->pos[p] = p;
  }
  j->base = r;
  st->scheduled = c.reorder;
  st->step_before_us = st->step_after_us = r->step_us;
  st->exposed_before_us = st->exposed_after_us = r->exposed_us;
  st->peak_before_bytes = st->peak_after_bytes = r->peak_bytes;
  return true;
}

/* Candidates per task of site_forms_task. */
#define SITES_PER_TASK 512

/* The forms, compute and (auto) bound of the candidates of task @t's
 * range of sites; a site no form could be judged to win is not priced. */
static void
site_forms_task (gpointer data, int32_t t, int32_t worker)
{
  (void)worker;
  Judge *j = data;
  g_autoptr (GArray) tmp = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  for (int32_t i = t * SITES_PER_TASK; i < MIN (j->n, (t + 1) * SITES_PER_TASK); i++) {
    SgSite *s = &j->sites[i];
    if (s->reason != SG_SITE_DECOMPOSED)
      continue;
    j->n_forms[i] = sg_site_forms (j->g, s, j->forms[i]);
    j->compute_us[i] = base_compute_us (j->g, s, tmp);
    if (j->cfg->decompose != SG_DECOMPOSE_AUTO)
      continue;
    j->choice[i].bound_us = gain_bound_us (j->g, s, j->compute_us[i], j->forms[i], j->n_forms[i]);
    if (!(j->choice[i].bound_us > SG_DECOMPOSE_MIN_GAIN_US)) {
      s->reason = SG_SITE_NO_GAIN;
      j->n_forms[i] = 0;
    }
  }
}

bool
sg_decompose_judge (SgGraph *g, const SgConfig *cfg, SgSite *sites, int32_t n,
                    SgSiteChoice *choice, SgDecomposeStats *st, SgRewrite *rw, GError **error)
{
  const size_t nf = (size_t)n * SG_SITE_MAX_FORMS + 1;
  Judge j = { .g = g, .cfg = cfg, .sites = sites, .n = n, .choice = choice,
              .forms = g_new0 (SgFormSet, (size_t)n + 1), .n_forms = g_new0 (int32_t, (size_t)n + 1),
              .rw = rw, .compute_us = g_new0 (double, (size_t)n + 1),
              .span_us = g_new0 (double, nf), .ring_us = g_new0 (double, nf) };
  sg_pool_run (cfg->pool, (n + SITES_PER_TASK - 1) / SITES_PER_TASK, site_forms_task, &j);
  int32_t max_forms = 0;
  for (int32_t i = 0; i < n; i++)
    max_forms = MAX (max_forms, j.n_forms[i]);
  bool ok = true;
  if (max_forms == 0) /* nothing to price: no trial graph, no simulation */
    goto done;
  st->judged = true;
  const int32_t rounds = class_sites (&j);
  for (int32_t r = 0; ok && r < rounds; r++)
    ok = price_round (&j, r, error);
  /* In the input order every such collective waits right after its issue:
   * exposed about whole, what a schedule hardly ever exceeds. Where no site
   * saves anything even then, auto stops there (the simulation of the input
   * order the driver keeps with the graph instead of a schedule). */
  SgSimResult base = { 0 };
  const bool cheap = cfg->decompose == SG_DECOMPOSE_AUTO && cfg->reorder;
  ok = ok && base_timeline (&j, &base, !cheap, st, error);
  if (ok && cheap && choose_forms (&j)) {
    sg_sim_result_clear (&base);
    ok = base_timeline (&j, &base, true, st, error);
  }
  const bool worth = ok && choose_forms (&j);
  sg_sim_result_clear (&base);
  for (int32_t i = 0; ok && i < n; i++) {
    if (sites[i].reason != SG_SITE_DECOMPOSED)
      continue;
    choice[i].chosen = cfg->decompose == SG_DECOMPOSE_AUTO
                           ? worth && choice[i].gain_us > SG_DECOMPOSE_MIN_GAIN_US
                           : true; /* all, all-gather (find kept only those) */
    if (!choice[i].chosen)
      sites[i].reason = SG_SITE_NO_GAIN;
  }
  ok = ok && confirm (&j, st, error);
done:
  g_free (j.forms);
  g_free (j.n_forms);
  g_free (j.compute_us);
  g_free (j.span_us);
  g_free (j.ring_us);
  g_free (j.cls);
  g_free (j.cls_size);
  g_free (j.cls_first);
  g_free (j.cls_at);
  g_free (j.cls_sites);
  g_free (j.pos);
  return ok;
}

bool
sg_decompose_rewrite (SgRewrite *rw, const SgSite *sites, int32_t n, const SgSiteChoice *choice,
                      GArray *anchors, GError **error)
{
  sg_rewrite_reset (rw);
  g_autoptr (GArray) span = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  for (int32_t i = 0; i < n; i++)
    if (choice[i].chosen && !sg_site_emit (rw, &sites[i], &choice[i].form, span, anchors, error))
      return false;
  return true;
}

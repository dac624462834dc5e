/* span.c: the simulator over a few nodes of a graph (a local judge).
 *
 * sg_span_run() places a short list of nodes (a fragment of some order:
 * a collective and the matmuls that wait on it, a ring of permutes and
 * its chunk matmuls) on the engine of sim.c from an idle timeline and
 * returns how long the fragment takes until its compute and its
 * collectives have ended. A pass that weighs rewrites site by site
 * (decompose/) prices each site this way without simulating the whole
 * graph per site; the whole-graph judge stays sg_simulate.
 * Mirrors: the local cost estimates of XLA's collective-matmul and
 * Inductor's overlap scheduler (one op and its neighbours), through the
 * one engine instead of a formula of their own.
 * Requires: est_us (estimate/). Invalidates: nothing (read-only).
 */
#include "schedule-private.h"

struct SgSpan {
  SgSimEngine e;
  int32_t cap; /* collectives the engine has rows for */
};

static int32_t
count_collectives (const SgGraph *g)
{
  int32_t n = 0;
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    n += sg_sched_role (&g->nodes[i]) == SG_ROLE_COLL;
  return n;
}

SgSpan *
sg_span_new (const SgGraph *g)
{
  g_return_val_if_fail (g != NULL, NULL);
  SgSpan *s = g_new0 (SgSpan, 1);
  sg_eng_init (&s->e, g, NULL, false);
  s->cap = count_collectives (g);
  return s;
}

void
sg_span_free (SgSpan *s)
{
  if (!s)
    return;
  sg_eng_clear (&s->e);
  g_free (s);
}

double
sg_span_run (SgSpan *s, const SgNodeId *nodes, int32_t n)
{
  g_return_val_if_fail (s && (nodes || n == 0), 0.0);
  SgSimEngine *e = &s->e;
  int32_t colls = 0;
  for (int32_t i = 0; i < n; i++)
    colls += sg_sched_role (&e->g->nodes[nodes[i]]) == SG_ROLE_COLL;
  if (e->n_rows + colls > e->cap_rows) {
    /* rows of earlier fragments are finished: a fresh engine forgets them */
    const SgGraph *g = e->g;
    sg_eng_clear (e);
    sg_eng_init (e, g, NULL, false);
    if (colls > e->cap_rows) {
      g_warn_if_reached ();
      return 0.0;
    }
  }
  sg_eng_drain (e);
  const double t0 = e->now;
  for (int32_t i = 0; i < n; i++) {
    const SgNode *x = &e->g->nodes[nodes[i]];
    /* a wait whose collective an earlier fragment issued is not this one's */
    if (sg_sched_role (x) == SG_ROLE_WAIT) {
      SgNodeId c = sg_node_wait_target (e->g, nodes[i]);
      if (c == SG_NO_NODE || e->row_of[c] < 0 || e->fin[e->row_of[c]])
        continue;
    }
    sg_eng_place (e, nodes[i]);
  }
  sg_eng_drain (e);
  return e->now - t0;
}

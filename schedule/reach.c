/* reach.c: the compute of each collective's ancestors and descendants
 * (sg_bound_reach_sums), for the lower bound's window term (window.c).
 *
 * Bit-parallel reachability: per chunk of SG_BOUND_REACH_BITS collectives
 * (id order) one pass in id order ORs each node's inputs' masks (the
 * chunk's collectives it descends from), one in reverse order ORs each
 * node's mask into its inputs' (those it precedes), and each compute node
 * adds its work to the sums of its set bits, runs of equal masks summed
 * first (in pass order: deterministic). A chunk's work is counted in word
 * operations (a mask word zeroed, read into an OR or stored, and a set bit
 * of a flushed run); within a budget a chunk starts only while its passes
 * fit in what is left, and the collectives of the chunks past it keep -1.
 * A chunk's sums depend on nothing but the chunk, and its two passes on
 * nothing but themselves: they may run in any order and on any thread
 * (window.c runs them on the pool).
 * Mirrors: transitive-closure counting by bitsets, for the heads and tails
 * of the one-machine bound (Carlier 1982).
 * Requires: est_us (estimate/). Invalidates: nothing.
 */
#include <string.h>

#include "schedule-private.h"

enum { REACH_WORDS = SG_BOUND_REACH_BITS / 64 };

typedef SgReachMask Mask;
typedef SgReachCsr Csr;

/* Consecutive compute nodes with one mask: their work is summed first and
 * added to the sums of the mask's bits once (a fixed order: deterministic). */
typedef struct {
  Mask m;
  double sum;
} Run;

/* One chunk's passes: the masks they use (n, a worker's) and the set bits
 * they flushed (word operations beyond the passes'). */
typedef struct {
  const Csr *c;
  Mask *mask;
  int64_t flushed;
} Pass;

static void
run_flush (Pass *p, const Run *run, double *sums)
{
  for (int k = 0; k < REACH_WORDS; k++)
    for (uint64_t b = run->m.w[k]; b; b &= b - 1) {
      sums[64 * k + __builtin_ctzll (b)] += run->sum;
      p->flushed++;
    }
}

static void
run_add (Pass *p, Run *run, const Mask *m, double work, double *sums)
{
  if (memcmp (&run->m, m, sizeof *m) == 0) {
    run->sum += work;
    return;
  }
  run_flush (p, run, sums);
  run->m = *m;
  run->sum = work;
}

/* Tails: @tail[k] += the work of every compute node that descends from
 * member k of @mem (@m ascending ids), by ascending id. mask[x] = the OR of
 * its inputs' masks, and x's own bit once its sum is taken. */
static void
pass_down (Pass *p, const SgNodeId *mem, int32_t m, double *tail)
{
  const Csr *c = p->c;
  SgNodeId lo = mem[0];
  memset (p->mask, 0, sizeof (Mask) * (size_t)lo);
  Run run = { 0 };
  int32_t next = 0;
  for (SgNodeId x = lo; x < c->n; x++) {
    Mask acc = { 0 };
    for (uint32_t a = c->first[x]; a < c->first[x + 1]; a++) {
      const Mask *in = &p->mask[c->adj[a]];
      for (int k = 0; k < REACH_WORDS; k++)
        acc.w[k] |= in->w[k];
    }
    if (c->work[x] != 0.0)
      run_add (p, &run, &acc, c->work[x], tail);
    if (next < m && mem[next] == x) {
      acc.w[next / 64] |= (uint64_t)1 << (next % 64);
      next++;
    }
    p->mask[x] = acc;
  }
  run_flush (p, &run, tail);
}

static bool
mask_empty (const Mask *m)
{
  uint64_t any = 0;
  for (int k = 0; k < REACH_WORDS; k++)
    any |= m->w[k];
  return any == 0;
}

/* Heads: @head[k] += the work of every compute node that member k of @mem
 * descends from, by descending id. Each node's mask, final once its users
 * (later ids) have ORed theirs in, is ORed into its inputs'. */
static void
pass_up (Pass *p, const SgNodeId *mem, int32_t m, double *head)
{
  const Csr *c = p->c;
  SgNodeId hi = mem[m - 1];
  memset (p->mask, 0, sizeof (Mask) * ((size_t)hi + 1));
  Run run = { 0 };
  int32_t next = m - 1;
  for (SgNodeId x = hi; x >= 0; x--) {
    Mask acc = p->mask[x];
    if (c->work[x] != 0.0)
      run_add (p, &run, &acc, c->work[x], head);
    if (next >= 0 && mem[next] == x) {
      acc.w[next / 64] |= (uint64_t)1 << (next % 64);
      next--;
    }
    if (mask_empty (&acc))
      continue;
    for (uint32_t a = c->first[x]; a < c->first[x + 1]; a++) {
      Mask *in = &p->mask[c->adj[a]];
      for (int k = 0; k < REACH_WORDS; k++)
        in->w[k] |= acc.w[k];
    }
  }
  run_flush (p, &run, head);
}

/* Members of chunk @k of @nc collectives. */
static int32_t
chunk_size (int32_t nc, int32_t k)
{
  return MIN (SG_BOUND_REACH_BITS, nc - k * SG_BOUND_REACH_BITS);
}

/* The word operations of chunk @mem's (@m) two passes, their zeroing
 * included, before the set bits. */
static int64_t
chunk_cost (const Csr *c, const SgNodeId *mem, int32_t m)
{
  SgNodeId lo = mem[0], hi = mem[m - 1];
  return (int64_t)REACH_WORDS
         * ((int64_t)c->n + 2 * ((int64_t)hi + 1) + (c->first[c->n] - c->first[lo])
            + c->first[hi + 1]);
}

int64_t
sg_reach_chunk_pass (const SgReachCsr *c, SgReachMask *mask, const SgNodeId *colls, int32_t nc,
                     int32_t k, bool up, double *sums)
{
  Pass p = { c, mask, 0 };
  int32_t at = k * SG_BOUND_REACH_BITS, m = chunk_size (nc, k);
  memset (&sums[at], 0, sizeof (double) * (size_t)m);
  if (up)
    pass_up (&p, &colls[at], m, &sums[at]);
  else
    pass_down (&p, &colls[at], m, &sums[at]);
  return p.flushed;
}

int32_t
sg_reach_chunks_that_could_fit (const SgReachCsr *c, const SgNodeId *colls, int32_t nc,
                                int64_t budget)
{
  int32_t k = 0;
  for (; k * SG_BOUND_REACH_BITS < nc; k++) {
    int64_t cost = chunk_cost (c, &colls[k * SG_BOUND_REACH_BITS], chunk_size (nc, k));
    if (cost > budget)
      break;
    budget -= cost;
  }
  return k;
}

bool
sg_reach_chunk_fits (const SgReachCsr *c, const SgNodeId *colls, int32_t nc, int32_t k,
                     int64_t *budget)
{
  int64_t cost = chunk_cost (c, &colls[k * SG_BOUND_REACH_BITS], chunk_size (nc, k));
  if (cost > *budget)
    return false;
  *budget -= cost;
  return true;
}

void
sg_reach_sums_unknown (double *head, double *tail, int32_t done, int32_t nc)
{
  for (int32_t i = done; i < nc; i++)
    head[i] = tail[i] = -1.0;
}

void
sg_reach_csr_clear (SgReachCsr *c)
{
  g_free (c->first);
  g_free (c->adj);
  g_free (c->work);
}

/* The chunks in order on one thread while @budget lasts; how many
 * collectives got sums. */
static int32_t
chunks_in_order (const SgReachCsr *c, const SgNodeId *colls, int32_t nc, int64_t budget,
                 double *head, double *tail)
{
  Mask *mask = NULL;
  int32_t k = 0;
  for (; k * SG_BOUND_REACH_BITS < nc && sg_reach_chunk_fits (c, colls, nc, k, &budget); k++) {
    if (!mask)
      mask = g_new (Mask, (size_t)c->n);
    budget -= sg_reach_chunk_pass (c, mask, colls, nc, k, true, head);
    budget -= sg_reach_chunk_pass (c, mask, colls, nc, k, false, tail);
  }
  g_free (mask);
  int32_t done = MIN (nc, k * SG_BOUND_REACH_BITS);
  sg_reach_sums_unknown (head, tail, done, nc);
  return done;
}

int32_t
sg_bound_reach_sums (const SgGraph *g, const SgNodeId *colls, int32_t nc, int64_t budget,
                     double *head, double *tail)
{
  g_return_val_if_fail (g != NULL && nc >= 0, 0);
  for (int32_t i = 0; i < nc; i++)
    g_return_val_if_fail (colls[i] >= 0 && colls[i] < g->n_nodes
                          && (i == 0 || colls[i] > colls[i - 1]), 0);
  int32_t n = g->n_nodes;
  Csr c = { .n = n, .first = g_new (uint32_t, (size_t)n + 1),
            .work = g_new (double, (size_t)MAX (n, 1)) };
  c.first[0] = 0;
  for (SgNodeId x = 0; x < n; x++) {
    const SgNode *nd = &g->nodes[x];
    c.first[x + 1] = c.first[x] + nd->n_in;
    c.work[x] = sg_sched_role (nd) == SG_ROLE_COMPUTE ? sg_sched_cost (nd) : 0.0;
  }
  c.adj = g_new (SgNodeId, (size_t)c.first[n] + 1);
  for (SgNodeId x = 0; x < n; x++) {
    uint32_t k;
    const SgNodeId *ins = sg_node_inputs (g, x, &k);
    memcpy (&c.adj[c.first[x]], ins, sizeof (SgNodeId) * k);
  }
  int32_t done = chunks_in_order (&c, colls, nc, budget, head, tail);
  sg_reach_csr_clear (&c);
  return done;
}

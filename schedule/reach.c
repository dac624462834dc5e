/* reach.c: the compute of each collective's ancestors and descendants
 * (SgReach: sg_reach_begin, _pass, _end), for the lower bound's window
 * term (window.c).
 *
 * Bit-parallel reachability: per chunk of SG_BOUND_REACH_BITS collectives
 * (id order) one pass in id order ORs each node's inputs' masks (the
 * chunk's collectives it descends from), one in reverse order ORs each
 * node's mask into its inputs' (those it precedes), and each compute node
 * adds its work to the sums of its set bits, runs of equal masks summed
 * first (in pass order: deterministic). A chunk's work is counted in word
 * operations (a mask word zeroed, read into an OR or stored, and a set bit
 * of a flushed run); within a budget a chunk starts only while its passes
 * fit in what is left (one implementation of that replay, chunks_started:
 * for the chunks that could fit, the passes worth running and the chunks
 * that count), and the collectives of the chunks past it keep -1.
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

/* The sums of chunk @k by one of its two passes, through @mask: @up, the
 * heads (ancestors), else the tails (descendants), into @sums (indexed as
 * the collectives); returns the set bits it flushed. */
static int64_t
chunk_pass (const Csr *c, Mask *mask, const SgNodeId *colls, int32_t nc, int32_t k, bool up,
            double *sums)
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

/* The budget as one thread spends it: how many chunks start (at most
 * @stop), chunk k while its passes' word operations fit in what is left;
 * each takes them, and the first @known (done) their set bits too. */
static int32_t
chunks_started (const SgReach *r, int32_t known, int32_t stop)
{
  int64_t budget = r->budget;
  int32_t k = 0;
  for (; k < stop && k * SG_BOUND_REACH_BITS < r->nc; k++) {
    int64_t cost = chunk_cost (r->c, &r->colls[k * SG_BOUND_REACH_BITS], chunk_size (r->nc, k));
    if (cost > budget)
      break;
    budget -= cost;
    if (k < known)
      budget -= r->flushed[2 * k] + r->flushed[2 * k + 1];
  }
  return k;
}

void
sg_reach_begin (SgReach *r, const SgReachCsr *c, const SgNodeId *colls, int32_t nc,
                int64_t budget, double *head, double *tail)
{
  *r = (SgReach){ .c = c, .colls = colls, .nc = nc, .budget = budget, .head = head,
                  .tail = tail };
  /* the set bits only lower what is left */
  r->n_chunks = chunks_started (r, 0, INT32_MAX);
  r->flushed = g_new0 (int64_t, 2 * (size_t)MAX (r->n_chunks, 1));
  r->done = g_new0 (gint, (size_t)MAX (r->n_chunks, 1));
}

void
sg_reach_pass (SgReach *r, int32_t p, SgReachMask *mask)
{
  int32_t k = p / 2;
  bool up = p % 2 == 0;
  /* not once the chunks done before it show that one thread would have
   * stopped before it (with one worker they all are: none runs in vain) */
  int32_t known = 0;
  while (known < k && g_atomic_int_get (&r->done[known]) == 2)
    known++;
  if (chunks_started (r, known, known + 1) <= known)
    return;
  r->flushed[p] = chunk_pass (r->c, mask, r->colls, r->nc, k, up, up ? r->head : r->tail);
  g_atomic_int_inc (&r->done[k]);
}

int32_t
sg_reach_end (SgReach *r)
{
  int32_t done = MIN (r->nc, chunks_started (r, r->n_chunks, r->n_chunks) * SG_BOUND_REACH_BITS);
  for (int32_t i = done; i < r->nc; i++)
    r->head[i] = r->tail[i] = -1.0;
  g_free (r->flushed);
  g_free (r->done);
  r->flushed = NULL;
  r->done = NULL;
  return done;
}

void
sg_reach_csr_clear (SgReachCsr *c)
{
  g_free (c->first);
  g_free (c->adj);
  g_free (c->work);
}

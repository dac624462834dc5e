/* listsched.c: one variant of the exposure-aware list scheduler.
 *
 * Mirrors: PyTorch Inductor's schedule_overlap_bucketing (compute order
 * kept, collectives pulled forward, waits deferred, bytes in flight capped)
 * and XLA's latency-hiding scheduler (a clock-driven list scheduler that
 * fills a stall with independent work). The clock is the simulator's own
 * engine; memory is checked against the input order's whole profile
 * (memtree.c). docs/scheduler.md has the rules.
 *
 * Requires: an SgSchedProblem (problem.c). Invalidates: nothing (it returns
 * an order; the driver in scheduler.c applies it).
 */
#include <string.h>

#include "schedule-private.h"

/* --- small containers ------------------------------------------------------ */

/* Binary min-heap of 64-bit keys: (priority << 32) | id, so ties break on id. */
typedef struct {
  int64_t *a;
  int32_t n, cap;
} Heap;

static void
heap_push (Heap *h, int64_t k)
{
  if (h->n == h->cap) {
    h->cap = MAX (16, h->cap * 2);
    h->a = g_renew (int64_t, h->a, (size_t)h->cap);
  }
  int32_t i = h->n++;
  while (i > 0) {
    int32_t p = (i - 1) / 2;
    if (h->a[p] <= k)
      break;
    h->a[i] = h->a[p];
    i = p;
  }
  h->a[i] = k;
}

static void
heap_pop (Heap *h)
{
  int64_t k = h->a[--h->n];
  int32_t i = 0;
  for (;;) {
    int32_t c = 2 * i + 1;
    if (c >= h->n)
      break;
    if (c + 1 < h->n && h->a[c + 1] < h->a[c])
      c++;
    if (k <= h->a[c])
      break;
    h->a[i] = h->a[c];
    i = c;
  }
  if (h->n > 0)
    h->a[i] = k;
}

#define KEY(prio, id) (((int64_t)(prio) << 32) | (int64_t)(uint32_t)(id))
#define KEY_ID(k) ((SgNodeId)((k) & 0xffffffff))

/* --- one variant ------------------------------------------------------------- */

typedef struct {
  const SgSchedProblem *P;
  int32_t window; /* how far (ids) compute may be pulled into a stall; 0 = never */
  int32_t boost;  /* priority boost of compute feeding a collective (see prio) */
  uint8_t *placed;
  uint8_t *avail;    /* wait whose collective is issued: its readers may become ready */
  uint8_t *released; /* collective whose budget (bytes, count in flight) is returned */
  uint8_t *deferred; /* wait passed by the frontier while its collective ran */
  /* Deferred waits not placed yet; per storage root, the input position up
   * to which the memory a deferred wait keeps alive is reserved (one
   * storage read by several collectives is counted once). */
  SgNodeId *pend;
  int32_t n_pend;
  int32_t *root_resv;
  int32_t *npend; /* inputs not placed (a wait counts as placed once available) */
  int32_t *nblk;  /* of a ready node: available waits whose collective still runs */
  Heap ready;  /* compute ready and not blocked by an unfinished collective */
  Heap *colls; /* per group: ready collectives by (deadline, id) */
  int32_t *fifo_next, *fifo_head, *fifo_tail; /* per group: issued, unreleased, FIFO */
  uint64_t *in_flight;
  int32_t *n_in_flight;
  SgNodeId mem_wait_x;  /* compute the memory check refused to move up */
  int32_t mem_wait_x_at;
  SgNodeId *mem_wait_c; /* per group: collective the memory check refused */
  int32_t *mem_wait_at; /* ... until the frontier reaches this position */
  SgMemTree seg;
  SgSimEngine eng;
  SgNodeId *order;
  int32_t n_order, frontier;
  SgNodeId *stack;
  SgNodeId *done; /* finished collectives whose wait is deferred or feeds a collective */
  int32_t n_done;
  int32_t n_pulled, n_early, n_forced, n_boosted, n_forced_waits, n_shielded;
} Run;

static void run_place (Run *R, SgNodeId x);

/* Base priority: the input order, except that compute feeding a collective
 * (through compute only) is ordered by that collective's position (boost >
 * 0) or deadline (boost < 0) when that is less than |boost| ahead: the
 * collective's inputs run first, so it starts earlier. Non-negative; ties
 * break on id. */
static int32_t
prio (const Run *R, SgNodeId x)
{
  if (R->boost < 0)
    return MIN (x - R->boost, R->P->near_dead[x]);
  return MIN (x + R->boost, R->P->near_coll[x]);
}

static void
became_ready (Run *R, SgNodeId u)
{
  const SgSchedProblem *P = R->P;
  if (P->role[u] == SG_ROLE_COLL) {
    heap_push (&R->colls[P->g->nodes[u].group], KEY (P->deadline[u], u));
    return;
  }
  if (P->role[u] != SG_ROLE_COMPUTE)
    return;
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (P->g, u, &k);
  int32_t blk = 0;
  for (uint32_t j = 0; j < k; j++)
    if (P->role[in[j]] == SG_ROLE_WAIT && !R->placed[in[j]] && P->coll_of[in[j]] != SG_NO_NODE
        && !sg_eng_finished (&R->eng, P->coll_of[in[j]]))
      blk++;
  R->nblk[u] = blk;
  if (blk == 0)
    heap_push (&R->ready, KEY (prio (R, u), u));
}

static void
dec_pending (Run *R, SgNodeId u)
{
  if (--R->npend[u] == 0)
    became_ready (R, u);
}

static void
on_finish (void *ud, SgNodeId c)
{
  Run *R = ud;
  const SgSchedProblem *P = R->P;
  for (uint32_t a = P->ufirst[c]; a < P->ufirst[c + 1]; a++) {
    SgNodeId w = P->users[a];
    if (P->role[w] != SG_ROLE_WAIT)
      continue;
    for (uint32_t b = P->ufirst[w]; b < P->ufirst[w + 1]; b++) {
      SgNodeId u = P->users[b];
      if (P->role[u] == SG_ROLE_COMPUTE && R->npend[u] == 0 && !R->placed[u]
          && --R->nblk[u] == 0)
        heap_push (&R->ready, KEY (prio (R, u), u));
    }
  }
  SgNodeId w = P->wait_of[c];
  if (w != SG_NO_NODE && (P->feeds_coll[w] || R->deferred[w]))
    R->done[R->n_done++] = c;
  if (P->wait_of[c] == SG_NO_NODE && !R->released[c]) {
    R->released[c] = 1;
    R->in_flight[P->g->nodes[c].group] -= P->comm[c];
    R->n_in_flight[P->g->nodes[c].group]--;
  }
}

/* Memory is checked against the input order's live-bytes profile (by
 * base position, i.e. input-order id) plus what earlier decisions added:
 * @b more bytes over positions [@a, @e) must stay within the limit. */
static bool
mem_fits_range_at (Run *R, uint64_t b, int32_t a, int32_t e, int32_t *at)
{
  if (b == 0 || a >= e)
    return true;
  int64_t m = sg_memtree_max (&R->seg, a, e, at);
  return m + (int64_t)b <= (int64_t)R->P->limit;
}

static bool
mem_fits_range (Run *R, uint64_t b, int32_t a, int32_t e)
{
  return mem_fits_range_at (R, b, a, e, NULL);
}

static void
mem_take_range (Run *R, uint64_t b, int32_t a, int32_t e)
{
  if (b > 0 && a < e)
    sg_memtree_add (&R->seg, a, e, (int64_t)b);
}

/* Running compute @x at the frontier instead of its own position allocates
 * early; a refusal is remembered until the frontier passes the position
 * that was full (added bytes never go away, see try_issue). */
static bool
mem_fits_moved (Run *R, SgNodeId x)
{
  if (R->mem_wait_x == x && R->frontier < R->mem_wait_x_at)
    return false;
  int32_t at = -1;
  bool ok = mem_fits_range_at (R, R->P->alloc[x], R->frontier, x, &at);
  R->mem_wait_x = ok ? SG_NO_NODE : x;
  R->mem_wait_x_at = at + 1;
  return ok;
}

static void
mem_take (Run *R, SgNodeId x, int32_t at)
{
  mem_take_range (R, R->P->alloc[x], at, x);
}

static void
release (Run *R, SgNodeId c)
{
  if (R->released[c])
    return;
  R->released[c] = 1;
  int32_t grp = R->P->g->nodes[c].group;
  R->in_flight[grp] -= R->P->comm[c];
  R->n_in_flight[grp]--;
}

static void
run_place (Run *R, SgNodeId x)
{
  const SgSchedProblem *P = R->P;
  g_assert (!R->placed[x]);
  R->placed[x] = 1;
  R->order[R->n_order++] = x;
  mem_take (R, x, MIN (R->frontier, P->n - 1));
  switch ((SgRole)P->role[x]) {
  case SG_ROLE_COLL: {
    int32_t grp = P->g->nodes[x].group;
    R->in_flight[grp] += P->comm[x];
    R->n_in_flight[grp]++;
    R->fifo_next[x] = -1;
    if (R->fifo_tail[grp] < 0)
      R->fifo_head[grp] = x;
    else
      R->fifo_next[R->fifo_tail[grp]] = x;
    R->fifo_tail[grp] = x;
    sg_eng_issue (&R->eng, x);
    for (uint32_t a = P->ufirst[x]; a < P->ufirst[x + 1]; a++) {
      SgNodeId w = P->users[a];
      if (P->role[w] != SG_ROLE_WAIT || R->avail[w])
        continue;
      R->avail[w] = 1;
      for (uint32_t b = P->ufirst[w]; b < P->ufirst[w + 1]; b++)
        if (P->role[P->users[b]] == SG_ROLE_COMPUTE)
          dec_pending (R, P->users[b]);
    }
    break;
  }
  case SG_ROLE_WAIT: {
    SgNodeId c = P->coll_of[x];
    if (c != SG_NO_NODE) {
      sg_eng_wait (&R->eng, x, c);
      release (R, c);
    }
    break;
  }
  case SG_ROLE_COMPUTE:
    sg_eng_compute (&R->eng, x, P->cost[x]);
    break;
  }
  bool wait_avail = P->role[x] == SG_ROLE_WAIT && R->avail[x];
  for (uint32_t a = P->ufirst[x]; a < P->ufirst[x + 1]; a++) {
    SgNodeId u = P->users[a];
    if (wait_avail && P->role[u] == SG_ROLE_COMPUTE)
      continue; /* counted when the collective was issued */
    dec_pending (R, u);
  }
}

/* Places @x after everything it needs that is not placed yet (waits, and
 * collectives not issued yet, which are then issued regardless of limits). */
static void
run_demand (Run *R, SgNodeId x)
{
  const SgSchedProblem *P = R->P;
  int32_t sp = 0;
  R->stack[sp++] = x;
  while (sp > 0) {
    SgNodeId t = R->stack[sp - 1];
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (P->g, t, &k);
    SgNodeId need = SG_NO_NODE;
    for (uint32_t j = 0; j < k && need == SG_NO_NODE; j++)
      if (!R->placed[in[j]])
        need = in[j];
    if (need != SG_NO_NODE) {
      R->stack[sp++] = need;
      continue;
    }
    sp--;
    if (!R->placed[t]) {
      if (P->role[t] == SG_ROLE_COLL)
        R->n_forced++;
      run_place (R, t);
    }
  }
}

static bool
budget_allows (Run *R, SgNodeId c)
{
  const SgSchedProblem *P = R->P;
  int32_t grp = P->g->nodes[c].group;
  if (R->n_in_flight[grp] == 0)
    return true;
  if (P->max_in_flight > 0 && R->in_flight[grp] + P->comm[c] > P->max_in_flight)
    return false;
  if (P->prefetch_limit > 0 && R->n_in_flight[grp] >= P->prefetch_limit)
    return false;
  return true;
}

/* Places the wait of the group's oldest in-flight collective when that
 * collective has already finished (no stall): frees budget for the next. */
static bool
release_early (Run *R, int32_t grp)
{
  const SgSchedProblem *P = R->P;
  while (R->fifo_head[grp] >= 0 && R->released[R->fifo_head[grp]])
    R->fifo_head[grp] = R->fifo_next[R->fifo_head[grp]];
  if (R->fifo_head[grp] < 0)
    R->fifo_tail[grp] = -1;
  SgNodeId c = R->fifo_head[grp];
  if (c < 0 || !sg_eng_finished (&R->eng, c) || P->wait_of[c] == SG_NO_NODE)
    return false;
  R->n_early++;
  run_demand (R, P->wait_of[c]);
  return true;
}

static void
try_issue (Run *R, bool force)
{
  const SgSchedProblem *P = R->P;
  for (int32_t grp = 0; grp < P->n_groups; grp++) {
    Heap *h = &R->colls[grp];
    while (h->n > 0) {
      SgNodeId c = KEY_ID (h->a[0]);
      if (R->placed[c]) {
        heap_pop (h);
        continue;
      }
      /* Added bytes never go away, so a collective that did not fit
       * cannot fit before the frontier passes the position that was full. */
      bool fits;
      if (R->mem_wait_c[grp] == c && R->frontier < R->mem_wait_at[grp]) {
        fits = false;
      } else {
        int32_t at = -1;
        fits = mem_fits_range_at (R, P->alloc[c], R->frontier, c, &at);
        R->mem_wait_c[grp] = fits ? SG_NO_NODE : c;
        R->mem_wait_at[grp] = at + 1;
      }
      if (force || (budget_allows (R, c) && fits)) {
        heap_pop (h);
        run_place (R, c);
        continue;
      }
      if (fits && release_early (R, grp))
        continue;
      break;
    }
  }
}

/* Would placing @x now stall the compute stream on a collective? */
static bool
would_stall (Run *R, SgNodeId x)
{
  const SgSchedProblem *P = R->P;
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (P->g, x, &k);
  for (uint32_t j = 0; j < k; j++) {
    SgNodeId i = in[j];
    if (R->placed[i])
      continue;
    if (P->role[i] == SG_ROLE_COLL)
      return true;
    if (P->role[i] == SG_ROLE_WAIT
        && (P->coll_of[i] == SG_NO_NODE || !sg_eng_finished (&R->eng, P->coll_of[i])))
      return true;
  }
  return false;
}

static bool
frontier_stop (const Run *R, SgNodeId x)
{
  const SgSchedProblem *P = R->P;
  if (R->placed[x])
    return false;
  return P->role[x] == SG_ROLE_COMPUTE || (P->role[x] == SG_ROLE_WAIT && !R->deferred[x]);
}

static bool
holds_sms (const SgSchedProblem *P, SgNodeId x)
{
  return sg_node_holds_sms (&P->g->nodes[x]) && P->cost[x] > 0.0;
}

/* How far down the ready heap's array a shield is looked for, and how far
 * ahead of the GEMM (ids) it may come from. */
#define SHIELD_SCAN 64
#define SHIELD_WINDOW 256

/* Start wait (docs/scheduler.md): a collective issued right before a
 * matmul/attention kernel waits for it. When one was just issued (the
 * engine holds it for the next kernel) and @x, a GEMM that would run next,
 * returns a ready compute node that does not hold the SMs (cost > 0; the
 * lowest priority key among the first SHIELD_SCAN heap entries, at most
 * SHIELD_WINDOW ids after @x) to run first, so the collective starts at once; else
 * SG_NO_NODE. */
static SgNodeId
shield_for (Run *R, SgNodeId x)
{
  const SgSchedProblem *P = R->P;
  if (R->eng.n_held <= R->eng.n_kheld || !holds_sms (P, x) || would_stall (R, x))
    return SG_NO_NODE;
  int64_t best = INT64_MAX;
  for (int32_t i = 0; i < MIN (R->ready.n, SHIELD_SCAN); i++) {
    int64_t k = R->ready.a[i];
    SgNodeId c = KEY_ID (k);
    if (k >= best || R->placed[c] || c == x || holds_sms (P, c) || P->cost[c] <= 0.0
        || c - x > SHIELD_WINDOW)
      continue;
    best = k;
  }
  return best == INT64_MAX ? SG_NO_NODE : KEY_ID (best);
}

/* Places the shield for @next, if any and memory allows; its heap entry
 * goes when it reaches the top (placed entries are skipped). */
static bool
run_shield (Run *R, SgNodeId next)
{
  SgNodeId s = shield_for (R, next);
  if (s == SG_NO_NODE || !mem_fits_moved (R, s))
    return false;
  R->n_shielded++;
  run_demand (R, s);
  return true;
}

/* Reserves the memory that keeps collective @c's input alive up to input
 * position @to; false (nothing reserved) when it does not fit. */
static bool
reserve_input (Run *R, SgNodeId c, int32_t to)
{
  const SgSchedProblem *P = R->P;
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (P->g, c, &k);
  if (k == 0)
    return true;
  SgNodeId r = P->root[in[0]];
  /* The input lives to in_end in the input order anyway. */
  int32_t from = MAX (R->root_resv[r], P->in_end[c]);
  if (from >= to)
    return true;
  if (!mem_fits_range (R, P->in_bytes[c], from, to))
    return false;
  mem_take_range (R, P->in_bytes[c], from, to);
  R->root_resv[r] = to;
  return true;
}

/* The frontier reached wait @w's input-order position. A wait on a finished
 * collective costs nothing: place it. Otherwise defer it (to its first
 * consumer, or to the collective's end, whichever comes first) while the
 * collective's input, held until the wait, still fits in memory: the
 * reservation grows with the frontier (extend_deferred), and the wait is
 * placed (stalling) the first time it would not fit. That holds for a
 * collective not issued yet too (its input may be a deferred wait of
 * another collective): it is issued once it can be, or when the consumer
 * demands it. */
static void
reach_wait (Run *R, SgNodeId w)
{
  const SgSchedProblem *P = R->P;
  SgNodeId c = P->coll_of[w];
  if (c == SG_NO_NODE || (R->placed[c] && sg_eng_finished (&R->eng, c))
      || !reserve_input (R, c, w + 1)) {
    run_demand (R, w);
    return;
  }
  R->deferred[w] = 1;
  R->pend[R->n_pend++] = w;
}

/* Extends the memory reservation of every deferred wait up to the frontier,
 * placing the waits whose collective's input no longer fits. */
static void
extend_deferred (Run *R)
{
  const SgSchedProblem *P = R->P;
  int32_t k = 0;
  for (int32_t i = 0; i < R->n_pend; i++) {
    SgNodeId w = R->pend[i];
    if (R->placed[w])
      continue;
    if (!reserve_input (R, P->coll_of[w], MIN (R->frontier + 1, P->n))) {
      R->n_forced_waits++;
      run_demand (R, w);
      continue;
    }
    R->pend[k++] = w;
  }
  R->n_pend = k;
}

static void
run_init (Run *R, const SgSchedProblem *P, int32_t window, int32_t boost)
{
  memset (R, 0, sizeof *R);
  int32_t n = P->n, ng = MAX (P->n_groups, 1);
  R->P = P;
  R->window = window;
  R->boost = boost;
  R->placed = g_new0 (uint8_t, (size_t)n);
  R->avail = g_new0 (uint8_t, (size_t)n);
  R->released = g_new0 (uint8_t, (size_t)n);
  R->deferred = g_new0 (uint8_t, (size_t)n);
  R->pend = g_new (SgNodeId, (size_t)n + 1);
  R->root_resv = g_new0 (int32_t, (size_t)n + 1);
  R->npend = g_new (int32_t, (size_t)n);
  R->nblk = g_new0 (int32_t, (size_t)n);
  R->colls = g_new0 (Heap, (size_t)ng);
  R->fifo_next = g_new (int32_t, (size_t)n);
  R->fifo_head = g_new (int32_t, (size_t)ng);
  R->fifo_tail = g_new (int32_t, (size_t)ng);
  for (int32_t i = 0; i < ng; i++)
    R->fifo_head[i] = R->fifo_tail[i] = -1;
  R->in_flight = g_new0 (uint64_t, (size_t)ng);
  R->n_in_flight = g_new0 (int32_t, (size_t)ng);
  R->mem_wait_c = g_new (SgNodeId, (size_t)ng);
  R->mem_wait_at = g_new0 (int32_t, (size_t)ng);
  R->mem_wait_x = SG_NO_NODE;
  for (int32_t i = 0; i < ng; i++)
    R->mem_wait_c[i] = SG_NO_NODE;
  sg_memtree_init (&R->seg, n, P->profile);
  sg_eng_init (&R->eng, P->g, &P->cont, false);
  R->eng.on_finish = on_finish;
  R->eng.ud = R;
  R->order = g_new (SgNodeId, (size_t)n);
  R->stack = g_new (SgNodeId, (size_t)n + 1);
  R->done = g_new (SgNodeId, (size_t)n + 1);
  for (SgNodeId i = 0; i < n; i++) {
    R->npend[i] = (int32_t)P->g->nodes[i].n_in;
    if (R->npend[i] == 0)
      became_ready (R, i);
  }
}

static void
run_clear (Run *R)
{
  g_free (R->placed);
  g_free (R->avail);
  g_free (R->released);
  g_free (R->deferred);
  g_free (R->pend);
  g_free (R->root_resv);
  g_free (R->npend);
  g_free (R->nblk);
  g_free (R->ready.a);
  for (int32_t i = 0; i < MAX (R->P->n_groups, 1); i++)
    g_free (R->colls[i].a);
  g_free (R->colls);
  g_free (R->fifo_next);
  g_free (R->fifo_head);
  g_free (R->fifo_tail);
  g_free (R->in_flight);
  g_free (R->n_in_flight);
  g_free (R->mem_wait_c);
  g_free (R->mem_wait_at);
  sg_memtree_clear (&R->seg);
  sg_eng_clear (&R->eng);
  g_free (R->stack);
  g_free (R->done);
}

SgNodeId *
sg_sched_run_variant (const SgSchedProblem *P, int32_t window, int32_t boost, bool shield,
                      SgScheduleStats *st, SgSimResult *res)
{
  Run R;
  run_init (&R, P, window, boost);
  shield = shield && R.eng.sw > 0.0;
  int32_t n = P->n;
  while (R.n_order < n) {
    while (R.frontier < n && !frontier_stop (&R, R.frontier))
      R.frontier++;
    if (R.frontier >= n) {
      /* Only collectives without consumers are left. */
      try_issue (&R, true);
      for (SgNodeId i = 0; i < n; i++)
        if (!R.placed[i])
          run_demand (&R, i);
      break;
    }
    SgNodeId x = R.frontier;
    if (x == P->g->output) {
      try_issue (&R, true);
      for (SgNodeId i = 0; i < n; i++)
        if (!R.placed[i] && i != x)
          run_demand (&R, i);
      run_demand (&R, x);
      continue;
    }
    /* Deferred waits go in as soon as their collective is done (free), so
     * memory is released and a collective reading the result can start. */
    for (int32_t d = 0; d < R.n_done; d++)
      if (!R.placed[P->wait_of[R.done[d]]])
        run_demand (&R, P->wait_of[R.done[d]]);
    R.n_done = 0;
    extend_deferred (&R);
    try_issue (&R, false);
    if (R.placed[x])
      continue;
    if (P->role[x] == SG_ROLE_WAIT) {
      reach_wait (&R, x);
      continue;
    }
    SgNodeId f = SG_NO_NODE;
    while (R.ready.n > 0) {
      SgNodeId c = KEY_ID (R.ready.a[0]);
      if (R.placed[c]) {
        heap_pop (&R.ready);
        continue;
      }
      f = c;
      break;
    }
    if (f != SG_NO_NODE && f != x && prio (&R, f) < prio (&R, x) && mem_fits_moved (&R, f)) {
      if (shield && run_shield (&R, f))
        continue;
      heap_pop (&R.ready);
      R.n_boosted++;
      run_demand (&R, f);
      continue;
    }
    if (R.window > 0 && would_stall (&R, x)) {
      if (f != SG_NO_NODE && f != x && f - x <= R.window && mem_fits_moved (&R, f)) {
        if (shield && run_shield (&R, f))
          continue;
        heap_pop (&R.ready);
        R.n_pulled++;
        run_demand (&R, f);
        continue;
      }
    }
    if (shield && run_shield (&R, x))
      continue;
    run_demand (&R, x);
  }
  st->n_pulled = R.n_pulled + R.n_shielded; /* a shield is pulled forward too */
  st->n_early_waits = R.n_early;
  st->n_forced = R.n_forced;
  st->n_boosted = R.n_boosted;
  /* The run drove the simulator's own engine through this very order, so
   * its numbers are what sg_simulate() would report. */
  double compute_end = R.eng.now;
  sg_eng_drain (&R.eng);
  memset (res, 0, sizeof *res);
  sg_sim_classify (R.eng.rows, R.eng.n_rows, res);
  res->step_us = MAX (compute_end, R.eng.now);
  g_autofree int32_t *pos = sg_sched_positions (P->g, R.order);
  res->peak_bytes = sg_graph_liveness (P->g, pos, NULL, P->root, P->alloc);
  SgNodeId *order = g_steal_pointer (&R.order);
  run_clear (&R);
  return order;
}

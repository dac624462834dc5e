/* scheduler.c: the exposure-aware list scheduler (sg_schedule_reorder).
 *
 * Mirrors: PyTorch Inductor's schedule_overlap_bucketing (compute order
 * kept, collectives pulled forward, waits deferred, bytes in flight capped)
 * and XLA's latency-hiding scheduler (a clock-driven list scheduler that
 * fills a stall with independent work). Ours differs where those are weak:
 * the clock is the simulator's own engine (one stream per group, so two
 * collectives on one communicator serialise, and overlap contention is
 * counted); memory is checked against the input order's whole live-bytes
 * profile with a range-add/range-max tree rather than a running total;
 * several deterministic variants are tried and the simulator keeps the
 * best, never worse than the input order. docs/scheduler.md has the rules.
 *
 * Requires: est_us (estimate/). Invalidates: the id order (permutes),
 * users (rebuilt), implicit edges of kind hide_start / hide_wait
 * (re-recorded).
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

/* --- the problem, shared by every variant ---------------------------------- */

typedef struct {
  const SgGraph *g;
  int32_t n, n_groups;
  uint8_t *role;
  double *cost;
  uint64_t *alloc;   /* bytes a node allocates (0 for aliases) */
  SgNodeId *root;    /* storage root of every node */
  uint64_t *comm;    /* bytes a collective moves */
  uint64_t *in_bytes; /* collective -> bytes of its input's storage (held until the wait) */
  SgNodeId *wait_of; /* collective -> its first wait, or SG_NO_NODE */
  SgNodeId *coll_of; /* wait -> its collective */
  int32_t *deadline; /* collective -> id of the first user of its wait */
  uint8_t *feeds_coll; /* wait -> read by a collective (placed as soon as free) */
  int32_t *near_coll; /* compute -> lowest id of a collective it feeds through compute, or n */
  int32_t *near_dead; /* compute -> earliest deadline of a collective it feeds, or n */
  uint32_t *ufirst;  /* users CSR (g is const here) */
  SgNodeId *users;
  uint64_t *profile; /* live bytes of the input order, by id */
  uint64_t peak_in, limit;
  SgContention cont;
  uint64_t max_in_flight;
  int32_t prefetch_limit;
} Problem;

static void
problem_init (Problem *P, const SgGraph *g, const SgConfig *cfg)
{
  memset (P, 0, sizeof *P);
  int32_t n = g->n_nodes;
  P->g = g;
  P->n = n;
  P->n_groups = g->n_groups;
  P->role = g_new (uint8_t, (size_t)n);
  P->cost = g_new (double, (size_t)n);
  P->alloc = g_new (uint64_t, (size_t)n);
  P->comm = g_new0 (uint64_t, (size_t)n);
  P->in_bytes = g_new0 (uint64_t, (size_t)n);
  P->wait_of = g_new (SgNodeId, (size_t)n);
  P->coll_of = g_new (SgNodeId, (size_t)n);
  P->deadline = g_new (int32_t, (size_t)n);
  P->feeds_coll = g_new0 (uint8_t, (size_t)n);
  P->near_coll = g_new (int32_t, (size_t)n);
  P->near_dead = g_new (int32_t, (size_t)n);
  P->ufirst = g_new0 (uint32_t, (size_t)n + 1);
  for (SgNodeId i = 0; i < n; i++) {
    const SgNode *nd = &g->nodes[i];
    P->role[i] = (uint8_t)sg_sched_role (nd);
    P->cost[i] = sg_sched_cost (nd);
    P->alloc[i] = sg_node_alloc_bytes (g, i);
    P->wait_of[i] = P->coll_of[i] = SG_NO_NODE;
    P->deadline[i] = n;
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, i, &k);
    if (P->role[i] == SG_ROLE_COLL) {
      P->comm[i] = sg_node_comm_bytes (g, i);
      if (k > 0)
        P->in_bytes[i] = sg_node_alloc_bytes (g, sg_node_storage_root (g, in[0]));
    }
    for (uint32_t j = 0; j < k; j++)
      P->ufirst[in[j] + 1]++;
  }
  for (SgNodeId i = 0; i < n; i++)
    P->ufirst[i + 1] += P->ufirst[i];
  P->users = g_new (SgNodeId, (size_t)P->ufirst[n] + 1);
  g_autofree uint32_t *fill = g_memdup2 (P->ufirst, sizeof (uint32_t) * ((size_t)n + 1));
  for (SgNodeId i = 0; i < n; i++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, i, &k);
    for (uint32_t j = 0; j < k; j++)
      P->users[fill[in[j]]++] = i;
    for (uint32_t j = 0; j < k; j++)
      if (P->role[i] == SG_ROLE_COLL && P->role[in[j]] == SG_ROLE_WAIT)
        P->feeds_coll[in[j]] = 1;
    if (P->role[i] == SG_ROLE_WAIT) {
      SgNodeId c = sg_node_wait_target (g, i);
      if (c != SG_NO_NODE && P->role[c] == SG_ROLE_COLL) {
        P->coll_of[i] = c;
        if (P->wait_of[c] == SG_NO_NODE)
          P->wait_of[c] = i;
      }
    }
  }
  /* Deadline: where the input order first needs the collective's result. */
  for (SgNodeId c = 0; c < n; c++) {
    SgNodeId w = P->wait_of[c];
    if (w == SG_NO_NODE)
      continue;
    int32_t d = w;
    if (P->ufirst[w + 1] > P->ufirst[w])
      d = P->users[P->ufirst[w]]; /* users are in ascending id order */
    P->deadline[c] = d;
  }
  /* What compute feeds: the nearest collective (by id, by deadline). */
  for (SgNodeId x = n - 1; x >= 0; x--) {
    int32_t bc = n, bd = n;
    for (uint32_t a = P->ufirst[x]; a < P->ufirst[x + 1]; a++) {
      SgNodeId u = P->users[a];
      if (P->role[u] == SG_ROLE_COLL) {
        bc = MIN (bc, u);
        bd = MIN (bd, P->deadline[u]);
      } else if (P->role[u] == SG_ROLE_COMPUTE) {
        bc = MIN (bc, P->near_coll[u]);
        bd = MIN (bd, P->near_dead[u]);
      }
    }
    P->near_coll[x] = bc;
    P->near_dead[x] = bd;
  }
  P->profile = g_new (uint64_t, (size_t)MAX (n, 1));
  g_autofree int32_t *pos = sg_sched_positions (g, NULL);
  P->root = sg_sched_roots (g);
  P->peak_in = sg_sched_liveness (g, pos, P->profile, P->root, P->alloc);
  double inc = cfg ? cfg->max_peak_increase : SG_SCHEDULE_DEFAULT_MAX_PEAK_INCREASE;
  P->limit = (uint64_t)((double)P->peak_in * (1.0 + inc));
  P->max_in_flight = cfg ? cfg->max_in_flight_bytes : SG_SCHEDULE_DEFAULT_IN_FLIGHT_BYTES;
  P->prefetch_limit = cfg ? cfg->prefetch_limit : SG_SCHEDULE_DEFAULT_PREFETCH_LIMIT;
  const SgCostModel *cm = sg_graph_cost_model (g);
  P->cont = cm ? *sg_cost_model_contention (cm) : (SgContention){ 1.0, 1.0 };
}

static void
problem_clear (Problem *P)
{
  g_free (P->role);
  g_free (P->cost);
  g_free (P->alloc);
  g_free (P->root);
  g_free (P->comm);
  g_free (P->in_bytes);
  g_free (P->wait_of);
  g_free (P->coll_of);
  g_free (P->deadline);
  g_free (P->feeds_coll);
  g_free (P->near_coll);
  g_free (P->near_dead);
  g_free (P->ufirst);
  g_free (P->users);
  g_free (P->profile);
}

/* --- one variant ------------------------------------------------------------- */

typedef struct {
  const Problem *P;
  int32_t window; /* how far (ids) compute may be pulled into a stall; 0 = never */
  int32_t boost;  /* compute feeding a collective within this many ids goes this much earlier */
  uint8_t *placed, *avail, *released;
  uint8_t *deferred; /* wait passed by the frontier while its collective ran */
  int32_t *npend, *nblk;
  Heap ready;  /* compute ready and not blocked by an unfinished collective */
  Heap *colls; /* per group: ready collectives by (deadline, id) */
  int32_t *fifo, *fifo_next, *fifo_head, *fifo_tail; /* per group: issued, unreleased */
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
  SgNodeId *done; /* finished collectives whose wait feeds a collective */
  int32_t n_done;
  int32_t n_pulled, n_early, n_forced, n_boosted;
} Run;

static void run_place (Run *R, SgNodeId x);

/* Base priority: the input order, except that compute feeding a collective
 * (through compute only) is ordered by that collective's position when it
 * is less than @boost ahead: the collective's inputs run first, so it
 * starts earlier. Non-negative; ties break on id. */
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
  const Problem *P = R->P;
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
  const Problem *P = R->P;
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
  const Problem *P = R->P;
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
  const Problem *P = R->P;
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
  const Problem *P = R->P;
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
  const Problem *P = R->P;
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
  const Problem *P = R->P;
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
  const Problem *P = R->P;
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
  const Problem *P = R->P;
  if (R->placed[x])
    return false;
  return P->role[x] == SG_ROLE_COMPUTE || (P->role[x] == SG_ROLE_WAIT && !R->deferred[x]);
}

/* The frontier reached wait @w's input-order position. A wait on a finished
 * collective costs nothing: place it. Otherwise defer it (to its first
 * consumer, or to the collective's end, whichever comes first) when the
 * collective's input, held until the wait, still fits in memory. */
static void
reach_wait (Run *R, SgNodeId w)
{
  const Problem *P = R->P;
  SgNodeId c = P->coll_of[w];
  if (c == SG_NO_NODE || !R->placed[c] || sg_eng_finished (&R->eng, c) || P->feeds_coll[w]) {
    run_demand (R, w);
    return;
  }
  int32_t d = P->wait_of[c] == w ? P->deadline[c] : w;
  if (!mem_fits_range (R, P->in_bytes[c], w, d)) {
    run_demand (R, w);
    return;
  }
  mem_take_range (R, P->in_bytes[c], w, d);
  R->deferred[w] = 1;
}

static void
run_init (Run *R, const Problem *P, int32_t window, int32_t boost)
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

/* Runs one variant; returns the order (transfer full). */
static SgNodeId *
run_variant (const Problem *P, int32_t window, int32_t boost, SgScheduleStats *st,
             SgSimResult *res)
{
  Run R;
  run_init (&R, P, window, boost);
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
    /* A collective that reads another's result is issued once that ends. */
    for (int32_t d = 0; d < R.n_done; d++)
      if (!R.placed[P->wait_of[R.done[d]]])
        run_demand (&R, P->wait_of[R.done[d]]);
    R.n_done = 0;
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
      heap_pop (&R.ready);
      R.n_boosted++;
      run_demand (&R, f);
      continue;
    }
    if (R.window > 0 && would_stall (&R, x)) {
      if (f != SG_NO_NODE && f != x && f - x <= R.window && mem_fits_moved (&R, f)) {
        heap_pop (&R.ready);
        R.n_pulled++;
        run_demand (&R, f);
        continue;
      }
    }
    run_demand (&R, x);
  }
  st->n_pulled = R.n_pulled;
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
  res->peak_bytes = sg_sched_liveness (P->g, pos, NULL, P->root, P->alloc);
  SgNodeId *order = g_steal_pointer (&R.order);
  run_clear (&R);
  return order;
}

/* --- driver ----------------------------------------------------------------- */

/* The variants tried: (stall-fill window, priority boost; a negative boost
 * ranks compute by the deadline of the collective it feeds, a positive one
 * by that collective's position). Chosen on the sample graphs and graphgen
 * graphs of 8 to 80 layers (docs/scheduler.md): for every one of them the
 * best of a 28-variant grid is in this set. */
static const struct {
  int32_t window, boost;
  const char *name;
} variants[] = {
  { 128, -64, "pull-128/deadline-64" }, { 1024, 16, "pull-1024/feed-16" },
  { 16, -16, "pull-16/deadline-16" },   { 0, -64, "deadline-64" },
  { 0, 64, "feed-64" },                 { 128, -16, "pull-128/deadline-16" },
};

/* Exposed time within this fraction of the best counts as a tie (the cost
 * model is not that precise); ties go to fewer fully exposed collectives,
 * then to less exposed time, then to a shorter step. */
#define EXPOSED_TIE 0.025

static bool
better_result (const SgSimResult *r, uint64_t limit, uint64_t input_peak, double input_exp,
               double best_exp,
               int32_t best_n, double best_step)
{
  if (r->peak_bytes > MAX (limit, input_peak) || r->exposed_us > input_exp + 1e-6)
    return false;
  double lo = MIN (r->exposed_us, best_exp);
  double tie = EXPOSED_TIE * lo + 1e-6;
  if (fabs (r->exposed_us - best_exp) > tie)
    return r->exposed_us < best_exp;
  if (r->exposed != best_n)
    return r->exposed < best_n;
  if (fabs (r->exposed_us - best_exp) > 1e-6)
    return r->exposed_us < best_exp;
  return r->step_us < best_step - 1e-6;
}

SgNodeId *
sg_schedule_compute (const SgGraph *g, const SgConfig *cfg, SgScheduleStats *stats,
                     GError **error)
{
  g_return_val_if_fail (g != NULL && g->n_nodes > 0, NULL);
  SgScheduleStats dummy;
  SgScheduleStats *st = stats ? stats : &dummy;
  memset (st, 0, sizeof *st);
  if (cfg && (!(cfg->max_peak_increase >= 0.0) || cfg->prefetch_limit < 0)) {
    g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_ORDER,
                 "schedule: max_peak_increase must be >= 0 and prefetch_limit >= 0 "
                 "(got %g and %d)",
                 cfg->max_peak_increase, cfg->prefetch_limit);
    return NULL;
  }
  SgSimResult base;
  if (!sg_simulate (g, NULL, &base, error))
    return NULL;
  st->variant = -1;
  st->variant_name = "input";
  st->input_exposed_us = st->scheduled_exposed_us = base.exposed_us;
  st->input_peak_bytes = st->scheduled_peak_bytes = base.peak_bytes;
  double best_exp = base.exposed_us, best_step = base.step_us;
  int32_t best_exposed_n = base.exposed;
  sg_sim_result_clear (&base);
  SgNodeId *best = g_new (SgNodeId, (size_t)g->n_nodes);
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    best[i] = i;
  if (cfg && !cfg->reorder)
    return best;
  Problem P;
  problem_init (&P, g, cfg);
  st->peak_limit_bytes = P.limit;
  for (int32_t v = 0; v < (int32_t)G_N_ELEMENTS (variants); v++) {
    SgScheduleStats vs = { 0 };
    SgSimResult r;
    g_autofree SgNodeId *order
        = run_variant (&P, variants[v].window, variants[v].boost, &vs, &r);
    st->n_variants++;
    if (better_result (&r, P.limit, st->input_peak_bytes, st->input_exposed_us, best_exp,
                       best_exposed_n, best_step)) {
      best_exp = r.exposed_us;
      best_step = r.step_us;
      best_exposed_n = r.exposed;
      memcpy (best, order, sizeof (SgNodeId) * (size_t)g->n_nodes);
      st->variant = v;
      st->variant_name = variants[v].name;
      st->scheduled_exposed_us = r.exposed_us;
      st->scheduled_peak_bytes = r.peak_bytes;
      st->n_pulled = vs.n_pulled;
      st->n_early_waits = vs.n_early_waits;
      st->n_forced = vs.n_forced;
      st->n_boosted = vs.n_boosted;
    }
    sg_sim_result_clear (&r);
  }
  problem_clear (&P);
  return best;
}

bool
sg_schedule_reorder (SgGraph *g, const SgConfig *cfg, GError **error)
{
  g_return_val_if_fail (g != NULL, false);
  if (g->n_nodes == 0)
    return true;
  g_autofree SgNodeId *order = sg_schedule_compute (g, cfg, NULL, error);
  if (!order)
    return false;
  if (!sg_graph_permute (g, order, error))
    return false;
  /* Record the hiding relation of the final order as implicit edges. */
  SgSimResult r;
  if (!sg_simulate (g, NULL, &r, error))
    return false;
  sg_implicit_edges_clear (g, SG_EDGE_HIDE_START);
  sg_implicit_edges_clear (g, SG_EDGE_HIDE_WAIT);
  for (int32_t i = 0; i < r.n_rows; i++) {
    const SgCollRow *row = &r.rows[i];
    if (row->hidden_by == SG_NO_NODE)
      continue;
    sg_implicit_edge_add (g, row->node, row->hidden_by, SG_EDGE_HIDE_START);
    if (row->wait != SG_NO_NODE)
      sg_implicit_edge_add (g, row->last_hiding, row->wait, SG_EDGE_HIDE_WAIT);
  }
  sg_sim_result_clear (&r);
  return true;
}

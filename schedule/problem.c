/* problem.c: what every variant of the list scheduler shares: node roles,
 * costs, bytes, users, each collective's wait and deadline, what compute
 * feeds, the collectives' pair rates numbered (each key made once, not by
 * every variant's engine), and the input order's live-bytes profile with
 * the memory limit.
 * sg_sched_problem_init_basic computes only what the polish reads (roles,
 * costs, the input order's compute, the limits' settings); the live bytes
 * (sg_sched_problem_live, without the profile) only when the polish needs
 * the memory limit.
 * The orders by key (critical path, due) are stable radix sorts of the
 * keys' bits in id order: what sorting by (key, id) gives.
 * The node loop runs in chunks, and the parts that need only the nodes and
 * the users side by side, on the worker pool (cfg->pool); each writes only
 * its own fields. When asked (sim_peaks), each storage root's bytes, which
 * a simulation's peak counts, come from the elision that gives the roots.
 *
 * Requires: est_us (estimate/). Invalidates: nothing.
 */
#include <string.h>

#include "schedule-private.h"

/* A node and its sort key: a double's bits mapped so that unsigned order
 * is the doubles' order (-0.0 as 0.0; the keys are finite). */
typedef struct {
  uint64_t key;
  SgNodeId id;
} Keyed;

static inline uint64_t
keyed_key (const void *x)
{
  return ((const Keyed *)x)->key;
}

/* Sorts @a (@n entries, in id order) by key, ties by id: sg_radix_sort
 * through @tmp (n entries), 11-bit digits; short runs by insertion. */
static void
sort_keyed (Keyed *a, Keyed *tmp, int32_t n)
{
  if (n < 64) {
    for (int32_t i = 1; i < n; i++) {
      Keyed x = a[i];
      int32_t j = i;
      for (; j > 0 && a[j - 1].key > x.key; j--)
        a[j] = a[j - 1];
      a[j] = x;
    }
    return;
  }
  sg_radix_sort (a, tmp, n, sizeof *a, 11, keyed_key);
}

/* due_us, ready_us and the per-group order by due. */
static void
due_and_ready (SgSchedProblem *P)
{
  int32_t n = P->n, ng = MAX (P->n_groups, 1);
  P->due_us = g_new0 (double, (size_t)MAX (n, 1));
  P->ready_us = g_new0 (double, (size_t)MAX (n, 1));
  for (SgNodeId c = 0; c < n; c++) {
    if (P->role[c] != SG_ROLE_COLL)
      continue;
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (P->g, c, &k);
    double t = 0.0;
    for (uint32_t j = 0; j < k; j++) {
      SgNodeId i = in[j], p = P->coll_of[i];
      t = MAX (t, P->role[i] == SG_ROLE_WAIT && p != SG_NO_NODE ? P->ready_us[p] + P->cost[p]
                                                                 : P->base_us[i + 1]);
    }
    P->ready_us[c] = t;
  }
  P->gfirst = g_new0 (int32_t, (size_t)ng + 1);
  for (SgNodeId c = n - 1; c >= 0; c--) {
    if (P->role[c] != SG_ROLE_COLL)
      continue;
    P->gfirst[P->g->nodes[c].group + 1]++;
    SgNodeId w = P->wait_of[c];
    double d = P->base_us[n];
    if (w != SG_NO_NODE)
      for (uint32_t a = P->ufirst[w]; a < P->ufirst[w + 1]; a++) {
        SgNodeId u = P->users[a];
        d = MIN (d, P->role[u] == SG_ROLE_COLL ? P->due_us[u] - P->cost[u] : P->base_us[u]);
      }
    P->due_us[c] = d;
  }
  for (int32_t i = 0; i < ng; i++)
    P->gfirst[i + 1] += P->gfirst[i];
  g_autofree Keyed *all = g_new (Keyed, (size_t)P->gfirst[ng] + 1);
  g_autofree Keyed *tmp = g_new (Keyed, (size_t)P->gfirst[ng] + 1);
  g_autofree int32_t *fill = g_memdup2 (P->gfirst, sizeof (int32_t) * (size_t)(ng + 1));
  for (SgNodeId c = 0; c < n; c++)
    if (P->role[c] == SG_ROLE_COLL)
      all[fill[P->g->nodes[c].group]++] = (Keyed){ sg_double_order_bits (P->due_us[c]), c };
  P->n_colls = P->gfirst[ng];
  P->gorder = g_new (SgNodeId, (size_t)P->gfirst[ng] + 1);
  P->due_rank = g_new0 (int32_t, (size_t)MAX (n, 1));
  for (int32_t i = 0; i < ng; i++) {
    sort_keyed (all + P->gfirst[i], tmp, P->gfirst[i + 1] - P->gfirst[i]);
    for (int32_t j = P->gfirst[i]; j < P->gfirst[i + 1]; j++) {
      P->gorder[j] = all[j].id;
      P->due_rank[all[j].id] = j;
    }
  }
}

/* cp_rank: longest path from a node's start to the end, longest first. */
static void
critical_path_rank (SgSchedProblem *P)
{
  int32_t n = P->n;
  double *b = P->cp_us = g_new0 (double, (size_t)MAX (n, 1));
  g_autofree Keyed *by = g_new (Keyed, (size_t)MAX (n, 1));
  g_autofree Keyed *tmp = g_new (Keyed, (size_t)MAX (n, 1));
  for (SgNodeId x = n - 1; x >= 0; x--) {
    double t = 0.0;
    for (uint32_t a = P->ufirst[x]; a < P->ufirst[x + 1]; a++)
      t = MAX (t, b[P->users[a]]);
    b[x] = t + P->cost[x];
    by[x] = (Keyed){ sg_double_order_bits (-b[x]), x };
  }
  sort_keyed (by, tmp, n);
  P->cp_rank = g_new (int32_t, (size_t)MAX (n, 1));
  for (int32_t i = 0; i < n; i++)
    P->cp_rank[by[i].id] = i;
}

/* Nodes per task of the node loops. */
#define NODE_CHUNK 8192

/* Roles, costs and allocations of one chunk of nodes (a task). */
static void
nodes_task (gpointer data, int32_t task, int32_t worker)
{
  (void)worker;
  SgSchedProblem *P = data;
  const SgGraph *g = P->g;
  const SgCostModel *cm = sg_graph_cost_model (g); /* the engine's pairs (sg_eng_init) */
  SgNodeId end = MIN (P->n, (task + 1) * NODE_CHUNK);
  for (SgNodeId i = task * NODE_CHUNK; i < end; i++) {
    const SgNode *nd = &g->nodes[i];
    P->role[i] = (uint8_t)sg_sched_role (nd);
    P->cost[i] = sg_sched_cost (nd);
    P->kslot[i] = (uint8_t)(P->role[i] == SG_ROLE_COMPUTE && P->cost[i] > 0.0
                                ? sg_cost_contention_slot (cm, g, i, P->cost[i])
                                : 0);
    P->alloc[i] = sg_node_alloc_bytes (g, i);
    if (P->comm && P->role[i] == SG_ROLE_COLL) {
      P->comm[i] = sg_node_comm_bytes (g, i);
      uint32_t k;
      const SgNodeId *in = sg_node_inputs (g, i, &k);
      if (k > 0)
        P->in_bytes[i] = sg_node_alloc_bytes (g, sg_node_storage_root (g, in[0]));
    }
  }
}

/* Roles, costs, allocations (and with P->comm, each collective's bytes
 * moved and input bytes) and the input order's compute time. */
static void
basic_nodes (SgSchedProblem *P, SgPool *pool)
{
  int32_t n = P->n;
  P->role = g_new (uint8_t, (size_t)MAX (n, 1));
  P->cost = g_new (double, (size_t)MAX (n, 1));
  P->kslot = g_new (uint8_t, (size_t)MAX (n, 1));
  P->alloc = g_new (uint64_t, (size_t)MAX (n, 1));
  sg_pool_run (pool, (n + NODE_CHUNK - 1) / NODE_CHUNK, nodes_task, P);
  P->base_us = g_new (double, (size_t)n + 1);
  P->base_us[0] = 0.0;
  for (SgNodeId i = 0; i < n; i++)
    P->base_us[i + 1] = P->base_us[i] + (P->role[i] == SG_ROLE_COMPUTE ? P->cost[i] : 0.0);
  P->compute_us = P->base_us[n];
}

/* The limits of @cfg (NULL: the defaults). */
static void
limits (SgSchedProblem *P, const SgConfig *cfg)
{
  P->peak_increase = cfg ? cfg->max_peak_increase : SG_SCHEDULE_DEFAULT_MAX_PEAK_INCREASE;
  P->max_in_flight = cfg ? cfg->max_in_flight_bytes : SG_SCHEDULE_DEFAULT_IN_FLIGHT_BYTES;
  P->prefetch_limit = cfg ? cfg->prefetch_limit : SG_SCHEDULE_DEFAULT_PREFETCH_LIMIT;
}

/* sg_sched_problem_live, with the input order's positions @pos. */
static void
live_at (SgSchedProblem *P, bool profile, const int32_t *pos)
{
  const SgGraph *g = P->g;
  if (profile)
    P->profile = g_new (uint64_t, (size_t)MAX (P->n, 1));
  if (!P->root)
    P->root = sg_graph_storage_roots (g);
  P->peak_in = sg_graph_liveness (g, pos, P->profile, P->root, P->alloc);
  P->limit = (uint64_t)((double)P->peak_in * (1.0 + P->peak_increase));
  P->has_limit = true;
}

void
sg_sched_problem_live (SgSchedProblem *P, bool profile)
{
  g_autofree int32_t *pos = sg_sched_positions (P->g, NULL);
  live_at (P, profile, pos);
}

/* What both problems start with: the graph and the memory limit. */
static void
problem_start (SgSchedProblem *P, const SgGraph *g, const SgConfig *cfg)
{
  memset (P, 0, sizeof *P);
  P->g = g;
  P->n = g->n_nodes;
  P->n_groups = g->n_groups;
  limits (P, cfg);
}

void
sg_sched_problem_init_basic (SgSchedProblem *P, const SgGraph *g, const SgConfig *cfg)
{
  problem_start (P, g, cfg);
  basic_nodes (P, cfg ? cfg->pool : NULL);
}

/* Inputs and users (CSR), groups, each collective's first wait, each
 * wait's collective, the waits a collective reads. */
static void
users_and_waits (SgSchedProblem *P)
{
  const SgGraph *g = P->g;
  int32_t n = P->n;
  P->wait_of = g_new (SgNodeId, (size_t)MAX (n, 1));
  P->coll_of = g_new (SgNodeId, (size_t)MAX (n, 1));
  P->feeds_coll = g_new0 (uint8_t, (size_t)MAX (n, 1));
  P->reads_wait = g_new0 (uint8_t, (size_t)MAX (n, 1));
  P->ufirst = g_new0 (uint32_t, (size_t)n + 1);
  P->ifirst = g_new (uint32_t, (size_t)n + 1);
  P->group = g_new (int32_t, (size_t)MAX (n, 1));
  P->ifirst[0] = 0;
  for (SgNodeId i = 0; i < n; i++) {
    P->wait_of[i] = P->coll_of[i] = SG_NO_NODE;
    P->group[i] = g->nodes[i].group;
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, i, &k);
    P->ifirst[i + 1] = P->ifirst[i] + k;
    for (uint32_t j = 0; j < k; j++)
      P->ufirst[in[j] + 1]++;
  }
  P->ins = g_new (SgNodeId, (size_t)P->ifirst[n] + 1);
  for (SgNodeId i = 0; i < n; i++)
    P->ufirst[i + 1] += P->ufirst[i];
  P->users = g_new (SgNodeId, (size_t)P->ufirst[n] + 1);
  g_autofree uint32_t *fill = g_memdup2 (P->ufirst, sizeof (uint32_t) * ((size_t)n + 1));
  for (SgNodeId i = 0; i < n; i++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, i, &k);
    memcpy (P->ins + P->ifirst[i], in, sizeof (SgNodeId) * k);
    for (uint32_t j = 0; j < k; j++)
      P->users[fill[in[j]]++] = i;
    for (uint32_t j = 0; j < k; j++) {
      if (P->role[i] == SG_ROLE_COLL && P->role[in[j]] == SG_ROLE_WAIT)
        P->feeds_coll[in[j]] = 1;
      /* an input's coll_of is set: inputs come first */
      P->reads_wait[i] |= P->coll_of[in[j]] != SG_NO_NODE;
    }
    if (P->role[i] == SG_ROLE_WAIT) {
      SgNodeId c = sg_node_wait_target (g, i);
      if (c != SG_NO_NODE && P->role[c] == SG_ROLE_COLL) {
        P->coll_of[i] = c;
        if (P->wait_of[c] == SG_NO_NODE)
          P->wait_of[c] = i;
      }
    }
  }
}

/* Deadlines, and what compute feeds: the nearest collective (by id, by
 * deadline). */
static void
nearest_collectives (SgSchedProblem *P)
{
  int32_t n = P->n;
  P->deadline = g_new (int32_t, (size_t)MAX (n, 1));
  P->near_coll = g_new (int32_t, (size_t)MAX (n, 1));
  P->near_dead = g_new (int32_t, (size_t)MAX (n, 1));
  /* Deadline: where the input order first needs the collective's result. */
  for (SgNodeId c = 0; c < n; c++) {
    SgNodeId w = P->wait_of[c];
    P->deadline[c] = n;
    if (w == SG_NO_NODE)
      continue;
    int32_t d = w;
    if (P->ufirst[w + 1] > P->ufirst[w])
      d = P->users[P->ufirst[w]]; /* users are in ascending id order */
    P->deadline[c] = d;
  }
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
}

/* Free feeders: inputs, and 0 us views of them, that feed a collective;
 * placed as soon as they are ready (an input listed late would hold its
 * collective back). Inputs are live from the start and views allocate
 * nothing, so moving them changes neither time nor memory; other 0 us
 * nodes stay where the input order has them. */
static void
free_feeders (SgSchedProblem *P)
{
  const SgGraph *g = P->g;
  int32_t n = P->n;
  P->free_feed = g_new0 (uint8_t, (size_t)MAX (n, 1));
  g_autofree uint8_t *from_input = g_new0 (uint8_t, (size_t)MAX (n, 1));
  for (SgNodeId x = 0; x < n; x++) {
    if (sg_op_class (g->nodes[x].kind) == SG_CLASS_INPUT) {
      from_input[x] = 1;
      continue;
    }
    if (P->role[x] != SG_ROLE_COMPUTE || P->cost[x] > 0.0 || P->alloc[x] > 0 || x == g->output)
      continue;
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, x, &k);
    from_input[x] = k > 0;
    for (uint32_t j = 0; j < k; j++)
      from_input[x] &= from_input[in[j]];
  }
  for (SgNodeId x = n - 1; x >= 0; x--) {
    if (!from_input[x])
      continue;
    for (uint32_t a = P->ufirst[x]; a < P->ufirst[x + 1] && !P->free_feed[x]; a++) {
      SgNodeId u = P->users[a];
      P->free_feed[x] = P->role[u] == SG_ROLE_COLL || P->free_feed[u];
    }
  }
}

/* Where the input order (positions @pos) frees each collective's input
 * (deferring a wait only costs memory past that point), the inputs'
 * storage roots numbered, the waits numbered. */
static void
input_ends (SgSchedProblem *P, const int32_t *pos)
{
  const SgGraph *g = P->g;
  int32_t n = P->n;
  g_autofree int32_t *last = g_new (int32_t, (size_t)MAX (n, 1));
  sg_graph_last_use (g, pos, P->root, last);
  P->in_end = g_new (int32_t, (size_t)MAX (n, 1));
  P->in_root = g_new (int32_t, (size_t)MAX (n, 1));
  P->wait_idx = g_new (int32_t, (size_t)MAX (n, 1));
  for (SgNodeId c = 0; c < n; c++) {
    P->in_end[c] = 0;
    P->in_root[c] = -1;
    P->wait_idx[c] = P->role[c] == SG_ROLE_WAIT ? P->n_waits++ : -1;
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, c, &k);
    if (P->role[c] == SG_ROLE_COLL && k > 0)
      P->in_end[c] = last[P->root[in[0]]] + 1;
  }
  int32_t *root_no = last; /* root -> its number, -1 (last is read above) */
  for (SgNodeId x = 0; x < n; x++)
    root_no[x] = -1;
  for (SgNodeId c = 0; c < n; c++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, c, &k);
    if (P->role[c] != SG_ROLE_COLL || k == 0)
      continue;
    SgNodeId r = P->root[in[0]];
    if (root_no[r] < 0)
      root_no[r] = P->n_roots++;
    P->in_root[c] = root_no[r];
  }
}

/* rates_at, rates_first and n_rates: one key per collective, made here
 * once rather than by each variant's engine as it issues. */
static void
rates_entries (SgSchedProblem *P)
{
  SgSimEngine e;
  sg_eng_init_rates (&e, P->g, NULL);
  int32_t cap = 16;
  P->rates_at = g_new (int32_t, (size_t)MAX (P->n, 1));
  P->rates_first = g_new (SgNodeId, (size_t)cap);
  for (SgNodeId c = 0; c < P->n; c++) {
    P->rates_at[c] = -1;
    if (P->role[c] != SG_ROLE_COLL)
      continue;
    int32_t at = sg_eng_rates_entry (&e, c, NULL);
    P->rates_at[c] = at;
    if (at < P->n_rates)
      continue;
    if (P->n_rates == cap) {
      cap *= 2;
      P->rates_first = g_renew (SgNodeId, P->rates_first, (size_t)cap);
    }
    P->rates_first[P->n_rates++] = c;
  }
  sg_eng_clear (&e);
}

/* What the parts read: the problem and the input order's positions. */
typedef struct {
  SgSchedProblem *P;
  const int32_t *pos;
} Parts;

/* The parts that need only the nodes and the users, side by side; each
 * writes its own fields. */
static void
part_task (gpointer data, int32_t task, int32_t worker)
{
  (void)worker;
  Parts *parts = data;
  SgSchedProblem *P = parts->P;
  switch (task) {
  case 0:
    live_at (P, true, parts->pos);
    break;
  case 1:
    input_ends (P, parts->pos);
    break;
  case 2:
    due_and_ready (P);
    break;
  case 3:
    critical_path_rank (P);
    break;
  case 4:
    nearest_collectives (P);
    break;
  case 5:
    rates_entries (P);
    break;
  default:
    free_feeders (P);
    break;
  }
}

/* The storage roots (sg_graph_storage_roots) and with @store each root's
 * bytes, from one elision. */
static void
storage_roots (SgSchedProblem *P, bool store)
{
  SgElision e;
  sg_graph_elision (P->g, &e);
  if (store)
    P->store_bytes = sg_elision_storage_bytes (P->g, &e, NULL, NULL);
  P->root = g_steal_pointer (&e.root);
  sg_elision_clear (&e);
}

void
sg_sched_problem_init (SgSchedProblem *P, const SgGraph *g, const SgConfig *cfg, bool sim_peaks)
{
  problem_start (P, g, cfg);
  SgPool *pool = cfg ? cfg->pool : NULL;
  P->comm = g_new0 (uint64_t, (size_t)MAX (P->n, 1));
  P->in_bytes = g_new0 (uint64_t, (size_t)MAX (P->n, 1));
  basic_nodes (P, pool);
  users_and_waits (P);
  storage_roots (P, sim_peaks);
  g_autofree int32_t *pos = sg_sched_positions (g, NULL);
  Parts parts = { P, pos };
  sg_pool_run (pool, 7, part_task, &parts);
}

uint64_t
sg_sched_sim_peak (const SgSchedProblem *P, const int32_t *pos)
{
  g_return_val_if_fail (P->store_bytes != NULL, 0);
  /* what sg_graph_peak_bytes gives: the liveness over the elision's roots
   * and storage bytes, made once here */
  return sg_graph_liveness (P->g, pos, NULL, P->root, P->store_bytes);
}

void
sg_sched_problem_clear (SgSchedProblem *P)
{
  g_free (P->role);
  g_free (P->cost);
  g_free (P->kslot);
  g_free (P->alloc);
  g_free (P->root);
  g_free (P->comm);
  g_free (P->in_bytes);
  g_free (P->in_end);
  g_free (P->in_root);
  g_free (P->wait_idx);
  g_free (P->wait_of);
  g_free (P->coll_of);
  g_free (P->deadline);
  g_free (P->feeds_coll);
  g_free (P->reads_wait);
  g_free (P->near_coll);
  g_free (P->near_dead);
  g_free (P->free_feed);
  g_free (P->cp_rank);
  g_free (P->cp_us);
  g_free (P->base_us);
  g_free (P->due_us);
  g_free (P->ready_us);
  g_free (P->gorder);
  g_free (P->due_rank);
  g_free (P->gfirst);
  g_free (P->ufirst);
  g_free (P->ifirst);
  g_free (P->ins);
  g_free (P->group);
  g_free (P->users);
  g_free (P->profile);
  g_free (P->store_bytes);
  g_free (P->rates_at);
  g_free (P->rates_first);
}

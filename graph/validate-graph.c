/* validate-graph.c: the IR validator over the whole graph
 * (sg_graph_validate, sg_graph_validate_with; the node rules are
 * validate.c's).
 *
 * The rules of the whole graph (rank, groups, one output last, distinct
 * names, the running total of tensor bytes, a wait after each
 * collective_permute), and every node's rules, checked in blocks on the
 * pool's threads, each block up to its first failing node: the message is
 * the first failing node's in id order, as a loop over the nodes would
 * give it. What a node's rules read of other nodes is fixed before, on
 * the threads: each node's op and kind, and the first wait_tensor on each
 * collective and the first getitem of each coalesced element (an earlier
 * one makes a later one fail: the smallest id, by atomic minima). The
 * total of tensor bytes is summed per block, then in block order. Names
 * are checked distinct through g->by_name when it is built, else through
 * the parallel loader's table while the graph holds it (g->name_table:
 * the names it holds are distinct, so their count is the check), else
 * through a table filled on the threads (names.c) and dropped after:
 * validating builds no name table to keep. Linear in nodes + edges.
 *
 * Requires: nothing (the only derived tables it trusts, g->by_name and
 * g->name_table, are dropped by every change of the nodes). Invalidates:
 * nothing.
 */
#include "graph-private.h"

#include <string.h>


static bool
validate_groups (const SgGraph *g, GError **error)
{
  for (int32_t i = 0; i < g->n_groups; i++) {
    const SgGroup *grp = &g->groups[i];
    if (!grp->name || !grp->ranks || grp->n_ranks <= 0)
      VFAIL (SG_GRAPH_ERROR_GROUP, "groups[%d]: no name or no ranks", i);
    for (int32_t j = i + 1; j < g->n_groups; j++)
      if (strcmp (grp->name, g->groups[j].name) == 0)
        VFAIL (SG_GRAPH_ERROR_GROUP, "groups.%s: defined twice", grp->name);
    bool has_rank = false;
    for (int32_t r = 0; r < grp->n_ranks; r++) {
      if (grp->ranks[r] < 0 || grp->ranks[r] >= g->world_size
          || (r && grp->ranks[r] <= grp->ranks[r - 1]))
        VFAIL (SG_GRAPH_ERROR_GROUP,
               "groups.%s.ranks[%d]: rank %d is outside the world of %d or not ascending",
               grp->name, r, grp->ranks[r], g->world_size);
      has_rank |= grp->ranks[r] == g->rank;
    }
    if (!has_rank)
      VFAIL (SG_GRAPH_ERROR_GROUP,
             "groups.%s.ranks: does not contain this graph's rank %d (groups are listed as the "
             "graph's rank sees them)",
             grp->name, g->rank);
    if (!grp->partition || (int64_t)grp->n_instances * grp->n_ranks != g->world_size)
      VFAIL (SG_GRAPH_ERROR_GROUP, "groups.%s.partition: %d instances of %d ranks do not cover "
             "world_size %d", grp->name, grp->n_instances, grp->n_ranks, g->world_size);
    g_autofree uint8_t *seen = g_new0 (uint8_t, (size_t)g->world_size);
    for (int32_t k = 0; k < g->world_size; k++) {
      int32_t r = grp->partition[k];
      if (r < 0 || r >= g->world_size || seen[r])
        VFAIL (SG_GRAPH_ERROR_GROUP, "groups.%s.partition: rank %d is %s", grp->name, r,
               (r < 0 || r >= g->world_size) ? "outside the world" : "in two instances");
      seen[r] = 1;
    }
  }
  return true;
}

/* Each node's key in g->by_name, read off the table in one pass (ids out
 * of range are skipped): where it equals the node's name, the name
 * resolves to the node (keys are distinct), and sg_validate_node need not
 * look it up (a lookup per node is a few cache misses at a million
 * nodes). */
static const char **
keys_by_node (const SgGraph *g)
{
  const char **key_of = g_new0 (const char *, (size_t)g->n_nodes);
  GHashTableIter it;
  gpointer key, value;
  g_hash_table_iter_init (&it, sg_graph_names (g));
  while (g_hash_table_iter_next (&it, &key, &value)) {
    SgNodeId id = GPOINTER_TO_INT (value) - 1;
    if (id >= 0 && id < g->n_nodes)
      key_of[id] = key;
  }
  return key_of;
}

/* --- the whole graph, on worker threads ------------------------------------- */

/* *@slot = the smaller of it and @id + 1 (0 is none). */
static void
note_first (gint *slot, SgNodeId id)
{
  gint v = id + 1, cur = g_atomic_int_get (slot);
  while ((cur == 0 || v < cur) && !g_atomic_int_compare_and_exchange (slot, cur, v))
    cur = g_atomic_int_get (slot);
}

/* The first input of node @n when it has one inside the pool and the
 * graph, else SG_NO_NODE. */
static SgNodeId
first_input (const SgGraph *g, const SgNode *n)
{
  if (n->n_in == 0 || (uint64_t)n->in_first + n->n_in > g->inputs->len)
    return SG_NO_NODE;
  SgNodeId in = g_array_index (g->inputs, SgNodeId, n->in_first);
  return in >= 0 && in < g->n_nodes ? in : SG_NO_NODE;
}

typedef struct {
  SgValidateShared sh; /* its arrays written by note_task */
  int32_t block, n_blocks;
  struct Result {
    SgNodeId failed; /* the block's first failing node, or SG_NO_NODE */
    GError *error;
    uint64_t bytes;  /* tensor bytes of its nodes before that, saturated */
    SgNodeId unwaited; /* its first collective_permute no wait follows, or SG_NO_NODE */
  } *results;
} Job;

/* Each node's brief, and the first wait and getitem of what they read:
 * every node that reaches those checks is counted (nodes before the first
 * failing one all do; later ones cannot move a minimum below it). */
static void
note_task (gpointer data, int32_t b, int32_t worker)
{
  Job *j = data;
  const SgGraph *g = j->sh.g;
  (void)worker;
  SgNodeId hi = MIN (g->n_nodes, (b + 1) * j->block);
  for (SgNodeId id = b * j->block; id < hi; id++) {
    const SgNode *n = &g->nodes[id];
    j->sh.brief[id] = (SgBrief){ (uint8_t)n->op, (uint8_t)n->kind };
    if (n->kind != SG_OP_WAIT && n->kind != SG_OP_GETITEM)
      continue;
    SgNodeId in = first_input (g, n);
    if (in == SG_NO_NODE)
      continue;
    if (n->kind == SG_OP_WAIT) {
      note_first (&j->sh.wait_first[in], id);
      continue;
    }
    const SgNode *src = &g->nodes[in];
    if (n->n_in != 1 || n->getitem_index < 0 || (unsigned)src->kind >= SG_OP_N_KINDS
        || !sg_op_is_coalesced (src->kind))
      continue;
    uint32_t elem = src->tuple_first + (uint32_t)n->getitem_index;
    if (elem <= g->tuple_metas->len)
      note_first (&j->sh.elem_first[elem], id);
  }
}

static void
check_task (gpointer data, int32_t b, int32_t worker)
{
  Job *j = data;
  const SgGraph *g = j->sh.g;
  (void)worker;
  struct Result *r = &j->results[b];
  *r = (struct Result){ .failed = SG_NO_NODE, .unwaited = SG_NO_NODE };
  SgNodeId hi = MIN (g->n_nodes, (b + 1) * j->block);
  for (SgNodeId id = b * j->block; id < hi; id++) {
    if (!sg_validate_node (&j->sh, id, &r->error)) {
      r->failed = id;
      return;
    }
    uint64_t bytes = sg_node_alloc_bytes (g, id);
    r->bytes = r->bytes + bytes < r->bytes ? G_MAXUINT64 : r->bytes + bytes;
    if (g->nodes[id].kind == SG_OP_COLLECTIVE_PERMUTE && r->unwaited == SG_NO_NODE
        && g_atomic_int_get (&j->sh.wait_first[id]) == 0)
      r->unwaited = id;
  }
}

/* The node at which the total of tensor bytes, in id order from @total
 * over block @b up to @to, passes 2^62, or SG_NO_NODE (@total updated). */
static SgNodeId
total_passes (const Job *j, int32_t b, SgNodeId to, uint64_t *total)
{
  for (SgNodeId id = b * j->block; id < to; id++) {
    *total += sg_node_alloc_bytes (j->sh.g, id);
    if (*total > (uint64_t)SG_MAX_EXTENT)
      return id;
  }
  return SG_NO_NODE;
}

/* The per-node rules in blocks on @pool, then in block order: the first
 * failing node, the running total of bytes, permutes without a wait. */
static bool
validate_nodes (const SgGraph *g, const char **key_of, SgPool *pool, GError **error)
{
  g_autofree SgBrief *brief = g_new (SgBrief, (size_t)g->n_nodes);
  g_autofree gint *wait_first = g_new0 (gint, (size_t)g->n_nodes);
  g_autofree gint *elem_first = g_new0 (gint, (size_t)g->tuple_metas->len + 1);
  int32_t threads = sg_pool_size (pool);
  Job j = { .sh = { g, key_of, brief, wait_first, elem_first } };
  j.block = threads > 1 ? CLAMP (g->n_nodes / (8 * threads), 256, 8192) : g->n_nodes;
  j.n_blocks = (g->n_nodes + j.block - 1) / j.block;
  j.results = g_new (struct Result, (size_t)j.n_blocks);
  sg_pool_run (pool, j.n_blocks, note_task, &j);
  sg_pool_run (pool, j.n_blocks, check_task, &j);
  /* Memory sums (peak bytes, reports) stay exact: all tensors together
   * stay below 2^62 bytes, as each one does. */
  uint64_t total = 0;
  SgNodeId over = SG_NO_NODE, unwaited = SG_NO_NODE;
  int32_t b = 0;
  GError *first = NULL;
  for (; b < j.n_blocks && over == SG_NO_NODE && !first; b++) {
    struct Result *r = &j.results[b];
    bool whole = r->failed == SG_NO_NODE;
    if (!whole || total + r->bytes < total || total + r->bytes > (uint64_t)SG_MAX_EXTENT)
      over = total_passes (&j, b, whole ? MIN (g->n_nodes, (b + 1) * j.block) : r->failed, &total);
    else
      total += r->bytes;
    if (over == SG_NO_NODE && !whole)
      first = g_steal_pointer (&r->error);
    if (unwaited == SG_NO_NODE)
      unwaited = r->unwaited;
  }
  for (int32_t i = 0; i < j.n_blocks; i++)
    g_clear_error (&j.results[i].error);
  g_free (j.results);
  if (over != SG_NO_NODE)
    VFAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': meta: the graph's tensors up to here total more "
           "than 2^62 bytes", g->nodes[over].name);
  if (first) {
    g_propagate_error (error, first);
    return false;
  }
  /* A point-to-point step is async like the c10d collectives, and its
   * peers' copies are ordered only by its wait: one must follow it. */
  if (unwaited != SG_NO_NODE)
    VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': no wait_tensor waits on this collective_permute "
           "(one must follow it)", g->nodes[unwaited].name);
  return true;
}

/* How many distinct names the nodes have, counted through the loader's
 * table (g->name_table) or one built on @pool; -1 when a node has none. */
static int64_t
distinct_names (const SgGraph *g, SgPool *pool)
{
  if (g->name_table)
    return sg_name_table_count (g->name_table);
  int64_t dups = 0;
  g_autoptr (SgNameTable) t = sg_name_table_of (g, pool, &dups);
  return t ? g->n_nodes - dups : -1;
}

bool
sg_graph_validate (const SgGraph *g, GError **error)
{
  return sg_graph_validate_with (g, NULL, error);
}

bool
sg_graph_validate_with (const SgGraph *g, SgPool *pool, GError **error)
{
  g_return_val_if_fail (g != NULL, false);
  g_return_val_if_fail (error == NULL || *error == NULL, false);
  if (g->world_size < 1 || g->rank < 0 || g->rank >= g->world_size)
    VFAIL (SG_GRAPH_ERROR_FORMAT, "rank: %d is outside world_size %d", g->rank, g->world_size);
  if (!validate_groups (g, error))
    return false;
  if (g->n_nodes == 0)
    VFAIL (SG_GRAPH_ERROR_FORMAT, "nodes: the graph is empty (an output node is required)");
  if (g->output == SG_NO_NODE)
    VFAIL (SG_GRAPH_ERROR_INVALID, "nodes: no node has op 'output' (exactly one is required, last)");
  if (g->output != g->n_nodes - 1 || g->nodes[g->output].op != SG_NODE_OUTPUT)
    VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s' (#%d): the graph's output must be the last node "
           "(#%d) with op 'output'", g->nodes[g->output].name, g->output, g->n_nodes - 1);
  /* without a table, distinct names are what it would hold for each node */
  int64_t names = g->by_name ? -1 : distinct_names (g, pool);
  if (names < 0)
    names = g_hash_table_size (sg_graph_names (g));
  if (names != g->n_nodes)
    VFAIL (SG_GRAPH_ERROR_REF, "nodes: %u names for %d nodes (duplicate or stale names)",
           (guint)names, g->n_nodes);
  g_autofree const char **key_of = g->by_name ? keys_by_node (g) : NULL;
  return validate_nodes (g, key_of, pool, error);
}

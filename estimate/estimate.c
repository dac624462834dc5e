/* estimate.c: the estimate pass and the per-node cost table.
 *
 * Builds one SgCostModel per graph (cluster, optional profile, group spans),
 * attaches it to the graph and fills est_us/est_src of every node. Order of
 * precedence for a node: its `cost_us` (graph) > a profile entry (exact or
 * interpolated) > the analytical model; views, getitem, waits, inputs and
 * the output cost nothing by definition. Mirrors Inductor's
 * estimate_nccl_collective_runtime / benchmarked-matmul split, with the
 * NCCL model in nccl.c and the roofline in compute.c.
 * The loops over the nodes (storage bytes, then costs) run by ranges of
 * nodes on cfg->pool: a node's cost reads only the node, its inputs' shapes
 * and the model. The unknown targets are listed in id order afterwards,
 * and the first collective_permute (in id order) the cluster refuses gives
 * the error.
 *
 * Requires: a loaded graph. Invalidates: est_us/est_src, g->cost_model, the
 * analysis kept with the graph (sg_graph_changed).
 */
#include "estimate-private.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK (sg-estimate-error-quark, sg_estimate_error)

static void
cost_model_free (gpointer p)
{
  SgCostModel *cm = p;
  if (!cm)
    return;
  sg_contention_table_free (cm->contention);
  sg_profile_free (cm->profile);
  g_free (cm->profile_path);
  g_free (cm->group_nodes);
  g_free (cm->storage_bytes);
  if (cm->unknown)
    g_ptr_array_unref (cm->unknown);
  if (cm->unknown_set)
    g_hash_table_unref (cm->unknown_set);
  g_free (cm);
}

const SgCostModel *
sg_graph_cost_model (const SgGraph *g)
{
  return g->cost_model_free == cost_model_free ? g->cost_model : NULL;
}

const SgContention *
sg_cost_model_contention (const SgCostModel *cm)
{
  return &cm->cluster.contention;
}

double
sg_cost_model_comm_start_wait (const SgCostModel *cm)
{
  return cm->cluster.comm_start_wait;
}

double
sg_cost_model_held_scale (const SgCostModel *cm)
{
  return sg_cost_contention_pairs (cm) > 0 ? cm->cluster.contention_held_scale : 0.0;
}

const char *
sg_cost_model_cluster_name (const SgCostModel *cm)
{
  return cm->cluster.name;
}

static int32_t
group_span (int32_t gpus_per_node, const SgGroup *group)
{
  /* ranks are ascending: count changes of the node index */
  int32_t nodes = 0, last = -1;
  for (int32_t i = 0; i < group->n_ranks; i++) {
    int32_t node = group->ranks[i] / gpus_per_node;
    if (node != last)
      nodes++;
    last = node;
  }
  return MAX (nodes, 1);
}

int32_t
sg_cost_group_nodes (const SgCostModel *cm, const SgGroup *group)
{
  g_return_val_if_fail (cm && group, 1);
  return group_span (cm->cluster.gpus_per_node, group);
}

double
sg_cost_collective_us (const SgCostModel *cm, SgOpKind kind, SgDtype dtype, uint64_t bytes,
                       int32_t group_size, int32_t n_nodes, SgCostSource *src)
{
  g_return_val_if_fail (cm && sg_op_is_collective (kind) && !sg_op_is_coalesced (kind), 0.0);
  (void)dtype; /* NCCL's time depends on bytes, not on the element type */
  double us;
  if (kind == SG_OP_COLLECTIVE_PERMUTE) { /* pairs unknown here: one NCCL step */
    *src = SG_COST_MODEL;
    return sg_p2p_time (&cm->cluster, SG_TRANSPORT_NCCL, bytes, n_nodes <= 1);
  }
  if (sg_profile_collective_us (cm->profile, kind, bytes, group_size, n_nodes, &us)) {
    *src = SG_COST_PROFILE;
    return us;
  }
  *src = SG_COST_MODEL;
  return sg_nccl_time (&cm->cluster, kind, bytes, group_size, n_nodes).us;
}

double
sg_cost_coalesced_us (const SgCostModel *cm, SgOpKind member_kind, SgDtype dtype,
                      const uint64_t *bytes, int32_t n, int32_t group_size, int32_t n_nodes,
                      SgCostSource *src)
{
  g_return_val_if_fail (cm && bytes && n >= 1 && !sg_op_is_coalesced (member_kind), 0.0);
  const SgCluster *c = &cm->cluster;
  double us = c->collective_overhead_us;
  for (int32_t i = 0; i < n; i++) {
    SgCostSource s;
    double t = sg_cost_collective_us (cm, member_kind, dtype, bytes[i], group_size, n_nodes, &s);
    us += MAX (t - c->collective_overhead_us, 0.0) + (i > 0 ? c->coalesced_member_us : 0.0);
    if (i == 0)
      *src = s;
  }
  return us;
}

double
sg_cost_p2p_us (const SgCostModel *cm, SgTransport transport, uint64_t bytes, bool same_node)
{
  g_return_val_if_fail (cm, 0.0);
  return sg_p2p_time (&cm->cluster, transport, bytes, same_node);
}

int32_t
sg_cost_model_sm_count (const SgCostModel *cm)
{
  return cm->cluster.sm_count;
}

static double
memory_bound_us (const SgCostModel *cm, const SgGraph *g, SgNodeId id, double floor_us,
                 SgCostSource *src)
{
  const SgNode *n = &g->nodes[id];
  double us;
  if (cm->profile &&
      sg_profile_op_us (cm->profile, n->target, sg_node_alloc_bytes (g, id), &us)) {
    *src = SG_COST_PROFILE;
    return us;
  }
  *src = SG_COST_MODEL;
  const SgCluster *c = &cm->cluster;
  double bytes = sg_compute_node_bytes (g, id, cm->storage_bytes, cm->n_storage);
  return MAX (floor_us, c->kernel_launch_us + bytes / (c->hbm_GBps * c->memory_efficiency * 1e3));
}

double
sg_cost_copy_us (const SgCostModel *cm, uint64_t bytes)
{
  g_return_val_if_fail (cm, 0.0);
  const SgCluster *c = &cm->cluster;
  return MAX (c->kernel_floor_us,
              c->kernel_launch_us + (double)bytes / (c->hbm_GBps * c->memory_efficiency * 1e3));
}

/* Whether codegen lowers copy @id without a kernel (graph/elide.c); @e:
 * the graph's analysis, or NULL to run it for this one node. */
static bool
copy_elided (const SgGraph *g, SgNodeId id, const SgElision *e)
{
  if (!sg_elision_candidate (g->nodes[id].kind))
    return false;
  if (e)
    return sg_elision_elided (g, e, id);
  SgElision own;
  sg_graph_elision_reasons (g, &own, NULL);
  bool elided = sg_elision_elided (g, &own, id);
  sg_elision_clear (&own);
  return elided;
}

/* A matmul or attention shape on every SM: measured, else modelled. */
static double
shape_us (const SgCostModel *cm, const SgShape *s, SgCostSource *src)
{
  double us;
  if (sg_profile_shape_us (cm->profile, s, &us)) {
    *src = SG_COST_PROFILE;
    return us;
  }
  *src = SG_COST_MODEL;
  return sg_compute_shape_us (&cm->cluster, s);
}

double
sg_cost_mm_us (const SgCostModel *cm, SgDtype dtype, int64_t m, int64_t k, int64_t n)
{
  g_return_val_if_fail (cm, 0.0);
  SgShape s;
  SgCostSource src;
  sg_compute_matmul_shape (&s, SG_OP_MM, dtype, 1, m, k, n);
  return shape_us (cm, &s, &src);
}

static double
node_us (const SgCostModel *cm, const SgGraph *g, SgNodeId id, const SgElision *e,
         SgCostSource *src)
{
  const SgNode *n = &g->nodes[id];
  if (!isnan (n->cost_us)) {
    *src = SG_COST_GRAPH;
    return n->cost_us;
  }
  switch (sg_op_class (n->kind)) {
  case SG_CLASS_INPUT:
  case SG_CLASS_OUTPUT:
  case SG_CLASS_GETITEM:
  case SG_CLASS_VIEW:
  case SG_CLASS_WAIT:
    *src = SG_COST_FREE;
    return 0.0;
  case SG_CLASS_MATMUL:
  case SG_CLASS_ATTENTION: {
    SgShape s;
    if (!sg_compute_shape (g, id, &s))
      return memory_bound_us (cm, g, id, cm->cluster.kernel_floor_us, src);
    return shape_us (cm, &s, src) * sg_compute_sm_factor (&cm->cluster, n);
  }
  case SG_CLASS_COLLECTIVE: {
    if (n->kind == SG_OP_COLLECTIVE_PERMUTE) { /* the profile has no p2p entries */
      *src = SG_COST_MODEL;
      return sg_p2p_permute_us (&cm->cluster, g, id);
    }
    int32_t nodes = 1;
    if (n->group >= 0 && n->group < g->n_groups)
      nodes = cm->group_nodes && n->group < cm->n_groups
                ? cm->group_nodes[n->group]
                : group_span (cm->cluster.gpus_per_node, &g->groups[n->group]);
    if (sg_op_is_coalesced (n->kind)) {
      uint32_t m = sg_node_coll_members (g, id);
      g_autofree uint64_t *bytes = g_new (uint64_t, (size_t)m + 1);
      for (uint32_t i = 0; i < m; i++)
        bytes[i] = sg_node_member_bytes (g, id, i);
      return sg_cost_coalesced_us (cm, sg_op_member_kind (n->kind),
                                   sg_node_coll_output (g, id, 0)->dtype, bytes, (int32_t)m,
                                   n->group_size, nodes, src);
    }
    return sg_cost_collective_us (cm, n->kind, n->meta.dtype, sg_node_comm_bytes (g, id),
                                  n->group_size, nodes, src);
  }
  case SG_CLASS_CREATION:
    if (n->kind == SG_OP_EMPTY) { /* allocation only, no kernel */
      *src = SG_COST_FREE;
      return 0.0;
    }
    return memory_bound_us (cm, g, id, cm->cluster.kernel_floor_us, src);
  case SG_CLASS_BUCKET:
  case SG_CLASS_COPY:
    if (copy_elided (g, id, e)) { /* views of a buffer: no kernel */
      *src = SG_COST_FREE;
      return 0.0;
    }
    return memory_bound_us (cm, g, id, cm->cluster.kernel_floor_us, src);
  case SG_CLASS_POINTWISE:
  case SG_CLASS_REDUCTION:
    return memory_bound_us (cm, g, id, cm->cluster.kernel_floor_us, src);
  case SG_CLASS_UNKNOWN:
  default:
    return memory_bound_us (cm, g, id,
                            MAX (cm->cluster.kernel_floor_us, cm->cluster.unknown_op_us), src);
  }
}

double
sg_cost_node_us (const SgCostModel *cm, const SgGraph *g, SgNodeId id, SgCostSource *src)
{
  g_return_val_if_fail (cm && g && id >= 0 && id < g->n_nodes && src, 0.0);
  return node_us (cm, g, id, NULL, src);
}

/* The zero-copy analysis when @g has copies it may elide (else none is
 * needed), its passes over every node on @pool. */
static bool
elision_if_copies (const SgGraph *g, SgPool *pool, SgElision *e)
{
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    if (sg_elision_candidate (g->nodes[i].kind)) {
      sg_graph_elision_reasons (g, e, pool);
      return true;
    }
  return false;
}

/* New nodes per range of sg_cost_new_nodes_elided on a pool, at least. */
#define NEW_RANGE_MIN 4096

typedef struct {
  const SgCostModel *cm;
  SgGraph *g;
  const SgNodeId *ids; /* NULL: every node */
  int32_t n, size;
  const SgElision *e;
  bool *changed; /* per range */
} NewCosts;

/* Range @r of the new nodes' costs (node_us only reads the graph and
 * writes the node's own cost). */
static void
new_costs_task (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  NewCosts *k = data;
  SgGraph *g = k->g;
  int32_t lo, hi;
  sg_range_of (r, k->size, k->n, &lo, &hi);
  bool changed = false;
  for (int32_t j = lo; j < hi; j++) {
    SgNodeId i = k->ids ? k->ids[j] : j;
    if (i == SG_NO_NODE || g->nodes[i].est_src != SG_COST_NONE)
      continue;
    g->nodes[i].est_us = node_us (k->cm, g, i, k->e, &g->nodes[i].est_src);
    changed = true;
  }
  k->changed[r] = changed;
}

void
sg_cost_new_nodes_elided (const SgCostModel *cm, SgGraph *g, const SgNodeId *ids,
                          int32_t n_ids, const SgElision *e, SgPool *pool)
{
  g_return_if_fail (cm && g);
  NewCosts k = { cm, g, ids, ids ? n_ids : g->n_nodes, 0, e, NULL };
  k.size = sg_pool_range_size (pool, k.n, NEW_RANGE_MIN);
  int32_t nr = sg_ranges (k.n, k.size);
  g_autofree bool *changed = k.changed = g_new (bool, (size_t)nr);
  sg_pool_run (pool, nr, new_costs_task, &k);
  for (int32_t r = 0; r < nr; r++)
    if (changed[r]) {
      sg_graph_changed (g);
      break;
    }
}

void
sg_cost_new_nodes (const SgCostModel *cm, SgGraph *g, const SgNodeId *ids, int32_t n_ids,
                   SgPool *pool)
{
  g_return_if_fail (cm && g);
  SgElision e;
  bool have = elision_if_copies (g, pool, &e);
  sg_cost_new_nodes_elided (cm, g, ids, n_ids, have ? &e : NULL, pool);
  if (have)
    sg_elision_clear (&e);
}

static void
note_unknown (SgCostModel *cm, const char *target)
{
  if (!target || g_hash_table_contains (cm->unknown_set, target))
    return;
  g_hash_table_add (cm->unknown_set, (gpointer)target);
  /* keep the array NULL-terminated for sg_estimate_unknown_targets() */
  g_ptr_array_index (cm->unknown, cm->unknown->len - 1) = (gpointer)target;
  g_ptr_array_add (cm->unknown, NULL);
}

/* Nodes per range of the estimate's parallel loops. */
#define RANGE_NODES 8192

/* The node loops of the pass, by ranges of nodes on the pool. */
typedef struct {
  SgGraph *g;
  SgCostModel *cm;
  int32_t n_ranges;
  const SgElision *e; /* NULL when the graph has no copy to elide */
  /* per range */
  bool *candidates; /* a copy it may elide */
  bool *unknown;    /* a call of an unknown target */
  SgNodeId *failed; /* its first collective_permute the cluster refuses, or SG_NO_NODE */
  GError **error;   /* that one's */
} Costing;

/* Range @r's storage bytes, and whether it has copies to elide. */
static void
storage_task (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  Costing *k = data;
  SgNodeId a, b;
  sg_range_of (r, RANGE_NODES, k->g->n_nodes, &a, &b);
  sg_compute_storage_bytes_in (k->g, a, b, k->cm->storage_bytes);
  bool any = false;
  for (SgNodeId i = a; i < b && !any; i++)
    any = sg_elision_candidate (k->g->nodes[i].kind);
  k->candidates[r] = any;
}

/* Range @r's costs, up to its first refused collective_permute. */
static void
cost_task (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  Costing *k = data;
  SgNodeId a, b;
  sg_range_of (r, RANGE_NODES, k->g->n_nodes, &a, &b);
  k->failed[r] = SG_NO_NODE;
  bool unknown = false;
  for (SgNodeId i = a; i < b; i++) {
    SgNode *n = &k->g->nodes[i];
    if (n->kind == SG_OP_COLLECTIVE_PERMUTE
        && !sg_p2p_check (&k->cm->cluster, k->g, i, &k->error[r])) {
      k->failed[r] = i;
      break;
    }
    n->est_us = node_us (k->cm, k->g, i, k->e, &n->est_src);
    unknown |= n->kind == SG_OP_UNKNOWN && n->op == SG_NODE_CALL;
  }
  k->unknown[r] = unknown;
}

/* Every node's cost (node_us), in ranges on @pool. False with the error of
 * the first collective_permute the cluster refuses (the ranges after it
 * may have their costs). */
static bool
cost_nodes (SgGraph *g, SgCostModel *cm, SgPool *pool, GError **error)
{
  Costing k = { .g = g, .cm = cm };
  k.n_ranges = sg_ranges (g->n_nodes, RANGE_NODES);
  k.candidates = g_new0 (bool, (size_t)k.n_ranges);
  k.unknown = g_new0 (bool, (size_t)k.n_ranges);
  k.failed = g_new (SgNodeId, (size_t)k.n_ranges);
  k.error = g_new0 (GError *, (size_t)k.n_ranges);
  cm->storage_bytes = g_new (uint64_t, (size_t)MAX (g->n_nodes, 1));
  cm->n_storage = g->n_nodes;
  sg_pool_run (pool, k.n_ranges, storage_task, &k);
  SgElision e;
  bool have = false;
  for (int32_t r = 0; r < k.n_ranges && !have; r++)
    have = k.candidates[r];
  if (have)
    sg_graph_elision_reasons (g, &e, pool);
  k.e = have ? &e : NULL;
  sg_pool_run (pool, k.n_ranges, cost_task, &k);
  bool ok = true;
  for (int32_t r = 0; r < k.n_ranges; r++) {
    if (ok && k.unknown[r]) { /* in id order: the list's order */
      SgNodeId a, b;
      sg_range_of (r, RANGE_NODES, g->n_nodes, &a, &b);
      for (SgNodeId i = a; i < b && (k.failed[r] == SG_NO_NODE || i < k.failed[r]); i++)
        if (g->nodes[i].kind == SG_OP_UNKNOWN && g->nodes[i].op == SG_NODE_CALL)
          note_unknown (cm, g->nodes[i].target);
    }
    if (ok && k.failed[r] != SG_NO_NODE) {
      g_propagate_error (error, g_steal_pointer (&k.error[r]));
      ok = false;
    }
    g_clear_error (&k.error[r]);
  }
  if (have)
    sg_elision_clear (&e);
  g_free (k.candidates);
  g_free (k.unknown);
  g_free (k.failed);
  g_free (k.error);
  return ok;
}

bool
sg_estimate_costs (SgGraph *g, const SgConfig *cfg, GError **error)
{
  g_return_val_if_fail (g != NULL, false);
  SgCostModel *cm = g_new0 (SgCostModel, 1);
  if (!sg_cluster_resolve (g, cfg ? cfg->cluster : NULL, &cm->cluster, error)) {
    cost_model_free (cm);
    return false;
  }
  SgCluster *c = &cm->cluster;
  int32_t need = (g->world_size + c->gpus_per_node - 1) / c->gpus_per_node;
  c->nodes = MAX (c->nodes, need);
  if (cfg && cfg->profile) {
    cm->profile = sg_profile_load (cfg->profile, g->world_size, error);
    if (!cm->profile) {
      cost_model_free (cm);
      return false;
    }
    cm->profile_path = g_strdup (cfg->profile);
  }
  cm->contention = sg_contention_table_new (cm->profile, c);
  cm->n_groups = g->n_groups;
  cm->group_nodes = g_new (int32_t, MAX (g->n_groups, 1));
  for (int32_t i = 0; i < g->n_groups; i++)
    cm->group_nodes[i] = group_span (c->gpus_per_node, &g->groups[i]);
  /* targets are owned by the graph, which owns the model */
  cm->unknown_set = g_hash_table_new (g_str_hash, g_str_equal);
  cm->unknown = g_ptr_array_new ();
  g_ptr_array_add (cm->unknown, NULL);

  sg_graph_changed (g); /* the costs change */
  if (g->cost_model && g->cost_model_free)
    g->cost_model_free (g->cost_model);
  g->cost_model = cm;
  g->cost_model_free = cost_model_free;

  /* on failure the model stays attached: the graph owns and frees it */
  bool ok = cost_nodes (g, cm, cfg ? cfg->pool : NULL, error);
  /* later passes add and move nodes: the table would go stale */
  g_clear_pointer (&cm->storage_bytes, g_free);
  cm->n_storage = 0;
  return ok;
}

const char *const *
sg_estimate_unknown_targets (const SgGraph *g, size_t *n)
{
  const SgCostModel *cm = sg_graph_cost_model (g);
  if (!cm) {
    static const char *const none[] = { NULL };
    *n = 0;
    return none;
  }
  *n = cm->unknown->len - 1;
  return (const char *const *)cm->unknown->pdata;
}

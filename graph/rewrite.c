/* rewrite.c: the graph-rewrite API (graph.h "the rewrite API", docs/ir.md).
 *
 * Passes describe a rewrite (nodes added with typed args, uses replaced,
 * nodes removed, implicit edges moved) and then either commit it to the
 * graph or build a trial graph of the result, with the same code: both
 * compute the stable topological order of the edited graph and lay the
 * nodes out in it (rewrite-order.c); the commit installs that layout in the graph, the trial
 * wraps it in a graph that borrows the base graph's pools. Nothing of the
 * base graph is copied or written before a commit, so a trial costs
 * O(nodes + edited edges), with no names looked up and no JSON. A freed
 * trial graph's arrays (nodes, inputs, origins, edges) serve the next trial,
 * which keeps them where its order starts as the last one's did.
 * Mirrors torch.fx's Graph.create_node / replace_all_uses_with /
 * erase_node, batched, and Mesa's nir_builder for passes.
 * Requires: a topological id order. Invalidates (commit): node ids, users.
 */
#include "graph-private.h"

#include <string.h>

SgRewrite *
sg_rewrite_new (SgGraph *g)
{
  g_return_val_if_fail (g && !g->trial_of, NULL);
  SgRewrite *rw = g_new0 (SgRewrite, 1);
  rw->g = g;
  rw->n0 = g->n_nodes;
  rw->dims0 = g->dims->len;
  rw->tuples0 = g->tuple_metas->len;
  rw->args0 = g->args->len;
  rw->nodes = g_array_new (FALSE, FALSE, sizeof (SgNode));
  rw->inputs = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  rw->keys = g_array_new (FALSE, FALSE, sizeof (int64_t));
  rw->name_blocks = g_ptr_array_new_with_free_func (g_free);
  rw->scratch = g_array_new (FALSE, FALSE, sizeof (SgArg));
  rw->refs = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  rw->redirects = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  rw->removed = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  rw->moves = g_array_new (FALSE, FALSE, sizeof (SgRewriteMove));
  rw->t_in = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  rw->last_t_in = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  sg_graph_fill_users (g);
  return rw;
}

/* Takes back what the rewrite added to @g's pools, unless committed. */
static void
roll_back (SgRewrite *rw)
{
  if (rw->done)
    return;
  g_array_set_size (rw->g->dims, rw->dims0);
  g_array_set_size (rw->g->tuple_metas, rw->tuples0);
  g_array_set_size (rw->g->args, rw->args0);
}

void
sg_rewrite_reset (SgRewrite *rw)
{
  g_return_if_fail (rw && !rw->done && rw->trials == 0 && rw->n0 == rw->g->n_nodes);
  roll_back (rw);
  g_array_set_size (rw->nodes, 0);
  g_array_set_size (rw->inputs, 0);
  g_array_set_size (rw->keys, 0);
  g_ptr_array_set_size (rw->name_blocks, 0);
  rw->name_used = 0;
  g_array_set_size (rw->scratch, 0);
  g_array_set_size (rw->redirects, 0);
  g_array_set_size (rw->removed, 0);
  g_array_set_size (rw->moves, 0);
  rw->result_n = 0;
  rw->last_ok = false;
  rw->stash.valid = false;
  sg_graph_fill_users (rw->g);
}

void
sg_rewrite_set_verify (SgRewrite *rw, bool on)
{
  g_return_if_fail (rw != NULL);
  rw->verify = on;
}

void
sg_rewrite_set_pool (SgRewrite *rw, SgPool *pool)
{
  g_return_if_fail (rw != NULL);
  rw->pool = pool;
}

int32_t
sg_rewrite_last_reused (const SgRewrite *rw)
{
  g_return_val_if_fail (rw != NULL, 0);
  return rw->reused;
}

void
sg_rewrite_free (SgRewrite *rw)
{
  if (!rw)
    return;
  g_return_if_fail (rw->trials == 0);
  roll_back (rw);
  for (int i = 0; i < SG_RW_N_WORK; i++)
    g_free (rw->work[i]);
  if (rw->touched)
    g_array_unref (rw->touched);
  if (rw->last_touched)
    g_array_unref (rw->last_touched);
  g_array_unref (rw->t_in);
  g_array_unref (rw->last_t_in);
  if (rw->changed)
    g_array_unref (rw->changed);
  if (rw->last_ain)
    g_array_unref (rw->last_ain);
  g_free (rw->spare_nodes);
  g_free (rw->spare_origin);
  g_free (rw->wix);
  if (rw->spare_inputs)
    g_array_unref (rw->spare_inputs);
  if (rw->spare_edges)
    g_array_unref (rw->spare_edges);
  sg_rw_redirect_lists_free (rw);
  g_array_unref (rw->nodes);
  g_array_unref (rw->inputs);
  g_array_unref (rw->keys);
  g_ptr_array_unref (rw->name_blocks);
  g_array_unref (rw->scratch);
  g_array_unref (rw->refs);
  g_array_unref (rw->redirects);
  g_array_unref (rw->removed);
  g_array_unref (rw->moves);
  g_free (rw);
}

SgGraph *
sg_rewrite_graph (const SgRewrite *rw)
{
  return rw->g;
}

static int32_t
n_total (const SgRewrite *rw)
{
  return rw->n0 + (int32_t)rw->nodes->len;
}

const SgNode *
sg_rewrite_node (const SgRewrite *rw, SgNodeId id)
{
  g_return_val_if_fail (id >= 0 && id < n_total (rw), NULL);
  return id < rw->n0 ? &rw->g->nodes[id] : &g_array_index (rw->nodes, SgNode, id - rw->n0);
}

static const SgNode *
node_of (gconstpointer ctx, SgNodeId id)
{
  return sg_rewrite_node (ctx, id);
}

/* The inputs of node @id, base or added. */
static const SgNodeId *
inputs_of (const SgRewrite *rw, SgNodeId id, uint32_t *n)
{
  if (id < rw->n0)
    return sg_node_inputs (rw->g, id, n);
  const SgNode *a = &g_array_index (rw->nodes, SgNode, id - rw->n0);
  *n = a->n_in;
  return &g_array_index (rw->inputs, SgNodeId, a->in_first);
}

static SgNodeId
input_of (gconstpointer ctx, SgNodeId id)
{
  uint32_t k;
  const SgNodeId *in = inputs_of (ctx, id, &k);
  return k ? in[0] : SG_NO_NODE;
}

SgMeta
sg_rewrite_meta (SgRewrite *rw, const int64_t *shape, const int64_t *stride, int32_t ndim,
                 SgDtype dtype)
{
  SgMeta m = { -1, SG_DTYPE_INVALID, 0 };
  g_return_val_if_fail (ndim >= 0 && ndim <= SG_MAX_DIMS && (shape || ndim == 0), m);
  GArray *dims = rw->g->dims;
  /* Copied first: @shape and @stride may point into the dims pool. */
  int64_t v[2 * SG_MAX_DIMS];
  int64_t s = 1;
  for (int32_t d = ndim - 1; d >= 0; d--) {
    v[d] = shape[d];
    v[ndim + d] = stride ? stride[d] : s;
    s *= shape[d] ? shape[d] : 1;
  }
  m = (SgMeta){ ndim, dtype, dims->len };
  g_array_append_vals (dims, v, 2 * (guint)ndim);
  return m;
}

SgArg
sg_rewrite_str (SgRewrite *rw, const char *s)
{
  SgArg a = { .type = SG_ARG_STR };
  a.s = g_string_chunk_insert_const (rw->g->strings, s);
  return a;
}

SgArg
sg_rewrite_list (SgRewrite *rw, const SgArg *items, uint32_t n)
{
  SgArg a = { .type = SG_ARG_LIST, .n = n };
  a.first = rw->scratch->len;
  g_array_append_vals (rw->scratch, items, n);
  return a;
}

static uint32_t
to_spec (SgRewrite *rw, SgNodeId src, bool kwargs, SgArg *args, SgKwarg *kw, uint32_t max)
{
  g_return_val_if_fail (src >= 0 && src < n_total (rw), 0);
  const SgNode *n = sg_rewrite_node (rw, src);
  uint32_t k, count = kwargs ? n->n_kwargs : n->n_args;
  const SgNodeId *in = inputs_of (rw, src, &k);
  for (uint32_t i = 0; i < count && i < max; i++) {
    if (kwargs) {
      const SgArg *key = &g_array_index (rw->g->args, SgArg, n->kwargs_first + 2 * i);
      kw[i].key = key->s;
      kw[i].value = sg_arg_to_spec (rw->g, in, key + 1, rw->scratch);
    } else {
      args[i] = sg_arg_to_spec (rw->g, in, &g_array_index (rw->g->args, SgArg, n->args_first + i),
                                rw->scratch);
    }
  }
  return count;
}

uint32_t
sg_rewrite_args_of (SgRewrite *rw, SgNodeId src, SgArg *out, uint32_t max)
{
  return to_spec (rw, src, false, out, NULL, max);
}

uint32_t
sg_rewrite_kwargs_of (SgRewrite *rw, SgNodeId src, SgKwarg *out, uint32_t max)
{
  return to_spec (rw, src, true, NULL, out, max);
}

SgNodeId
sg_rewrite_arg_node (const SgRewrite *rw, SgNodeId id, const SgArg *a)
{
  if (!a || a->type != SG_ARG_NODE)
    return SG_NO_NODE;
  uint32_t k;
  const SgNodeId *in = inputs_of (rw, id, &k);
  return a->input < k ? in[a->input] : SG_NO_NODE;
}

#define NAME_BLOCK 8192

const char *
sg_rewrite_keep_name (SgRewrite *rw, const char *name)
{
  size_t len = strlen (name) + 1;
  GPtrArray *b = rw->name_blocks;
  if (b->len == 0 || rw->name_used + len > NAME_BLOCK) {
    g_ptr_array_add (b, g_malloc (MAX (len, NAME_BLOCK)));
    rw->name_used = 0;
  }
  char *at = (char *)g_ptr_array_index (b, b->len - 1) + rw->name_used;
  memcpy (at, name, len);
  rw->name_used += len;
  return at;
}

void
sg_rewrite_mark (const SgRewrite *rw, SgRewriteMark *m)
{
  g_return_if_fail (rw && m);
  SgGraph *g = rw->g;
  *m = (SgRewriteMark){ rw->nodes->len, rw->inputs->len, rw->scratch->len, rw->redirects->len,
                        rw->removed->len, rw->moves->len, g->args->len, g->dims->len,
                        g->tuple_metas->len, rw->name_blocks->len, rw->name_used };
}

void
sg_rewrite_rollback (SgRewrite *rw, const SgRewriteMark *m)
{
  g_return_if_fail (rw && m && !rw->done && rw->trials == 0 && m->nodes <= rw->nodes->len);
  SgGraph *g = rw->g;
  g_array_set_size (rw->nodes, m->nodes);
  g_array_set_size (rw->keys, m->nodes);
  g_array_set_size (rw->inputs, m->inputs);
  g_array_set_size (rw->scratch, m->scratch);
  g_array_set_size (rw->redirects, m->redirects);
  g_array_set_size (rw->removed, m->removed);
  g_array_set_size (rw->moves, m->moves);
  g_array_set_size (g->args, m->args);
  g_array_set_size (g->dims, m->dims);
  g_array_set_size (g->tuple_metas, m->tuples);
  g_ptr_array_set_size (rw->name_blocks, m->name_blocks);
  rw->name_used = m->name_used;
  rw->result_n = 0;
  rw->low_nodes = MIN (rw->low_nodes, m->nodes);
}

SgNodeId
sg_rewrite_add (SgRewrite *rw, const SgNodeSpec *spec, GError **error)
{
  g_return_val_if_fail (rw && !rw->done && spec && spec->name && spec->name[0], SG_NO_NODE);
  g_return_val_if_fail (spec->kind > SG_OP_UNKNOWN && spec->kind < SG_OP_N_KINDS, SG_NO_NODE);
  SgGraph *g = rw->g;
  const char *target = spec->target;
  if (!target) { /* the table's, interned once per rewrite */
    if (!rw->targets[spec->kind] && sg_op_info (spec->kind)->target)
      rw->targets[spec->kind]
          = g_string_chunk_insert_const (g->strings, sg_op_info (spec->kind)->target);
    target = rw->targets[spec->kind];
  } else {
    target = g_string_chunk_insert_const (g->strings, target);
  }
  g_return_val_if_fail (target != NULL, SG_NO_NODE);
  guint args_len = g->args->len, tuples_len = g->tuple_metas->len;
  guint inputs_len = rw->inputs->len;
  SgNode n = { 0 };
  n.op = SG_NODE_CALL;
  n.name = sg_rewrite_keep_name (rw, spec->name);
  n.target = target;
  n.kind = spec->target ? SG_OP_UNKNOWN : spec->kind;
  n.cost_us = spec->cost_us;
  n.sm_count = spec->sm_count;
  n.meta = spec->meta;
  if (spec->n_tuple) {
    n.meta.ndim = -1;
    n.tuple_first = g->tuple_metas->len;
    n.n_tuple = spec->n_tuple;
    /* @spec->tuple may be another node's, in the pool that grows here */
    const SgMeta *pool = (const SgMeta *)(const void *)g->tuple_metas->data;
    bool inside = spec->tuple >= pool && spec->tuple < pool + g->tuple_metas->len;
    size_t from = inside ? (size_t)(spec->tuple - pool) : 0;
    g_array_set_size (g->tuple_metas, n.tuple_first + spec->n_tuple);
    memmove (&g_array_index (g->tuple_metas, SgMeta, n.tuple_first),
             inside ? &g_array_index (g->tuple_metas, SgMeta, from) : spec->tuple,
             sizeof (SgMeta) * spec->n_tuple);
  }
  SgArgBuild ab;
  sg_arg_build_init (&ab, g, n.name, rw->scratch, rw->refs, error);
  bool ok = sg_args_from_spec (&ab, spec->args, spec->n_args, spec->kwargs, spec->n_kwargs,
                               n_total (rw), &n);
  if (ok) {
    n.in_first = rw->inputs->len;
    n.n_in = ab.refs->len;
    g_array_append_vals (rw->inputs, ab.refs->data, ab.refs->len);
    ok = sg_node_finish (g, &n, (const SgNodeId *)(void *)ab.refs->data, node_of, input_of, rw,
                         error);
  }
  sg_arg_build_clear (&ab);
  if (!ok) {
    g_array_set_size (g->args, args_len);
    g_array_set_size (g->tuple_metas, tuples_len);
    g_array_set_size (rw->inputs, inputs_len);
    return SG_NO_NODE;
  }
  int64_t key = -1;
  g_array_append_val (rw->nodes, n);
  g_array_append_val (rw->keys, key);
  return n_total (rw) - 1;
}

void
sg_rewrite_place (SgRewrite *rw, SgNodeId id, SgNodeId anchor, SgPlace where)
{
  g_return_if_fail (id >= rw->n0 && id < n_total (rw) && anchor >= 0 && anchor < rw->n0);
  g_array_index (rw->keys, int64_t, id - rw->n0) = 4 * (int64_t)anchor + where;
}

void
sg_rewrite_replace_uses (SgRewrite *rw, SgNodeId old, SgNodeId to)
{
  g_return_if_fail (old >= 0 && old < rw->n0 && to >= 0 && to < n_total (rw) && old != to);
  SgNodeId pair[2] = { old, to };
  g_array_append_vals (rw->redirects, pair, 2);
}

void
sg_rewrite_remove (SgRewrite *rw, SgNodeId id)
{
  g_return_if_fail (id >= 0 && id < n_total (rw));
  g_array_append_val (rw->removed, id);
}

void
sg_rewrite_move_edges (SgRewrite *rw, SgNodeId old, SgNodeId to, uint32_t drop_kinds)
{
  g_return_if_fail (old >= 0 && old < rw->n0 && to >= 0 && to < n_total (rw));
  SgRewriteMove m = { old, to, drop_kinds };
  g_array_append_val (rw->moves, m);
}

/* --- the result -------------------------------------------------------------- */

SgNodeId
sg_rewrite_result_id (const SgRewrite *rw, SgNodeId id)
{
  g_return_val_if_fail (rw && id >= 0 && id < rw->result_n, SG_NO_NODE);
  return rw->result_id[id];
}

bool
sg_rewrite_commit (SgRewrite *rw, GError **error)
{
  g_return_val_if_fail (rw && !rw->done && rw->trials == 0, false);
  rw->stash.valid = false; /* the layout takes the memory it lives in */
  SgRewriteLayout l = { 0 };
  if (!sg_rewrite_layout (rw, &l, error))
    return false;
  SgGraph *g = rw->g;
  g_assert (rw->result_n == n_total (rw));
  sg_rw_name_added (rw, l.nodes, rw->result_id);
  sg_graph_names_drop (g);
  g_free (g->nodes);
  g->nodes = g_steal_pointer (&l.nodes);
  g->n_nodes = l.n;
  g->nodes_cap = l.nodes_cap;
  g_array_unref (g->inputs);
  g->inputs = g_steal_pointer (&l.inputs);
  if (g->implicit_edges)
    g_array_unref (g->implicit_edges);
  g->implicit_edges = g_steal_pointer (&l.edges);
  g->output = l.output;
  sg_graph_changed (g);
  sg_rewrite_layout_clear (&l);
  rw->done = true;
  return true;
}

static GArray *
pool_copy (const GArray *a, guint elt)
{
  GArray *c = g_array_sized_new (FALSE, FALSE, elt, a->len);
  g_array_append_vals (c, a->data, a->len);
  return c;
}

SgGraph *
sg_rewrite_fork (SgGraph *g)
{
  g_return_val_if_fail (g && !g->trial_of && !g->fork_of, NULL);
  sg_graph_fill_users (g);
  SgGraph *f = g_new (SgGraph, 1);
  *f = *g; /* borrowed: nodes, groups, inputs, users, edges, cost model, texts */
  f->fork_of = g;
  f->strings = g_string_chunk_new (256);
  f->dims = pool_copy (g->dims, sizeof (int64_t));
  f->tuple_metas = pool_copy (g->tuple_metas, sizeof (SgMeta));
  f->args = pool_copy (g->args, sizeof (SgArg));
  f->by_name = NULL;
  f->name_table = NULL;
  f->kept = NULL;
  f->kept_class = NULL;
  f->bucket_stats = f->decompose_stats = NULL;
  return f;
}

SgGraph *
sg_rewrite_trial (SgRewrite *rw, GError **error)
{
  g_return_val_if_fail (rw && !rw->done, NULL);
  rw->stash.valid = false; /* the layout takes the memory it lives in */
  SgRewriteLayout l = { 0 };
  if (!sg_rewrite_layout (rw, &l, error))
    return NULL;
  const SgGraph *g = rw->g;
  SgGraph *t = g_new0 (SgGraph, 1);
  t->world_size = g->world_size;
  t->rank = g->rank;
  t->nodes = g_steal_pointer (&l.nodes);
  t->n_nodes = l.n;
  t->nodes_cap = l.nodes_cap;
  t->groups = g->groups;
  t->n_groups = g->n_groups;
  t->output = l.output;
  t->source = g_strdup (g->source);
  t->strings = g->strings;
  t->dims = g_array_ref (g->dims);
  t->inputs = g_steal_pointer (&l.inputs);
  t->tuple_metas = g_array_ref (g->tuple_metas);
  t->args = g_array_ref (g->args);
  t->cost_model = g->cost_model;
  t->cost_model_free = g->cost_model_free; /* identifies the model; not called */
  t->implicit_edges = g_steal_pointer (&l.edges);
  t->trial_of = rw;
  /* the last trial's origins hold for the places of the same prefix */
  int32_t from = 0;
  if (rw->spare_origin && rw->spare_origin_cap >= l.n) {
    t->trial_origin = g_steal_pointer (&rw->spare_origin);
    rw->origin_cap = rw->spare_origin_cap;
    from = rw->same_prefix;
  } else {
    g_clear_pointer (&rw->spare_origin, g_free);
    rw->origin_cap = MAX (l.nodes_cap, 1);
    t->trial_origin = g_new (SgNodeId, (size_t)rw->origin_cap);
  }
  for (int32_t i = from; i < l.n; i++)
    t->trial_origin[i] = l.old_id[i] < rw->n0 ? l.old_id[i] : SG_NO_NODE;
  rw->last_trial = t;
  rw->trials++;
  sg_rewrite_layout_clear (&l);
  return t;
}

const SgNodeId *
sg_graph_trial_origins (const SgGraph *g)
{
  g_return_val_if_fail (g != NULL, NULL);
  return g->trial_origin;
}

void
sg_rewrite_trial_release (SgGraph *trial)
{
  SgRewrite *rw = g_steal_pointer (&trial->trial_of);
  rw->trials--;
  /* The arrays serve the rewrite's next trial; the last layout's, the
   * places of its order that the next one keeps too (rewrite-order.c). */
  bool last = trial == rw->last_trial, nodes = false, inputs = false;
  if (last)
    rw->last_trial = NULL;
  if (last && !rw->spare_origin) {
    rw->spare_origin = g_steal_pointer (&trial->trial_origin);
    rw->spare_origin_cap = rw->origin_cap;
  }
  g_clear_pointer (&trial->trial_origin, g_free);
  if (!rw->spare_nodes || rw->spare_cap < trial->nodes_cap) {
    g_free (rw->spare_nodes);
    rw->spare_nodes = g_steal_pointer (&trial->nodes);
    rw->spare_cap = trial->nodes_cap;
    rw->spare_n = trial->n_nodes;
    rw->spare_stashed = 0;
    nodes = true;
  }
  if (!rw->spare_inputs) {
    rw->spare_inputs = g_steal_pointer (&trial->inputs);
    trial->inputs = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
    inputs = true;
  }
  if (nodes || inputs)
    rw->spare_last = last && nodes && inputs;
  /* the layout's moved_edges made the edges; the trial held the only
   * reference since */
  if (!rw->spare_edges)
    rw->spare_edges = g_steal_pointer (&trial->implicit_edges);
}

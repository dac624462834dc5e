/* rewrite-stash.c: parts of a rewrite's description added again under
 * other ids (graph.h "sg_rewrite_stash", docs/ir.md).
 *
 * A pass that rolls a rewrite back (sg_rewrite_rollback) and then
 * describes parts it described before, now after a different first part,
 * would build the same nodes again with every check and conversion of
 * sg_rewrite_add. sg_rewrite_stash copies what was described from a mark
 * on into the rewrite's spare node array (the last trial graph's, idle
 * until the next layout takes it: no memory of its own, only its pages
 * that trial wrote); sg_rewrite_replay appends one part of the copy as
 * sg_rewrite_add & co. would have: the part's added nodes renumbered to
 * the ids they get now, pool offsets (inputs, args, dims, tuple metas)
 * moved to where the part lands, everything else (base ids, placement
 * keys, strings) as it was. sg_rewrite_parts_same compares two parts
 * field by field up to that shift: a pass checks a replay against
 * describing the part afresh.
 * Requires: the rewrite's base graph unchanged since the stash (the
 * rewrite's own rule). Invalidates: nothing (replay appends like an add;
 * a layout or reset drops the copy).
 */
#include "graph-private.h"

#include <string.h>

/* Room for @n items of @size at *@at (8-byte aligned), moving *@at on;
 * with *@at NULL only counts. */
static void *
carve (char **at, size_t *used, size_t n, size_t size)
{
  size_t off = (*used + 7) & ~(size_t)7;
  *used = off + n * size;
  return *at ? *at + off : NULL;
}

/* Lays the stash's arrays out from @base (NULL: only counts), the names
 * (@names_len bytes) last; the bytes needed. */
static size_t
stash_layout (SgRewriteStashed *s, char *base, size_t names_len)
{
  const SgRewriteMark *f = &s->from, *t = &s->to;
  char **at = &base;
  size_t used = 0;
  s->nodes = carve (at, &used, t->nodes - f->nodes, sizeof (SgNode));
  s->keys = carve (at, &used, t->nodes - f->nodes, sizeof (int64_t));
  s->name_at = carve (at, &used, t->nodes - f->nodes, sizeof (guint));
  s->inputs = carve (at, &used, t->inputs - f->inputs, sizeof (SgNodeId));
  s->redirects = carve (at, &used, t->redirects - f->redirects, sizeof (SgNodeId));
  s->removed = carve (at, &used, t->removed - f->removed, sizeof (SgNodeId));
  s->moves = carve (at, &used, t->moves - f->moves, sizeof (SgRewriteMove));
  s->args = carve (at, &used, t->args - f->args, sizeof (SgArg));
  s->dims = carve (at, &used, t->dims - f->dims, sizeof (int64_t));
  s->tuples = carve (at, &used, t->tuples - f->tuples, sizeof (SgMeta));
  s->names = carve (at, &used, names_len, 1);
  return used;
}

/* (an empty GArray may have no data at all) */
#define COPY(dst, arr, T, from, to)                                              \
  do {                                                                           \
    if ((to) > (from))                                                           \
      memcpy ((dst), &g_array_index ((arr), T, (from)), sizeof (T) * ((to) - (from))); \
  } while (0)

bool
sg_rewrite_stash (SgRewrite *rw, const SgRewriteMark *from, const SgRewriteMark *to)
{
  g_return_val_if_fail (rw && !rw->done && rw->trials == 0 && from && to
                        && from->nodes <= to->nodes && to->nodes <= rw->nodes->len, false);
  const SgGraph *g = rw->g;
  SgRewriteStashed *s = &rw->stash;
  s->valid = false;
  if (!rw->spare_nodes)
    return false;
  s->from = *from, s->to = *to;
  /* the arrays, then the names after them while they fit: only what the
   * last trial wrote, resident already; the layout lays out again what
   * the stash wrote over (rw->spare_stashed) */
  const size_t room = (size_t)rw->spare_n * sizeof (SgNode);
  size_t len = stash_layout (s, NULL, 0);
  if (len > room)
    return false;
  rw->spare_stashed = MAX (rw->spare_stashed, len);
  stash_layout (s, (char *)rw->spare_nodes, 0);
  const size_t names_at = len;
  len = 0;
  for (guint i = 0; i < to->nodes - from->nodes; i++) {
    const char *name = g_array_index (rw->nodes, SgNode, from->nodes + i).name;
    size_t k = strlen (name) + 1;
    if (names_at + len + k > room)
      return false;
    rw->spare_stashed = MAX (rw->spare_stashed, names_at + len + k);
    s->name_at[i] = (guint)len;
    memcpy (s->names + len, name, k);
    len += k;
  }
  COPY (s->nodes, rw->nodes, SgNode, from->nodes, to->nodes);
  COPY (s->keys, rw->keys, int64_t, from->nodes, to->nodes);
  COPY (s->inputs, rw->inputs, SgNodeId, from->inputs, to->inputs);
  COPY (s->redirects, rw->redirects, SgNodeId, from->redirects, to->redirects);
  COPY (s->removed, rw->removed, SgNodeId, from->removed, to->removed);
  COPY (s->moves, rw->moves, SgRewriteMove, from->moves, to->moves);
  COPY (s->args, g->args, SgArg, from->args, to->args);
  COPY (s->dims, g->dims, int64_t, from->dims, to->dims);
  COPY (s->tuples, g->tuple_metas, SgMeta, from->tuples, to->tuples);
  s->valid = true;
  return true;
}

/* Room for @n more items at the end of @a: the first of them. */
static void *
grow (GArray *a, guint n)
{
  guint at = a->len;
  g_array_set_size (a, at + n);
  return a->data + (size_t)at * g_array_get_element_size (a);
}

/* How a part [a, b) of the stash moves to where it is appended now. */
typedef struct {
  const SgRewriteMark *from, *a, *b;
  int32_t n0;
  int64_t d_nodes, d_inputs, d_args, d_dims, d_tuples;
  bool ok; /* cleared by a reference the part cannot carry */
} Shift;

/* Node id @x of the stashed description, now. */
static SgNodeId
shift_id (Shift *sh, SgNodeId x)
{
  if (x < sh->n0 + (int64_t)sh->from->nodes)
    return x; /* a base node or one added before the stash: kept */
  if (x >= sh->n0 + (int64_t)sh->a->nodes && x < sh->n0 + (int64_t)sh->b->nodes)
    return (SgNodeId)(x + sh->d_nodes);
  sh->ok = false; /* an added node outside the part: rolled back */
  return x;
}

/* A meta made in the part (sg_rewrite_meta: first at the dims pool's end
 * then) moves with it; ndim -1 metas and earlier ones keep theirs. */
static SgMeta
shift_meta (Shift *sh, SgMeta m)
{
  if (m.ndim < 0 || m.first < sh->from->dims)
    return m;
  if (m.first < sh->a->dims || m.first > sh->b->dims)
    sh->ok = false;
  m.first = (uint32_t)(m.first + sh->d_dims);
  return m;
}

static uint32_t
shift_args_at (Shift *sh, uint32_t first, uint32_t n)
{
  if (first < sh->a->args || first + n > sh->b->args)
    sh->ok = false;
  return (uint32_t)(first + sh->d_args);
}

static void
replay_nodes (SgRewrite *rw, const SgRewriteStashed *s, Shift *sh)
{
  const SgRewriteMark *a = sh->a, *b = sh->b;
  guint i0 = a->nodes - s->from.nodes, n = b->nodes - a->nodes;
  SgNode *out = grow (rw->nodes, n);
  for (guint i = 0; i < n; i++) {
    SgNode v = s->nodes[i0 + i];
    v.name = sg_rewrite_keep_name (rw, s->names + s->name_at[i0 + i]);
    if (v.in_first < a->inputs || v.in_first + v.n_in > b->inputs)
      sh->ok = false;
    v.in_first = (uint32_t)(v.in_first + sh->d_inputs);
    v.args_first = shift_args_at (sh, v.args_first, v.n_args);
    v.kwargs_first = shift_args_at (sh, v.kwargs_first, 2 * v.n_kwargs);
    v.meta = shift_meta (sh, v.meta);
    if (v.n_tuple) {
      if (v.tuple_first < a->tuples || v.tuple_first + v.n_tuple > b->tuples)
        sh->ok = false;
      v.tuple_first = (uint32_t)(v.tuple_first + sh->d_tuples);
    }
    out[i] = v;
  }
  g_array_append_vals (rw->keys, s->keys + i0, n);
}

/* Node ids [@from, @to) of stash array @src, shifted, appended to @dst. */
static void
replay_ids (Shift *sh, GArray *dst, const SgNodeId *src, guint from, guint to, guint base)
{
  SgNodeId *out = grow (dst, to - from);
  const SgNodeId *in = src + (from - base);
  for (guint i = 0; i < to - from; i++)
    out[i] = shift_id (sh, in[i]);
}

static void
replay_pools (SgRewrite *rw, const SgRewriteStashed *s, Shift *sh)
{
  const SgRewriteMark *a = sh->a, *b = sh->b, *f = &s->from;
  SgGraph *g = rw->g;
  replay_ids (sh, rw->inputs, s->inputs, a->inputs, b->inputs, f->inputs);
  SgArg *args = grow (g->args, b->args - a->args);
  for (guint i = 0; i < b->args - a->args; i++) {
    SgArg v = s->args[a->args - f->args + i];
    if (v.type == SG_ARG_LIST || v.type == SG_ARG_DICT)
      v.first = shift_args_at (sh, v.first, v.type == SG_ARG_DICT ? 2 * v.n : v.n);
    args[i] = v;
  }
  g_array_append_vals (g->dims, s->dims + (a->dims - f->dims), b->dims - a->dims);
  SgMeta *tuples = grow (g->tuple_metas, b->tuples - a->tuples);
  for (guint i = 0; i < b->tuples - a->tuples; i++)
    tuples[i] = shift_meta (sh, s->tuples[a->tuples - f->tuples + i]);
  replay_ids (sh, rw->redirects, s->redirects, a->redirects, b->redirects, f->redirects);
  replay_ids (sh, rw->removed, s->removed, a->removed, b->removed, f->removed);
  SgRewriteMove *moves = grow (rw->moves, b->moves - a->moves);
  for (guint i = 0; i < b->moves - a->moves; i++) {
    SgRewriteMove m = s->moves[a->moves - f->moves + i];
    m.old = shift_id (sh, m.old);
    m.to = shift_id (sh, m.to);
    moves[i] = m;
  }
}

bool
sg_rewrite_replay (SgRewrite *rw, const SgRewriteMark *a, const SgRewriteMark *b)
{
  g_return_val_if_fail (rw && !rw->done && a && b, false);
  const SgRewriteStashed *s = &rw->stash;
  /* the nodes before the copy are there as they were: @rw is at or past
   * its @from */
  g_return_val_if_fail (s->valid && a->nodes >= s->from.nodes && b->nodes <= s->to.nodes
                        && a->nodes <= b->nodes && rw->nodes->len >= s->from.nodes, false);
  SgRewriteMark now;
  sg_rewrite_mark (rw, &now);
  Shift sh = { .from = &s->from, .a = a, .b = b, .n0 = rw->n0, .ok = true };
  sh.d_nodes = (int64_t)now.nodes - a->nodes;
  sh.d_inputs = (int64_t)now.inputs - a->inputs;
  sh.d_args = (int64_t)now.args - a->args;
  sh.d_dims = (int64_t)now.dims - a->dims;
  sh.d_tuples = (int64_t)now.tuples - a->tuples;
  replay_pools (rw, s, &sh);
  replay_nodes (rw, s, &sh);
  if (!sh.ok)
    sg_rewrite_rollback (rw, &now);
  return sh.ok;
}

/* --- checking a replay ------------------------------------------------------- */

/* Part 1 [m1, m2) and part 2 [m2, m3) of a rewrite: offsets of part 2 are
 * part 1's plus the part's length in that pool. */
typedef struct {
  const SgRewriteMark *m1, *m2;
  int32_t n0;
} Parts;

static bool
same_id (const Parts *p, SgNodeId x1, SgNodeId x2)
{
  int64_t lo = p->n0 + (int64_t)p->m1->nodes, hi = p->n0 + (int64_t)p->m2->nodes;
  return x1 < lo ? x2 == x1 : x1 < hi && x2 == x1 + (hi - lo);
}

static bool
same_meta (const SgMeta *a, const SgMeta *b, guint d1, guint d2)
{
  if (a->ndim != b->ndim || a->dtype != b->dtype)
    return false;
  if (a->ndim < 0 || a->first < d1)
    return a->first == b->first;
  return b->first - a->first == d2 - d1;
}

static bool
same_arg (const SgArg *a, const SgArg *b, guint d1, guint d2)
{
  if (a->type != b->type || a->tag != b->tag || a->n != b->n)
    return false;
  switch (a->type) {
  case SG_ARG_NONE: return true;
  case SG_ARG_BOOL: return a->b == b->b;
  case SG_ARG_INT: return a->i == b->i;
  case SG_ARG_FLOAT: return memcmp (&a->f, &b->f, sizeof a->f) == 0;
  case SG_ARG_NODE: return a->input == b->input;
  case SG_ARG_LIST:
  case SG_ARG_DICT: return b->first - a->first == d2 - d1;
  default: return a->s == b->s; /* interned strings */
  }
}

static bool
same_node (const SgNode *a, const SgNode *b, const SgRewriteMark *m1, const SgRewriteMark *m2)
{
  return strcmp (a->name, b->name) == 0 && a->target == b->target && a->op == b->op
         && a->kind == b->kind && a->n_in == b->n_in && b->in_first - a->in_first == m2->inputs - m1->inputs
         && a->n_args == b->n_args && b->args_first - a->args_first == m2->args - m1->args
         && a->n_kwargs == b->n_kwargs && b->kwargs_first - a->kwargs_first == m2->args - m1->args
         && same_meta (&a->meta, &b->meta, m1->dims, m2->dims) && a->n_tuple == b->n_tuple
         && (!a->n_tuple || b->tuple_first - a->tuple_first == m2->tuples - m1->tuples)
         && a->group == b->group && a->group_size == b->group_size && a->reduce == b->reduce
         && a->getitem_index == b->getitem_index && a->sm_count == b->sm_count
         && memcmp (&a->cost_us, &b->cost_us, sizeof a->cost_us) == 0
         && memcmp (&a->est_us, &b->est_us, sizeof a->est_us) == 0 && a->est_src == b->est_src;
}

/* Pool @a's items of part 1 and part 2: as many, each pair @same. */
#define SAME_ITEMS(arr, T, f1, f2, f3, same)                                    \
  do {                                                                         \
    if ((f2) - (f1) != (f3) - (f2))                                            \
      return false;                                                            \
    for (guint i_ = 0; i_ < (f2) - (f1); i_++) {                               \
      const T *x = &g_array_index ((arr), T, (f1) + i_);                       \
      const T *y = &g_array_index ((arr), T, (f2) + i_);                       \
      if (!(same))                                                             \
        return false;                                                          \
    }                                                                          \
  } while (0)

bool
sg_rewrite_parts_same (const SgRewrite *rw, const SgRewriteMark *m1, const SgRewriteMark *m2)
{
  g_return_val_if_fail (rw && m1 && m2 && m1->nodes <= m2->nodes, false);
  const SgGraph *g = rw->g;
  SgRewriteMark m3;
  sg_rewrite_mark (rw, &m3);
  Parts p = { m1, m2, rw->n0 };
  SAME_ITEMS (rw->nodes, SgNode, m1->nodes, m2->nodes, m3.nodes, same_node (x, y, m1, m2));
  SAME_ITEMS (rw->keys, int64_t, m1->nodes, m2->nodes, m3.nodes, *x == *y);
  SAME_ITEMS (rw->inputs, SgNodeId, m1->inputs, m2->inputs, m3.inputs, same_id (&p, *x, *y));
  SAME_ITEMS (rw->redirects, SgNodeId, m1->redirects, m2->redirects, m3.redirects,
              same_id (&p, *x, *y));
  SAME_ITEMS (rw->removed, SgNodeId, m1->removed, m2->removed, m3.removed, same_id (&p, *x, *y));
  SAME_ITEMS (rw->moves, SgRewriteMove, m1->moves, m2->moves, m3.moves,
              same_id (&p, x->old, y->old) && same_id (&p, x->to, y->to) && x->drop == y->drop);
  SAME_ITEMS (g->args, SgArg, m1->args, m2->args, m3.args, same_arg (x, y, m1->args, m2->args));
  SAME_ITEMS (g->dims, int64_t, m1->dims, m2->dims, m3.dims, *x == *y);
  SAME_ITEMS (g->tuple_metas, SgMeta, m1->tuples, m2->tuples, m3.tuples,
              same_meta (x, y, m1->dims, m2->dims));
  return true;
}

/* elide-passes.c: the zero-copy analysis (sg_graph_elision*, elide.c's
 * rule) around its decisions (elide.c's sg_elision_decide, in id order):
 * one pass over every node and its inputs for the copies and the readers
 * the decisions need, then the slices of rank_rolls lowered to views, the
 * storage roots, and the roots' storage sizes (sg_elision_storage_bytes);
 * the working memory kept between analyses (sg_graph_elision_again).
 * The passes over every node run in ranges of nodes on the pool of
 * sg_elision_set_pool, combined in range order: the same result with any
 * pool; the decisions stay sequential (a decision reads the placements
 * of the copies before it), and so do the roots that resolve to a node
 * of an earlier range (resolved in range order after the ranges).
 * Requires: a topological id order. Invalidates: nothing.
 */
#include "graph.h"
#include "graph-private.h"

#include <string.h>

/* Bytes a range of sg_elision_storage_bytes adds to a root outside it. */
typedef struct {
  SgNodeId root;
  uint64_t bytes;
} Late;

/* One range of nodes of the passes over every node (a pool task): what
 * it found, combined by the caller in range order. */
typedef struct {
  GArray *copies; /* SgNodeId: its copies, in id order */
  GArray *pairs;  /* SgNodeId pairs: (pack, collective reading it), in id order */
  GArray *late;   /* SgNodeId: the nodes whose root resolves before the range */
  GArray *spill;  /* Late: storage bytes of roots outside the range */
  bool cats, rolls;
} ElRange;

/* The analysis's memory: its arrays of @cap entries and those of the
 * SgElision it fills, kept between analyses by sg_graph_elision_again.
 * Between analyses is_output is false everywhere, e->reason 0 except at
 * @copies and e->view_of -1 and e->view_off 0 except at @viewed, so the
 * next analysis clears only those entries. */
struct SgElisionWork {
  size_t cap;
  SgNodeId *reader;    /* per pack: its only reader, or -1 (none), -2 (several);
                        * per cat: its only user likewise; per rank_roll: -1 while
                        * every user is a one-block row slice, else -2; per other
                        * node, for the roots: NOT_COPY, or ALIAS_OF (its first
                        * input) for an alias with one; RELOCATED once the
                        * decisions placed it in a copy's buffer (find_roots) */
  bool *is_output;     /* per storage root: read by the output node */
  SgNodeId *group_root; /* per relocation owner (a copy): the lowest-id input root */
  GArray *copies;      /* SgNodeId: the copies, in id order */
  GArray *viewed;      /* SgNodeId: the nodes whose view_of is set */
  GArray *outputs;     /* SgNodeId: the roots is_output marks */
  SgPool *pool;        /* the per-node passes' (sg_elision_set_pool), not owned */
  ElRange *rg;         /* n_rg ranges' scratch */
  int32_t n_rg;
};

/* w->reader entries of the nodes that are not copies: neither relocated
 * nor an alias with an input; relocated (set by find_roots); an alias of
 * its first input @in (every value below RELOCATED), and @in from one. */
#define NOT_COPY (-3)
#define RELOCATED (-4)
#define ALIAS_OF(in) (-5 - (in))
#define ALIAS_INPUT(m) (-5 - (m))

/* Ranges of fewer nodes cost more to hand out than they save. */
#define RANGE_MIN 4096

/* The ranges the per-node passes split @n nodes into on @w's pool
 * (sg_pool_range_size: any split gives the same result); their scratch
 * made. */
static int32_t
ranges_for (SgElisionWork *w, int32_t n)
{
  int32_t nr = sg_ranges (n, sg_pool_range_size (w->pool, n, RANGE_MIN));
  if (nr > w->n_rg) {
    w->rg = g_renew (ElRange, w->rg, (size_t)nr);
    for (int32_t r = w->n_rg; r < nr; r++)
      w->rg[r] = (ElRange){ g_array_new (FALSE, FALSE, sizeof (SgNodeId)),
                            g_array_new (FALSE, FALSE, sizeof (SgNodeId)),
                            g_array_new (FALSE, FALSE, sizeof (SgNodeId)),
                            g_array_new (FALSE, FALSE, sizeof (Late)), false, false };
    w->n_rg = nr;
  }
  return nr;
}

/* Range @r of @nr over @n nodes: [*@a, *@b). */
static void
range_bounds (int32_t r, int32_t nr, int32_t n, int32_t *a, int32_t *b)
{
  sg_range_of (r, (int32_t)(((int64_t)n + nr - 1) / MAX (nr, 1)), n, a, b);
}

/* What the passes over every node look at, per op kind. */
enum { K_COPY = 1, K_COLL = 2, K_ALIAS = 4 };

/* w->reader's entry of a node with flags @f that is not a copy. */
G_ALWAYS_INLINE static inline SgNodeId
plain_entry (uint8_t f, const SgNode *nd, const SgNodeId *inputs)
{
  return (f & K_ALIAS) && nd->n_in ? ALIAS_OF (inputs[nd->in_first]) : NOT_COPY;
}

/* Range @r of find_readers' pass over every node: the range's copies
 * with their entries reset, the other nodes' reader entries (struct
 * SgElisionWork), the collectives that read a pack. */
static void
scan_task (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  SgElisionCtx *x = data;
  const SgGraph *g = x->g;
  const SgNode *nodes = g->nodes;
  const SgNodeId *inputs = g->inputs ? (const SgNodeId *)(void *)g->inputs->data : NULL;
  SgElisionWork *w = x->w;
  ElRange *rg = &w->rg[r];
  GArray *copies = x->n_ranges == 1 ? w->copies : rg->copies; /* one range: no second list */
  g_array_set_size (rg->copies, 0);
  g_array_set_size (rg->pairs, 0);
  rg->cats = rg->rolls = false;
  int32_t a, b;
  range_bounds (r, x->n_ranges, g->n_nodes, &a, &b);
  SgNodeId *reader = x->reader;
  const uint8_t *kf = x->kf;
  const SgNode *nd = nodes + a;
  SgNodeId *const end = reader + b;
  /* room for every node of the range to be a copy; trimmed after */
  const guint had = copies->len;
  g_array_set_size (copies, had + (guint)(b - a));
  SgNodeId *const copy0 = (SgNodeId *)(void *)copies->data, *cp = copy0 + had;
  for (SgNodeId *rd = reader + a; rd < end; rd++, nd++) {
    const uint8_t f = kf[nd->kind];
    if (G_LIKELY (!(f & (K_COPY | K_COLL)))) { /* most nodes: the entry only */
      *rd = plain_entry (f, nd, inputs);
      continue;
    }
    const SgNodeId v = (SgNodeId)(rd - reader);
    const SgOpKind kind = nd->kind;
    if (f & K_COPY) {
      *cp++ = v;
      reader[v] = x->group_root[v] = -1;
    } else {
      reader[v] = plain_entry (f, nd, inputs);
    }
    rg->cats = rg->cats || kind == SG_OP_CAT || kind == SG_OP_RANK_ROLL;
    rg->rolls = rg->rolls || kind == SG_OP_RANK_ROLL;
    if ((f & K_COLL) && nd->n_in > 0 && nodes[inputs[nd->in_first]].kind == SG_OP_BUCKET_PACK) {
      const SgNodeId pair[2] = { inputs[nd->in_first], v };
      g_array_append_vals (rg->pairs, pair, 2);
    }
  }
  g_array_set_size (copies, (guint)(cp - copy0));
}

/* The copies, and the readers the decisions need, from one pass over
 * every node's inputs (in ranges on the pool, combined in range order):
 * the collective of each pack, the only user of each cat, whether every
 * user of a rank_roll is a one-block row slice (and which block). A
 * pack's reader reads it after its place in the id order, where its
 * entry is reset (in its range's task, before the readers are counted
 * here in id order). */
static void
find_readers (SgElisionCtx *x, GArray *copies)
{
  const SgGraph *g = x->g;
  const size_t nn = (size_t)MAX (g->n_nodes, 1);
  SgElisionWork *w = x->w;
  sg_pool_run (w->pool, x->n_ranges, scan_task, x);
  bool cats = false, rolls = false;
  for (int32_t r = 0; r < x->n_ranges; r++) {
    const ElRange *rg = &w->rg[r];
    if (x->n_ranges > 1)
      g_array_append_vals (copies, rg->copies->data, rg->copies->len);
    const SgNodeId *pair = (const SgNodeId *)(void *)rg->pairs->data;
    for (guint i = 0; i < rg->pairs->len; i += 2)
      x->reader[pair[i]] = x->reader[pair[i]] == -1 ? pair[i + 1] : -2;
    cats = cats || rg->cats;
    rolls = rolls || rg->rolls;
  }
  if (rolls) {
    x->e->roll = g_new (SgRollPlace, nn);
    for (size_t i = 0; i < nn; i++)
      x->e->roll[i] = (SgRollPlace){ -1, 1, 0, 0 };
    x->block = g_new (int32_t, nn);
    memset (x->block, 0xff, nn * sizeof (int32_t));
    x->roll_why = g_new (uint8_t, nn);
    memset (x->roll_why, 0xff, nn);
  }
  /* every node's inputs only when some cat or rank_roll needs its readers
   * (bucket/'s trial graphs have none: their analysis stays one pass) */
  for (SgNodeId v = 0; cats && v < g->n_nodes; v++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, v, &k);
    for (uint32_t j = 0; j < k; j++) {
      const SgOpKind ik = g->nodes[in[j]].kind;
      if (ik == SG_OP_CAT)
        x->reader[in[j]] = x->reader[in[j]] == -1 ? v : -2;
      else if (ik == SG_OP_RANK_ROLL && (x->block[v] = sg_elision_slice_block (g, v, in[j])) < 0)
        x->reader[in[j]] = -2;
    }
  }
}

/* @e and @w ready for a graph of @n nodes: arrays grown (new entries
 * in the state between analyses, struct SgElisionWork), the entries the
 * last analysis set cleared. */
static void
work_prepare (SgElision *e, SgElisionWork *w, size_t n, bool roots)
{
  if (w->cap < n) {
    size_t old = w->cap, cap = old ? n + n / 4 : n;
    e->reason = g_renew (uint8_t, e->reason, cap);
    e->view_of = g_renew (SgNodeId, e->view_of, cap);
    e->view_off = g_renew (uint64_t, e->view_off, cap);
    if (roots)
      e->root = g_renew (SgNodeId, e->root, cap);
    w->reader = g_renew (SgNodeId, w->reader, cap);
    w->group_root = g_renew (SgNodeId, w->group_root, cap);
    w->is_output = g_renew (bool, w->is_output, cap);
    memset (e->reason + old, 0, cap - old);
    memset (e->view_of + old, 0xff, (cap - old) * sizeof (SgNodeId)); /* -1 */
    memset (e->view_off + old, 0, (cap - old) * sizeof (uint64_t));
    memset (w->is_output + old, 0, (cap - old) * sizeof (bool));
    w->cap = cap;
  }
  if (!w->copies) {
    w->copies = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
    w->viewed = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
    w->outputs = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  }
  for (guint i = 0; i < w->copies->len; i++)
    e->reason[g_array_index (w->copies, SgNodeId, i)] = 0;
  for (guint i = 0; i < w->viewed->len; i++) {
    SgNodeId v = g_array_index (w->viewed, SgNodeId, i);
    e->view_of[v] = -1;
    e->view_off[v] = 0;
  }
  g_array_set_size (w->copies, 0);
  g_array_set_size (w->viewed, 0);
  g_clear_pointer (&e->roll, g_free);
  e->n_elided = 0;
}

static void
work_free (SgElisionWork *w)
{
  g_free (w->reader);
  g_free (w->group_root);
  g_free (w->is_output);
  for (int32_t r = 0; r < w->n_rg; r++) {
    g_array_unref (w->rg[r].copies);
    g_array_unref (w->rg[r].pairs);
    g_array_unref (w->rg[r].late);
    g_array_unref (w->rg[r].spill);
  }
  g_free (w->rg);
  if (w->copies)
    g_array_unref (w->copies);
  if (w->viewed)
    g_array_unref (w->viewed);
  if (w->outputs)
    g_array_unref (w->outputs);
}

/* Marks the storage roots the output node reads (listed in w->outputs),
 * or (@on false) unmarks them. The roots of sg_node_storage_root, found
 * in the reader entries of find_readers (an alias's names its input; a
 * copy is no alias) rather than the nodes. */
static void
mark_output (SgElisionCtx *x, bool on)
{
  const SgGraph *g = x->g;
  GArray *marked = x->w->outputs;
  if (on && g->output != SG_NO_NODE) {
    const SgNodeId *reader = x->reader;
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, g->output, &k);
    g_array_set_size (marked, k);
    for (uint32_t j = 0; j < k; j++) {
      SgNodeId v = in[j];
      while (reader[v] < RELOCATED)
        v = ALIAS_INPUT (reader[v]);
      g_array_index (marked, SgNodeId, j) = v;
    }
  }
  for (guint j = 0; j < marked->len; j++)
    x->is_output[g_array_index (marked, SgNodeId, j)] = on;
  if (!on)
    g_array_set_size (marked, 0);
}

/* The K_ flags of every op kind into @kf. */
static void
kind_flags (uint8_t *kf)
{
  for (int k = 0; k < SG_OP_N_KINDS; k++)
    kf[k] = (uint8_t)((sg_elision_candidate ((SgOpKind)k) ? K_COPY : 0)
                      | (sg_op_is_collective ((SgOpKind)k) && !sg_op_is_coalesced ((SgOpKind)k)
                             ? K_COLL
                             : 0)
                      | (sg_op_is_alias ((SgOpKind)k) ? K_ALIAS : 0));
}

/* Range @r of the storage roots (liveness.c) in id order, from the
 * reader entries, not the nodes (a copy's kind aside): what a node
 * resolves to has a lower id (a relocation's group root is its lowest-id
 * input, whose root is itself; a cat under a rank_roll takes that of the
 * roll's relocation). A node that resolves to the root of one before the
 * range, p, is left at -2 - p and listed; find_roots resolves it. */
static void
roots_task (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  SgElisionCtx *x = data;
  const SgElision *e = x->e;
  const SgElisionWork *w = x->w;
  const SgNodeId *view_of = e->view_of, *group_root = w->group_root, *mark = w->reader;
  SgNodeId *root = e->root;
  GArray *late = w->rg[r].late;
  g_array_set_size (late, 0);
  int32_t a, b;
  range_bounds (r, x->n_ranges, x->g->n_nodes, &a, &b);
  for (SgNodeId v = a; v < b; v++) {
    const SgNodeId m = mark[v];
    SgNodeId p; /* resolves to root[p] */
    if (G_LIKELY (m == NOT_COPY)) {
      root[v] = v;
      continue;
    } else if (m < RELOCATED) {
      p = ALIAS_INPUT (m);
    } else if (m == RELOCATED) {
      root[v] = group_root[view_of[v]];
      continue;
    } else if (e->reason[v] == SG_COPY_ELIDED && view_of[v] >= 0 && view_of[v] < v) {
      p = view_of[v];
    } else if (e->reason[v] == SG_COPY_ELIDED) {
      root[v] = group_root[v];
      continue;
    } else if ((x->kf[x->g->nodes[v].kind] & K_ALIAS) && x->g->nodes[v].n_in) {
      uint32_t k;
      p = sg_node_inputs (x->g, v, &k)[0];
    } else {
      root[v] = v;
      continue;
    }
    const SgNodeId rv = p >= a ? root[p] : -2 - p; /* root[p] may be one left for later */
    root[v] = rv;
    if (rv <= -2) {
      const SgNodeId later = v; /* (v's address not taken: a register) */
      g_array_append_val (late, later);
    }
  }
}

/* The storage roots into e->root: the relocated nodes' reader entries
 * marked (w->viewed lists them, with the copies that are views), so that
 * the ranges read no view_of of a plain node; the ranges on the pool;
 * then, in range order (a node's root is final once the ranges before its
 * own are), the nodes that resolve to one before their range. */
static void
find_roots (SgElisionCtx *x)
{
  SgNodeId *root = x->e->root;
  const GArray *viewed = x->w->viewed;
  for (guint i = 0; i < viewed->len; i++) {
    const SgNodeId v = g_array_index (viewed, SgNodeId, i);
    if (x->reader[v] <= NOT_COPY)
      x->reader[v] = RELOCATED;
  }
  sg_pool_run (x->w->pool, x->n_ranges, roots_task, x);
  for (int32_t r = 1; r < x->n_ranges; r++) {
    const GArray *late = x->w->rg[r].late;
    for (guint i = 0; i < late->len; i++) {
      SgNodeId v = g_array_index (late, SgNodeId, i);
      root[v] = root[-2 - root[v]];
    }
  }
}

/* The analysis into @e, with the memory @w (struct SgElisionWork; a
 * zeroed @w, e's arrays NULL: new ones); @roots false leaves e->root
 * NULL (what the cost model needs is the reasons). One pass over the
 * nodes and their inputs (on w's pool), the decisions over the copies
 * only, one pass for the slices of rank_rolls lowered to views, one more
 * for the roots (on w's pool). */
static void
elision (const SgGraph *g, SgElision *e, SgElisionWork *w, bool roots)
{
  int32_t n = g->n_nodes;
  size_t nn = (size_t)MAX (n, 1);
  work_prepare (e, w, nn, roots);
  SgElisionCtx x = { .g = g, .e = e, .w = w, .viewed = w->viewed, .reader = w->reader,
                     .group_root = w->group_root, .is_output = w->is_output,
                     .n_ranges = ranges_for (w, n) };
  kind_flags (x.kf);
  GArray *copies = w->copies;
  find_readers (&x, copies);
  mark_output (&x, true);
  sg_elision_decide (&x, copies);
  mark_output (&x, false);
  /* the slices of a rank_roll lowered to views: their blocks of its input */
  for (SgNodeId v = 0; e->roll && v < n; v++) {
    uint32_t k;
    const SgNodeId r = x.block[v] >= 0 ? sg_node_inputs (g, v, &k)[0] : SG_NO_NODE;
    SgRankRoll rr;
    if (r == SG_NO_NODE || e->reason[r] != SG_COPY_ELIDED || e->view_of[r] < 0
        || !sg_node_rank_roll (g, r, &rr, NULL))
      continue;
    e->roll[v] = (SgRollPlace){ rr.group, (int32_t)rr.sign, x.block[v] + rr.shift,
                                sg_meta_bytes (g, &g->nodes[v].meta) };
  }
  if (roots)
    find_roots (&x);
  g_free (x.block);
  g_free (x.roll_why);
}

/* One analysis into a zeroed @e; its working memory goes with it. */
static void
elision_once (const SgGraph *g, SgElision *e, bool roots, SgPool *pool)
{
  memset (e, 0, sizeof *e);
  SgElisionWork w = { .pool = pool };
  elision (g, e, &w, roots);
  work_free (&w);
}

void
sg_graph_elision (const SgGraph *g, SgElision *e)
{
  g_return_if_fail (g && e);
  elision_once (g, e, true, NULL);
}

void
sg_graph_elision_reasons (const SgGraph *g, SgElision *e, SgPool *pool)
{
  g_return_if_fail (g && e);
  elision_once (g, e, false, pool);
}

void
sg_graph_elision_again (const SgGraph *g, SgElision *e)
{
  g_return_if_fail (g && e && (e->work || !e->reason));
  if (!e->work)
    e->work = g_new0 (SgElisionWork, 1);
  elision (g, e, e->work, true);
}

void
sg_elision_set_pool (SgElision *e, SgPool *pool)
{
  g_return_if_fail (e && (e->work || !e->reason));
  if (!e->work)
    e->work = g_new0 (SgElisionWork, 1);
  e->work->pool = pool;
}

typedef struct {
  const SgGraph *g;
  const SgElision *e;
  const uint64_t *node_alloc; /* NULL: sg_node_alloc_bytes */
  uint64_t *alloc;
  int32_t n_ranges;
} Storage;

/* Node @i's bytes: @node_alloc's, or (NULL) sg_node_alloc_bytes. */
G_ALWAYS_INLINE static inline uint64_t
node_bytes (const SgGraph *g, const uint64_t *node_alloc, SgNodeId i)
{
  return node_alloc ? node_alloc[i] : sg_node_alloc_bytes (g, i);
}

/* Nodes [@a, @b) of storage_task, @node_alloc as s->node_alloc (a
 * constant in each caller's copy). A node's root is never after it
 * (roots_task), so its entry is cleared before any node adds to it. */
G_ALWAYS_INLINE static inline void
storage_range (const Storage *s, const uint64_t *node_alloc, GArray *spill, int32_t a, int32_t b)
{
  const SgGraph *g = s->g;
  const SgNodeId *root = s->e->root;
  uint64_t *alloc = s->alloc;
  for (SgNodeId i = a; i < b; i++) {
    const SgNodeId ri = root[i];
    alloc[i] = 0;
    if (ri >= a) {
      alloc[ri] += node_bytes (g, node_alloc, i);
    } else {
      const Late l = { ri, node_bytes (g, node_alloc, i) };
      g_array_append_vals (spill, &l, 1);
    }
  }
}

/* Range @r of sg_elision_storage_bytes: its entries of @alloc cleared,
 * then every node's bytes added to its root's entry, which is in the
 * range or (several ranges) listed (spill) for the caller. */
static void
storage_task (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  const Storage *s = data;
  GArray *spill = s->n_ranges > 1 ? s->e->work->rg[r].spill : NULL;
  if (spill)
    g_array_set_size (spill, 0);
  int32_t a, b;
  range_bounds (r, s->n_ranges, s->g->n_nodes, &a, &b);
  if (s->node_alloc)
    storage_range (s, s->node_alloc, spill, a, b);
  else
    storage_range (s, NULL, spill, a, b);
}

/* The sums over every node (in ranges on e's pool with e's working
 * memory, sg_graph_elision_again, and @node_alloc; else in one), less the
 * elided copies' bytes after (unsigned sums modulo 2^64: the same as
 * leaving them out). The elided copies are among e's listed copies, or
 * found among every node (sg_elision_elided: not by reason alone, which
 * is 0, SG_COPY_ELIDED, for nodes that are not copies too). */
uint64_t *
sg_elision_storage_bytes (const SgGraph *g, const SgElision *e, const uint64_t *node_alloc,
                          uint64_t *out)
{
  const int32_t n = g->n_nodes;
  uint64_t *alloc = out ? out : g_new (uint64_t, (size_t)MAX (n, 1));
  alloc[0] = 0; /* a graph without nodes */
  SgElisionWork *w = e->work;
  const GArray *copies = w ? w->copies : NULL; /* NULL: not listed */
  Storage s = { g, e, node_alloc, alloc, copies && node_alloc ? ranges_for (w, n) : 1 };
  sg_pool_run (s.n_ranges > 1 ? w->pool : NULL, s.n_ranges, storage_task, &s);
  for (int32_t r = 0; r < s.n_ranges && s.n_ranges > 1; r++) {
    const GArray *spill = w->rg[r].spill;
    for (guint i = 0; i < spill->len; i++)
      alloc[g_array_index (spill, Late, i).root] += g_array_index (spill, Late, i).bytes;
  }
  if (e->n_elided == 0)
    return alloc;
  const int32_t n_cand = copies ? (int32_t)copies->len : n;
  for (int32_t i = 0; i < n_cand; i++) {
    const SgNodeId c = copies ? g_array_index (copies, SgNodeId, i) : i;
    if (copies ? e->reason[c] == SG_COPY_ELIDED /* a listed copy */ : sg_elision_elided (g, e, c))
      alloc[e->root[c]] -= node_bytes (g, node_alloc, c);
  }
  return alloc;
}

void
sg_elision_clear (SgElision *e)
{
  if (!e)
    return;
  g_free (e->reason);
  g_free (e->view_of);
  g_free (e->view_off);
  g_free (e->roll);
  g_free (e->root);
  if (e->work) {
    work_free (e->work);
    g_free (e->work);
  }
  memset (e, 0, sizeof *e);
}


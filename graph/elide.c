/* elide.c: which copies lower to views (zero-copy buckets and collective
 * matmuls).
 *
 * bucket/ rewrites a bucket as pack -> collective -> wait -> unpacks, and
 * decompose/ reassembles ring results with cat and rank_roll (docs/ops.md).
 * Where the layout allows, codegen emits no kernel for such a copy and
 * places the tensors so that the copy would have been the identity:
 *  - pack or cat along the rows (a concatenation of the flattened inputs),
 *    relocation: the inputs are written by their producers (or seeded,
 *    for graph inputs) straight into the concatenation's buffer, input i
 *    at the concatenation offset of the inputs before it;
 *  - pack or cat, view: the inputs already lie back to back in one storage
 *    in order (e.g. the unpacks of an earlier bucket of the same members),
 *    so the result is a view of it;
 *  - unpack: with k = 1 (reduce_scatter, all_reduce) a member is a
 *    contiguous slice of the bucket's result, so it is a view of it;
 *  - rank_roll of a cat of one row block per rank (the ring all_gather's
 *    chunk results, read by nothing else), rank-dependent relocation: the
 *    rank_roll owns the buffer, input t is written at block
 *    (t - shift - sign r) mod k of it on the rank of group rank r (XLA's
 *    dynamic-update-slice at a partition-id offset, in place), the cat has
 *    no storage of its own;
 *  - rank_roll read only by one-row-block slices (the ring reduce_scatter's
 *    static slices): each slice of block t is a view of the rank_roll's
 *    input at block (t + shift + sign r) mod k (a dynamic slice).
 * The rank-dependent placements are rules (SgRollPlace), the same text on
 * every rank; each runtime resolves them for its rank (plan values' `roll`).
 * The inputs of a cat or rank_roll may be written by collectives (the
 * ring's permutes write their chunks in place; plan/plan-races.c tracks
 * writes per value); a bucket pack's may not (not extended to buckets:
 * their plans stay as they were).
 * What stays a copy, and why (SgCopyReason): an all_gather result is
 * rank-major (a member's rows are strided over the ranks' segments); a
 * reduce_scatter input interleaves chunk r of every member in rank r's
 * segment; a cat along a dim that interleaves its inputs' rows; a rank_roll
 * of anything else, or read by anything but one-block row slices; an input
 * that is not a whole contiguous tensor, that is already placed elsewhere
 * in another layout (a rank-dependent one included), that is a graph output
 * (the buffer would live to the end), that is a pack member written by a
 * collective or is a tuple element; graph inputs mixed with computed ones.
 *
 * This is the one rule: the cost model prices elided nodes at zero, the
 * liveness rule (liveness.c) uses the storage roots below, codegen places
 * the buffers by it, the bucket report and the plan say why a copy stays.
 * Offsets and k come from the unpack's args (trial graphs of bucket/ have
 * them too: they are the rewrite's own layout).
 * The storage sizes of the roots (sg_elision_storage_bytes) are here too.
 * The passes over every node (the scan for copies and readers, the roots,
 * the storage sizes) run in ranges of nodes on the pool of
 * sg_elision_set_pool, combined in range order: the same result with any
 * pool; the decisions stay sequential (a decision reads the placements
 * of the copies before it), and so do the roots that resolve to a node
 * of an earlier range (resolved in range order after the ranges).
 * Mirrors: buffer assignment with aliasing in XLA (a "bitcast" is free,
 * an operand may share its user's buffer, dynamic-update-slice in place)
 * and TFLite's arena planner.
 * Requires: a topological id order. Invalidates: nothing.
 */
#include "graph.h"

#include <string.h>

static const char *const reason_text[SG_COPY_N_REASONS] = {
  [SG_COPY_ELIDED] = "elided",
  [SG_COPY_RANK_MAJOR] = "rank_major: an all_gather result holds each member strided over "
                         "the ranks' segments",
  [SG_COPY_INTERLEAVED] = "interleaved: a reduce_scatter input holds chunk r of every member "
                          "in rank r's segment",
  [SG_COPY_STRIDED_INPUT] = "strided_input: a member input is not a whole contiguous tensor",
  [SG_COPY_SHARED_INPUT] = "shared_input: a member input is placed elsewhere in another layout",
  [SG_COPY_OUTPUT_INPUT] = "output_input: a member input is a graph output (its bucket buffer "
                           "would live to the end)",
  [SG_COPY_MIXED_INPUTS] = "mixed_inputs: graph inputs and computed members cannot share one "
                           "buffer",
  [SG_COPY_COMM_WRITTEN] = "comm_written: a member input is written by a collective",
  [SG_COPY_TUPLE_INPUT] = "tuple_input: a member input is an element of a multi-output op",
  [SG_COPY_NO_COLLECTIVE] = "no_collective: no single collective reads the pack",
  [SG_COPY_CAT_DIM] = "cat_dim: a cat along a dim that interleaves its inputs' rows",
  [SG_COPY_ROLL_USERS] = "roll_users: a rank_roll neither of a cat of one row block per rank "
                         "nor read only by one-block row slices",
};

const char *
sg_copy_reason_text (SgCopyReason r)
{
  g_return_val_if_fail (r >= 0 && r < SG_COPY_N_REASONS, "");
  return reason_text[r];
}

/* Row-major contiguous (dims of size 1 may have any stride). */
static bool
meta_contiguous (const SgGraph *g, const SgMeta *m)
{
  if (m->ndim < 0)
    return false;
  const int64_t *sh = sg_meta_shape (g, m), *st = sg_meta_stride (g, m);
  int64_t want = 1;
  for (int32_t d = m->ndim - 1; d >= 0; d--) {
    if (sh[d] != 1 && st[d] != want)
      return false;
    want *= sh[d];
  }
  return true;
}

/* k and offset of an unpack (x, k, offset, numel); false when missing. */
static bool
unpack_args (const SgGraph *g, SgNodeId u, int64_t *k, int64_t *off)
{
  double dk, doff;
  if (!sg_arg_float (sg_node_param (g, u, SG_PARAM_K), &dk)
      || !sg_arg_float (sg_node_param (g, u, SG_PARAM_OFFSET), &doff))
    return false;
  *k = (int64_t)dk;
  *off = (int64_t)doff;
  return true;
}

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
                        * node, for the roots: NOT_COPY, or -4 - its first input
                        * for an alias with one */
  bool *is_output;     /* per storage root: read by the output node */
  SgNodeId *group_root; /* per relocation owner (a copy): the lowest-id input root */
  GArray *copies;      /* SgNodeId: the copies, in id order */
  GArray *viewed;      /* SgNodeId: the nodes whose view_of is set */
  GArray *outputs;     /* SgNodeId: the roots is_output marks */
  SgPool *pool;        /* the per-node passes' (sg_elision_set_pool), not owned */
  ElRange *rg;         /* n_rg ranges' scratch */
  int32_t n_rg;
};

/* w->reader of a node that is neither a copy nor an alias with an input. */
#define NOT_COPY (-3)

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

typedef struct {
  const SgGraph *g;
  SgElision *e;
  SgElisionWork *w;
  SgNodeId *reader, *group_root; /* w's */
  bool *is_output;
  uint8_t kf[SG_OP_N_KINDS]; /* K_ flags per kind */
  int32_t *block;      /* per one-block row slice of a rank_roll: its block, else -1 */
  uint8_t *roll_why;   /* per rank_roll: why its cat could not be relocated into it */
  int32_t n_ranges;    /* of the passes over every node (ranges_for) */
} Ctx;

/* @v a view of @of at byte @off (e->view_of, e->view_off). */
static void
set_view (Ctx *x, SgNodeId v, SgNodeId of, uint64_t off)
{
  x->e->view_of[v] = of;
  x->e->view_off[v] = off;
  g_array_append_val (x->w->viewed, v);
}

static bool
rolled (const SgElision *e, SgNodeId v)
{
  return e->roll && e->roll[v].group >= 0;
}

/* Where the storage of @v starts: *@owner (a node owning a buffer, or a
 * mode-A pack for relocated members) and the byte offset in it. False
 * with @why when @v is not a contiguous run of one storage. */
static bool
locate (Ctx *x, SgNodeId v, SgNodeId *owner, uint64_t *off, SgCopyReason *why)
{
  const SgGraph *g = x->g;
  *off = 0;
  for (;;) {
    const SgNode *n = &g->nodes[v];
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, v, &k);
    if (rolled (x->e, v) || (n->kind == SG_OP_RANK_ROLL && x->e->view_of[v] >= 0)) {
      *why = SG_COPY_SHARED_INPUT; /* at a rank-dependent block */
      return false;
    }
    if (x->e->view_of[v] >= 0 && sg_elision_candidate (n->kind)) {
      *off += x->e->view_off[v];
      v = x->e->view_of[v];
      continue;
    }
    if (x->e->view_of[v] >= 0) { /* relocated into a mode-A pack */
      *off += x->e->view_off[v];
      *owner = x->e->view_of[v];
      return true;
    }
    if (n->kind == SG_OP_WAIT && k) {
      v = in[0];
      continue;
    }
    if (sg_op_class (n->kind) == SG_CLASS_GETITEM) {
      *why = SG_COPY_TUPLE_INPUT;
      return false;
    }
    if (sg_op_class (n->kind) == SG_CLASS_VIEW) {
      const SgMeta *im = k ? &g->nodes[in[0]].meta : NULL;
      if (!im || n->kind == SG_OP_SLICE || n->kind == SG_OP_SELECT || !meta_contiguous (g, &n->meta)
          || !meta_contiguous (g, im) || sg_meta_numel (g, &n->meta) != sg_meta_numel (g, im)) {
        *why = SG_COPY_STRIDED_INPUT;
        return false;
      }
      v = in[0];
      continue;
    }
    if (n->n_tuple) {
      *why = SG_COPY_TUPLE_INPUT;
      return false;
    }
    if (!meta_contiguous (g, &n->meta)) {
      *why = SG_COPY_STRIDED_INPUT;
      return false;
    }
    *owner = v;
    return true;
  }
}

/* Relocation check of input @in: it must be a whole tensor that nothing
 * else placed yet, written by a collective only when @comm_ok. Sets
 * *root. */
static SgCopyReason
relocatable (Ctx *x, SgNodeId in, bool comm_ok, SgNodeId *root)
{
  const SgGraph *g = x->g;
  SgNodeId owner;
  uint64_t off;
  SgCopyReason why = SG_COPY_ELIDED;
  if (!locate (x, in, &owner, &off, &why))
    return why;
  const SgNode *o = &g->nodes[owner];
  bool group = sg_elision_candidate (o->kind) && x->e->reason[owner] == SG_COPY_ELIDED;
  if (x->e->view_of[owner] >= 0 || group || off != 0
      || sg_meta_bytes (g, &g->nodes[in].meta) != sg_node_alloc_bytes (g, owner))
    return SG_COPY_SHARED_INPUT;
  if (sg_op_is_collective (o->kind) && !comm_ok)
    return SG_COPY_COMM_WRITTEN;
  bool input = o->op == SG_NODE_PLACEHOLDER || o->op == SG_NODE_GET_ATTR;
  if (!input && x->is_output[owner])
    return SG_COPY_OUTPUT_INPUT;
  *root = owner;
  return SG_COPY_ELIDED;
}

/* Relocates the inputs of concatenation @p into the buffer @owner owns
 * (@p itself, or the rank_roll that reads it): input i at byte @off[i]
 * of it, plus the rank-dependent block @place[i] when @place is given.
 * Every input a whole tensor of its own, all graph inputs or none. */
static SgCopyReason
relocate (Ctx *x, SgNodeId p, SgNodeId owner, const uint64_t *off, const SgRollPlace *place)
{
  const SgGraph *g = x->g;
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, p, &k);
  g_autofree SgNodeId *roots = g_new (SgNodeId, k);
  int32_t n_inputs = 0;
  /* not extended to bucket packs: their plans stay as they were */
  const bool comm_ok = g->nodes[p].kind != SG_OP_BUCKET_PACK;
  for (uint32_t i = 0; i < k; i++) {
    SgCopyReason r = relocatable (x, in[i], comm_ok, &roots[i]);
    if (r != SG_COPY_ELIDED)
      return r;
    for (uint32_t j = 0; j < i; j++)
      if (roots[j] == roots[i])
        return SG_COPY_SHARED_INPUT;
    SgNodeOp op = g->nodes[roots[i]].op;
    n_inputs += op == SG_NODE_PLACEHOLDER || op == SG_NODE_GET_ATTR;
  }
  if (n_inputs != 0 && n_inputs != (int32_t)k)
    return SG_COPY_MIXED_INPUTS;
  x->group_root[owner] = roots[0];
  for (uint32_t i = 0; i < k; i++) {
    set_view (x, roots[i], owner, off[i]);
    if (place)
      x->e->roll[roots[i]] = place[i];
    x->group_root[owner] = MIN (x->group_root[owner], roots[i]);
  }
  return SG_COPY_ELIDED;
}

/* A concatenation of the flattened inputs of @p (a pack that does not
 * interleave, a cat along the rows): a view of the storage its inputs
 * already form, else their relocation into its buffer. */
static SgCopyReason
decide_concat (Ctx *x, SgNodeId p)
{
  const SgGraph *g = x->g;
  const SgNode *n = &g->nodes[p];
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, p, &k);
  size_t esz = sg_dtype_size (n->meta.dtype);
  uint64_t total = 0;
  for (uint32_t i = 0; i < k; i++)
    total += sg_meta_numel (g, &g->nodes[in[i]].meta);
  if (k == 0 || !meta_contiguous (g, &n->meta) || total != sg_meta_numel (g, &n->meta))
    return SG_COPY_SHARED_INPUT; /* an input listed twice */
  /* view: the inputs already lie back to back in one storage */
  SgNodeId owner0 = -1;
  uint64_t off0 = 0, prefix = 0;
  bool view = true;
  SgCopyReason why = SG_COPY_ELIDED;
  for (uint32_t i = 0; i < k && view; i++) {
    SgNodeId owner;
    uint64_t off;
    view = locate (x, in[i], &owner, &off, &why) && (i == 0 || owner == owner0)
           && (i == 0 || off == off0 + prefix * esz);
    if (i == 0)
      owner0 = owner, off0 = off;
    prefix += sg_meta_numel (g, &g->nodes[in[i]].meta);
  }
  if (view) {
    set_view (x, p, in[0], 0);
    return SG_COPY_ELIDED;
  }
  g_autofree uint64_t *off = g_new (uint64_t, k);
  prefix = 0;
  for (uint32_t i = 0; i < k; i++) {
    off[i] = prefix * esz;
    prefix += sg_meta_numel (g, &g->nodes[in[i]].meta);
  }
  return relocate (x, p, p, off, NULL);
}

static SgCopyReason
decide_pack (Ctx *x, SgNodeId p)
{
  const SgGraph *g = x->g;
  SgNodeId c = x->reader[p];
  if (c < 0 || !sg_op_is_collective (g->nodes[c].kind))
    return SG_COPY_NO_COLLECTIVE;
  if (g->nodes[c].kind == SG_OP_REDUCE_SCATTER && g->nodes[c].group_size > 1)
    return SG_COPY_INTERLEAVED;
  return decide_concat (x, p);
}

/* Cat @c along its rows: its dim has only dims of size 1 before it. */
static bool
cat_rows (const SgGraph *g, SgNodeId c)
{
  const SgMeta *m = &g->nodes[c].meta;
  const SgArg *a = sg_node_param (g, c, SG_PARAM_DIM);
  int64_t dim = 0;
  if ((a && !sg_arg_is_none (a) && !sg_arg_int (a, &dim)) || m->ndim < 1)
    return false;
  if (dim < 0)
    dim += m->ndim;
  if (dim < 0 || dim >= m->ndim)
    return false;
  for (int64_t d = 0; d < dim; d++)
    if (sg_meta_shape (g, m)[d] != 1)
      return false;
  return true;
}

/* Cat @c whose only user is a rank_roll of it, one row block per rank:
 * its inputs relocated into the rank_roll's buffer, input t at block
 * (t - shift - sign r) mod k (the roll's block b is the cat's block
 * b + shift + sign r). *@why: the reason when not. */
static bool
roll_of_cat (Ctx *x, SgNodeId c, SgCopyReason *why)
{
  const SgGraph *g = x->g;
  const SgNodeId r = x->reader[c];
  SgRankRoll rr;
  if (r < 0 || g->nodes[r].kind != SG_OP_RANK_ROLL || !sg_node_rank_roll (g, r, &rr, NULL)
      || !meta_contiguous (g, &g->nodes[r].meta))
    return false;
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, c, &k);
  const int32_t n = g->groups[rr.group].n_ranks;
  const uint64_t numel = sg_meta_numel (g, &g->nodes[c].meta);
  const uint64_t bytes = sg_meta_bytes (g, &g->nodes[c].meta);
  if ((int32_t)k != n || numel % (uint64_t)n != 0)
    return false;
  for (uint32_t t = 0; t < k; t++)
    if (sg_meta_numel (g, &g->nodes[in[t]].meta) != numel / (uint64_t)n)
      return false; /* listed twice, or unequal blocks */
  g_autofree uint64_t *off = g_new0 (uint64_t, k);
  g_autofree SgRollPlace *place = g_new (SgRollPlace, k);
  for (uint32_t t = 0; t < k; t++)
    place[t] = (SgRollPlace){ rr.group, (int32_t)-rr.sign, (int64_t)t - rr.shift,
                              bytes / (uint64_t)n };
  *why = relocate (x, c, r, off, place);
  if (*why != SG_COPY_ELIDED)
    return false;
  x->e->reason[r] = SG_COPY_ELIDED;
  set_view (x, c, r, 0);
  x->e->roll[c] = (SgRollPlace){ rr.group, 1, 0, 0 }; /* no storage of its own */
  x->group_root[c] = x->group_root[r];
  return true;
}

static SgCopyReason
decide_cat (Ctx *x, SgNodeId c)
{
  SgCopyReason why = SG_COPY_ROLL_USERS;
  if (!cat_rows (x->g, c))
    return SG_COPY_CAT_DIM;
  if (x->e->roll && roll_of_cat (x, c, &why))
    return SG_COPY_ELIDED;
  if (x->reader[c] >= 0 && x->g->nodes[x->reader[c]].kind == SG_OP_RANK_ROLL)
    x->roll_why[x->reader[c]] = (uint8_t)why;
  return decide_concat (x, c);
}

/* A rank_roll read only by one-row-block slices: each slice a view of the
 * roll's input at block (t + shift + sign r) mod k (placed by the final
 * pass of elision()). */
static SgCopyReason
decide_roll (Ctx *x, SgNodeId r)
{
  const SgGraph *g = x->g;
  if (x->group_root[r] >= 0)
    return SG_COPY_ELIDED; /* the owner of its cat's relocated inputs */
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, r, &k);
  if (x->reader[r] != -1 || k != 1)
    return x->roll_why[r] != 0xff ? (SgCopyReason)x->roll_why[r] : SG_COPY_ROLL_USERS;
  if (!meta_contiguous (g, &g->nodes[in[0]].meta) || g->nodes[in[0]].n_tuple)
    return SG_COPY_STRIDED_INPUT;
  /* the input's value is one dense run (its meta); it must not be at a
   * rank-dependent place itself */
  for (SgNodeId v = in[0];;) {
    uint32_t nv;
    const SgNodeId *vin = sg_node_inputs (g, v, &nv);
    if (rolled (x->e, v) || (g->nodes[v].kind == SG_OP_RANK_ROLL && x->e->view_of[v] >= 0))
      return SG_COPY_SHARED_INPUT;
    if (!nv || !sg_op_is_alias (g->nodes[v].kind))
      break;
    v = vin[0];
  }
  set_view (x, r, in[0], 0);
  return SG_COPY_ELIDED;
}

/* Row block of rank_roll @r that slice @u reads, or -1: a slice along
 * dim 0, step 1, of exactly one of the k row blocks, as contiguous as the
 * roll. */
static int32_t
slice_block (const SgGraph *g, SgNodeId u, SgNodeId r)
{
  const SgNode *n = &g->nodes[u];
  SgRankRoll rr;
  if (n->kind != SG_OP_SLICE || !sg_node_rank_roll (g, r, &rr, NULL)
      || !meta_contiguous (g, &n->meta) || !meta_contiguous (g, &g->nodes[r].meta))
    return -1;
  int64_t dim = 0, start = 0, end = 0, step = 1;
  const SgArg *a[4] = { sg_node_param (g, u, SG_PARAM_DIM), sg_node_param (g, u, SG_PARAM_START),
                        sg_node_param (g, u, SG_PARAM_END), sg_node_param (g, u, SG_PARAM_STEP) };
  int64_t *v[4] = { &dim, &start, &end, &step };
  for (int i = 0; i < 4; i++)
    if (!a[i] || sg_arg_is_none (a[i]) ? i == 1 || i == 2 : !sg_arg_int (a[i], v[i]))
      return -1;
  const int64_t rows = sg_meta_shape (g, &g->nodes[r].meta)[0];
  const int64_t kk = g->groups[rr.group].n_ranks, mb = rows / kk;
  if (dim != 0 || step != 1 || mb <= 0 || start < 0 || start % mb != 0 || end != start + mb
      || sg_meta_shape (g, &n->meta)[0] != mb)
    return -1;
  return (int32_t)(start / mb);
}

static SgCopyReason
decide_unpack (Ctx *x, SgNodeId u)
{
  const SgGraph *g = x->g;
  const SgNode *n = &g->nodes[u];
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, u, &k);
  if (k != 1)
    return SG_COPY_STRIDED_INPUT;
  SgNodeId w = in[0];
  uint64_t numel = sg_meta_numel (g, &n->meta);
  int64_t ku, off;
  if (!unpack_args (g, u, &ku, &off))
    return SG_COPY_STRIDED_INPUT;
  if (ku > 1)
    return SG_COPY_RANK_MAJOR;
  const SgMeta *wm = &g->nodes[w].meta;
  if (wm->ndim != 1 || !meta_contiguous (g, wm) || !meta_contiguous (g, &n->meta) || off < 0
      || (uint64_t)off + numel > sg_meta_numel (g, wm))
    return SG_COPY_STRIDED_INPUT;
  set_view (x, u, w, (uint64_t)off * sg_dtype_size (wm->dtype));
  return SG_COPY_ELIDED;
}

/* Range @r of find_readers' pass over every node: the range's copies
 * with their entries reset, the other nodes' reader entries (struct
 * SgElisionWork), the collectives that read a pack. */
static void
scan_task (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  Ctx *x = data;
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
  for (SgNodeId v = a; v < b; v++) {
    const SgNode *nd = &nodes[v];
    const SgOpKind kind = nd->kind;
    const uint8_t f = x->kf[kind];
    if (!(f & K_COPY))
      x->reader[v] = (f & K_ALIAS) && nd->n_in ? -4 - inputs[nd->in_first] : NOT_COPY;
    if (!(f & (K_COPY | K_COLL)))
      continue;
    if (f & K_COPY) {
      g_array_append_val (copies, v);
      x->reader[v] = x->group_root[v] = -1;
    }
    rg->cats = rg->cats || kind == SG_OP_CAT || kind == SG_OP_RANK_ROLL;
    rg->rolls = rg->rolls || kind == SG_OP_RANK_ROLL;
    if ((f & K_COLL) && nd->n_in > 0 && nodes[inputs[nd->in_first]].kind == SG_OP_BUCKET_PACK) {
      const SgNodeId pair[2] = { inputs[nd->in_first], v };
      g_array_append_vals (rg->pairs, pair, 2);
    }
  }
}

/* The copies, and the readers the decisions need, from one pass over
 * every node's inputs (in ranges on the pool, combined in range order):
 * the collective of each pack, the only user of each cat, whether every
 * user of a rank_roll is a one-block row slice (and which block). A
 * pack's reader reads it after its place in the id order, where its
 * entry is reset (in its range's task, before the readers are counted
 * here in id order). */
static void
find_readers (Ctx *x, GArray *copies)
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
      else if (ik == SG_OP_RANK_ROLL && (x->block[v] = slice_block (g, v, in[j])) < 0)
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
 * or (@on false) unmarks them. */
static void
mark_output (Ctx *x, bool on)
{
  const SgGraph *g = x->g;
  GArray *marked = x->w->outputs;
  if (on && g->output != SG_NO_NODE) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, g->output, &k);
    g_array_set_size (marked, k);
    for (uint32_t j = 0; j < k; j++)
      g_array_index (marked, SgNodeId, j) = sg_node_storage_root (g, in[j]);
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
  Ctx *x = data;
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
    SgNodeId p = -1; /* resolves to root[p] */
    SgNodeId rv = v;
    if (m <= NOT_COPY && view_of[v] >= 0) /* relocated */
      rv = group_root[view_of[v]];
    else if (m < NOT_COPY)
      p = -4 - m;
    else if (m > NOT_COPY && e->reason[v] == SG_COPY_ELIDED) {
      if (view_of[v] >= 0 && view_of[v] < v)
        p = view_of[v];
      else
        rv = group_root[v];
    } else if (m > NOT_COPY && (x->kf[x->g->nodes[v].kind] & K_ALIAS) && x->g->nodes[v].n_in) {
      uint32_t k;
      p = sg_node_inputs (x->g, v, &k)[0];
    }
    if (p >= a)
      rv = root[p]; /* may be one left for later */
    else if (p >= 0)
      rv = -2 - p;
    root[v] = rv;
    if (rv <= -2)
      g_array_append_val (late, v);
  }
}

/* The storage roots into e->root, in ranges on the pool; then, in range
 * order (a node's root is final once the ranges before its own are), the
 * nodes that resolve to one before their range. */
static void
find_roots (Ctx *x)
{
  SgNodeId *root = x->e->root;
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
  Ctx x = { .g = g, .e = e, .w = w, .reader = w->reader, .group_root = w->group_root,
            .is_output = w->is_output, .n_ranges = ranges_for (w, n) };
  kind_flags (x.kf);
  GArray *copies = w->copies;
  find_readers (&x, copies);
  mark_output (&x, true);
  for (guint i = 0; i < copies->len; i++) {
    SgNodeId v = g_array_index (copies, SgNodeId, i);
    SgCopyReason r;
    switch (g->nodes[v].kind) {
    case SG_OP_BUCKET_PACK: r = decide_pack (&x, v); break;
    case SG_OP_BUCKET_UNPACK: r = decide_unpack (&x, v); break;
    case SG_OP_CAT: r = decide_cat (&x, v); break;
    default: r = decide_roll (&x, v); break;
    }
    e->reason[v] = (uint8_t)r;
    e->n_elided += r == SG_COPY_ELIDED;
  }
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
elision_once (const SgGraph *g, SgElision *e, bool roots)
{
  memset (e, 0, sizeof *e);
  SgElisionWork w = { 0 };
  elision (g, e, &w, roots);
  work_free (&w);
}

void
sg_graph_elision (const SgGraph *g, SgElision *e)
{
  g_return_if_fail (g && e);
  elision_once (g, e, true);
}

void
sg_graph_elision_reasons (const SgGraph *g, SgElision *e)
{
  g_return_if_fail (g && e);
  elision_once (g, e, false);
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
  const uint64_t *node_alloc;
  uint64_t *alloc;
  int32_t n_ranges;
} Storage;

/* Range @r of sg_elision_storage_bytes: its entries of @alloc cleared,
 * then every node's bytes added to its root's entry, which is in the
 * range or listed (spill) for the caller. */
static void
storage_task (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  const Storage *s = data;
  const SgNodeId *root = s->e->root;
  const uint64_t *node_alloc = s->node_alloc;
  uint64_t *alloc = s->alloc;
  GArray *spill = s->e->work->rg[r].spill;
  g_array_set_size (spill, 0);
  int32_t a, b;
  range_bounds (r, s->n_ranges, s->g->n_nodes, &a, &b);
  memset (alloc + a, 0, sizeof *alloc * (size_t)(b - a));
  for (SgNodeId i = a; i < b; i++) {
    const SgNodeId ri = root[i];
    if (ri >= a && ri < b) {
      alloc[ri] += node_alloc[i];
    } else {
      const Late l = { ri, node_alloc[i] };
      g_array_append_vals (spill, &l, 1);
    }
  }
}

/* With e's working memory (sg_graph_elision_again) and @node_alloc: the
 * sums over every node in ranges on e's pool, without reading the nodes,
 * less the elided copies' bytes after (unsigned sums modulo 2^64: the
 * same as leaving them out). */
static void
storage_bytes_ranges (const SgGraph *g, const SgElision *e, const uint64_t *node_alloc,
                      uint64_t *alloc)
{
  SgElisionWork *w = e->work;
  Storage s = { g, e, node_alloc, alloc, ranges_for (w, g->n_nodes) };
  sg_pool_run (w->pool, s.n_ranges, storage_task, &s);
  for (int32_t r = 0; r < s.n_ranges; r++) {
    const GArray *spill = w->rg[r].spill;
    for (guint i = 0; i < spill->len; i++)
      alloc[g_array_index (spill, Late, i).root] += g_array_index (spill, Late, i).bytes;
  }
  for (guint i = 0; i < w->copies->len; i++) {
    const SgNodeId c = g_array_index (w->copies, SgNodeId, i);
    if (e->reason[c] == SG_COPY_ELIDED)
      alloc[e->root[c]] -= node_alloc[c];
  }
}

uint64_t *
sg_elision_storage_bytes (const SgGraph *g, const SgElision *e, const uint64_t *node_alloc,
                          uint64_t *out)
{
  size_t n = (size_t)MAX (g->n_nodes, 1);
  uint64_t *alloc = out ? out : g_new (uint64_t, n);
  if (node_alloc && e->work && e->work->copies && e->root && g->n_nodes > 0) {
    storage_bytes_ranges (g, e, node_alloc, alloc);
    return alloc;
  }
  memset (alloc, 0, sizeof *alloc * n);
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    if (!sg_elision_elided (g, e, i))
      alloc[e->root[i]] += node_alloc ? node_alloc[i] : sg_node_alloc_bytes (g, i);
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

bool
sg_elision_relocated (const SgGraph *g, const SgElision *e, SgNodeId v)
{
  return e->view_of[v] >= 0 && !sg_elision_candidate (g->nodes[v].kind);
}

bool
sg_elision_rolled (const SgElision *e, SgNodeId v)
{
  return rolled (e, v);
}

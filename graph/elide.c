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
 * Here the decisions, copy by copy in id order (sg_elision_decide: a
 * decision reads the placements of the copies before it); elide-passes.c
 * makes the analysis around them (the passes over every node, in ranges
 * on a pool, the storage roots and their sizes).
 * Mirrors: buffer assignment with aliasing in XLA (a "bitcast" is free,
 * an operand may share its user's buffer, dynamic-update-slice in place)
 * and TFLite's arena planner.
 * Requires: a topological id order. Invalidates: nothing.
 */
#include "graph.h"
#include "graph-private.h"

#include <string.h>

/* Inputs of a copy whose per-input scratch lives on the stack. */
#define SMALL 32
/* How many copies ahead sg_elision_decide asks for a copy's node. */
#define PREFETCH_AHEAD 8

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

/* @v a view of @of at byte @off (e->view_of, e->view_off). */
static void
set_view (SgElisionCtx *x, SgNodeId v, SgNodeId of, uint64_t off)
{
  x->e->view_of[v] = of;
  x->e->view_off[v] = off;
  g_array_append_val (x->viewed, v);
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
locate (SgElisionCtx *x, SgNodeId v, SgNodeId *owner, uint64_t *off, SgCopyReason *why)
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
relocatable (SgElisionCtx *x, SgNodeId in, bool comm_ok, SgNodeId *root)
{
  const SgGraph *g = x->g;
  SgNodeId owner;
  uint64_t off;
  SgCopyReason why = SG_COPY_ELIDED;
  if (!locate (x, in, &owner, &off, &why))
    return why;
  const SgNode *o = &g->nodes[owner];
  bool group = sg_elision_candidate (o->kind) && x->e->reason[owner] == SG_COPY_ELIDED;
  /* an input that owns its storage itself (neither an alias nor the
   * output, no tuple) allocates its meta's bytes: the whole of it */
  const bool whole = owner == in && !o->n_tuple && !sg_op_is_alias (o->kind)
                     && o->kind != SG_OP_OUTPUT;
  if (x->e->view_of[owner] >= 0 || group || off != 0
      || (!whole && sg_meta_bytes (g, &g->nodes[in].meta) != sg_node_alloc_bytes (g, owner)))
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
relocate (SgElisionCtx *x, SgNodeId p, SgNodeId owner, const uint64_t *off,
          const SgRollPlace *place)
{
  const SgGraph *g = x->g;
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, p, &k);
  SgNodeId roots_here[SMALL] = { SG_NO_NODE }; /* (k > 0: every entry written first) */
  g_autofree SgNodeId *roots_big = k > SMALL ? g_new (SgNodeId, k) : NULL;
  SgNodeId *roots = roots_big ? roots_big : roots_here;
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
decide_concat (SgElisionCtx *x, SgNodeId p)
{
  const SgGraph *g = x->g;
  const SgNode *n = &g->nodes[p];
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, p, &k);
  size_t esz = sg_dtype_size (n->meta.dtype);
  /* per input its element count, then (relocation) its byte offset */
  uint64_t at_here[SMALL];
  g_autofree uint64_t *at_big = k > SMALL ? g_new (uint64_t, k) : NULL;
  uint64_t *at = at_big ? at_big : at_here;
  uint64_t total = 0;
  for (uint32_t i = 0; i < k; i++)
    total += at[i] = sg_meta_numel (g, &g->nodes[in[i]].meta);
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
    prefix += at[i];
  }
  if (view) {
    set_view (x, p, in[0], 0);
    return SG_COPY_ELIDED;
  }
  prefix = 0;
  for (uint32_t i = 0; i < k; i++) {
    const uint64_t numel = at[i];
    at[i] = prefix * esz;
    prefix += numel;
  }
  return relocate (x, p, p, at, NULL);
}

static SgCopyReason
decide_pack (SgElisionCtx *x, SgNodeId p)
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
roll_of_cat (SgElisionCtx *x, SgNodeId c, SgCopyReason *why)
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
decide_cat (SgElisionCtx *x, SgNodeId c)
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
decide_roll (SgElisionCtx *x, SgNodeId r)
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
int32_t
sg_elision_slice_block (const SgGraph *g, SgNodeId u, SgNodeId r)
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
decide_unpack (SgElisionCtx *x, SgNodeId u)
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

void
sg_elision_decide (SgElisionCtx *x, const GArray *copies)
{
  SgElision *e = x->e;
  const SgNodeId *ids = (const SgNodeId *)(void *)copies->data;
  for (guint i = 0; i < copies->len; i++) {
    const SgNodeId v = ids[i];
    /* the copies of a large graph lie far apart: their nodes asked for
     * ahead, each decision's reads overlap the misses of the next ones */
    if (i + PREFETCH_AHEAD < copies->len)
      __builtin_prefetch (&x->g->nodes[ids[i + PREFETCH_AHEAD]]);
    SgCopyReason r;
    switch (x->g->nodes[v].kind) {
    case SG_OP_BUCKET_PACK: r = decide_pack (x, v); break;
    case SG_OP_BUCKET_UNPACK: r = decide_unpack (x, v); break;
    case SG_OP_CAT: r = decide_cat (x, v); break;
    default: r = decide_roll (x, v); break;
    }
    e->reason[v] = (uint8_t)r;
    e->n_elided += r == SG_COPY_ELIDED;
  }
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

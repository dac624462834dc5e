/* elide.c: which bucket copies lower to views (zero-copy buckets).
 *
 * bucket/ rewrites a bucket as pack -> collective -> wait -> unpacks
 * (docs/ops.md). Where the layout allows, codegen emits no kernel for the
 * pack or an unpack and places the tensors so that the copy would have
 * been the identity:
 *  - pack, relocation: the members' inputs are written by their producers
 *    (or seeded, for graph inputs) straight into the bucket's input buffer,
 *    input i at the concatenation offset of the members before it;
 *  - pack, view: the inputs already lie back to back in one storage in
 *    member order (e.g. the unpacks of an earlier bucket of the same
 *    members), so the bucket input is a view of it;
 *  - unpack: with k = 1 (reduce_scatter, all_reduce) a member is a
 *    contiguous slice of the bucket's result, so it is a view of it.
 * What stays a copy, and why (SgCopyReason): an all_gather result is
 * rank-major (a member's rows are strided over the ranks' segments); a
 * reduce_scatter input interleaves chunk r of every member in rank r's
 * segment; a member input that is not a whole contiguous tensor, that is
 * already placed elsewhere in another layout, that is a graph output (the
 * bucket buffer would live to the end), that is written by a collective
 * or is a tuple element; graph inputs mixed with computed members.
 *
 * This is the one rule: the cost model prices elided nodes at zero, the
 * liveness rule (liveness.c) uses the storage roots below, codegen places
 * the buffers by it, the bucket report and the plan say why a copy stays.
 * Offsets and k come from the unpack's args (trial graphs of bucket/ have
 * them too: they are the rewrite's own layout).
 * Mirrors: buffer assignment with aliasing in XLA (a "bitcast" is free,
 * an operand may share its user's buffer) and TFLite's arena planner.
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

typedef struct {
  const SgGraph *g;
  SgElision *e;
  SgNodeId *reader;    /* per pack: its only reader, or -1 (none), -2 (several) */
  bool *is_output;     /* per storage root: read by the output node */
  SgNodeId *group_root; /* per mode-A pack: the lowest-id member root */
} Ctx;

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
    if (x->e->view_of[v] >= 0 && (n->kind == SG_OP_BUCKET_PACK || n->kind == SG_OP_BUCKET_UNPACK)) {
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

/* Mode-A check of input @in: it must be a whole tensor that nothing else
 * placed yet. Sets *root. */
static SgCopyReason
relocatable (Ctx *x, SgNodeId in, SgNodeId *root)
{
  const SgGraph *g = x->g;
  SgNodeId owner;
  uint64_t off;
  SgCopyReason why = SG_COPY_ELIDED;
  if (!locate (x, in, &owner, &off, &why))
    return why;
  const SgNode *o = &g->nodes[owner];
  bool group = o->kind == SG_OP_BUCKET_PACK && x->e->reason[owner] == SG_COPY_ELIDED;
  if (x->e->view_of[owner] >= 0 || group || off != 0
      || sg_meta_bytes (g, &g->nodes[in].meta) != sg_node_alloc_bytes (g, owner))
    return SG_COPY_SHARED_INPUT;
  if (sg_op_is_collective (o->kind))
    return SG_COPY_COMM_WRITTEN;
  bool input = o->op == SG_NODE_PLACEHOLDER || o->op == SG_NODE_GET_ATTR;
  if (!input && x->is_output[owner])
    return SG_COPY_OUTPUT_INPUT;
  *root = owner;
  return SG_COPY_ELIDED;
}

static SgCopyReason
decide_pack (Ctx *x, SgNodeId p)
{
  const SgGraph *g = x->g;
  const SgNode *n = &g->nodes[p];
  SgNodeId c = x->reader[p];
  if (c < 0 || !sg_op_is_collective (g->nodes[c].kind))
    return SG_COPY_NO_COLLECTIVE;
  if (g->nodes[c].kind == SG_OP_REDUCE_SCATTER && g->nodes[c].group_size > 1)
    return SG_COPY_INTERLEAVED;
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
    x->e->view_of[p] = in[0];
    x->e->view_off[p] = 0;
    return SG_COPY_ELIDED;
  }
  /* relocation: every input a whole tensor of its own, all graph inputs or none */
  g_autofree SgNodeId *roots = g_new (SgNodeId, k);
  int32_t n_inputs = 0;
  for (uint32_t i = 0; i < k; i++) {
    SgCopyReason r = relocatable (x, in[i], &roots[i]);
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
  prefix = 0;
  x->group_root[p] = roots[0];
  for (uint32_t i = 0; i < k; i++) {
    x->e->view_of[roots[i]] = p;
    x->e->view_off[roots[i]] = prefix * esz;
    prefix += sg_meta_numel (g, &g->nodes[in[i]].meta);
    x->group_root[p] = MIN (x->group_root[p], roots[i]);
  }
  return SG_COPY_ELIDED;
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
  x->e->view_of[u] = w;
  x->e->view_off[u] = (uint64_t)off * sg_dtype_size (wm->dtype);
  return SG_COPY_ELIDED;
}

static bool
is_copy (SgOpKind k)
{
  return k == SG_OP_BUCKET_PACK || k == SG_OP_BUCKET_UNPACK;
}

/* The analysis; @roots false leaves e->root NULL (what the cost model
 * needs is the reasons). One pass over the nodes and their inputs, the
 * decisions over the copies only, one more pass for the roots. */
static void
elision (const SgGraph *g, SgElision *e, bool roots)
{
  int32_t n = g->n_nodes;
  size_t nn = (size_t)MAX (n, 1);
  memset (e, 0, sizeof *e);
  e->reason = g_new0 (uint8_t, nn);
  e->view_of = g_new (SgNodeId, nn);
  e->view_off = g_new0 (uint64_t, nn);
  Ctx x = { .g = g, .e = e };
  x.reader = g_new (SgNodeId, nn);
  x.is_output = g_new0 (bool, nn);
  x.group_root = g_new (SgNodeId, nn);
  memset (e->view_of, 0xff, nn * sizeof (SgNodeId)); /* -1 */
  memset (x.reader, 0xff, nn * sizeof (SgNodeId));
  memset (x.group_root, 0xff, nn * sizeof (SgNodeId));
  /* the copies, and the collective that reads each pack (a pack read by
   * anything else is a view all the same: its layout is what counts) */
  g_autoptr (GArray) copies = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  for (SgNodeId v = 0; v < n; v++) {
    SgOpKind kind = g->nodes[v].kind;
    if (is_copy (kind))
      g_array_append_val (copies, v);
    else if (sg_op_is_collective (kind) && !sg_op_is_coalesced (kind) && g->nodes[v].n_in > 0) {
      uint32_t k;
      SgNodeId in = sg_node_inputs (g, v, &k)[0];
      if (g->nodes[in].kind == SG_OP_BUCKET_PACK)
        x.reader[in] = x.reader[in] == -1 ? v : -2;
    }
  }
  if (g->output != SG_NO_NODE) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, g->output, &k);
    for (uint32_t j = 0; j < k; j++)
      x.is_output[sg_node_storage_root (g, in[j])] = true;
  }
  for (guint i = 0; i < copies->len; i++) {
    SgNodeId v = g_array_index (copies, SgNodeId, i);
    SgCopyReason r = g->nodes[v].kind == SG_OP_BUCKET_PACK ? decide_pack (&x, v)
                                                           : decide_unpack (&x, v);
    e->reason[v] = (uint8_t)r;
    e->n_elided += r == SG_COPY_ELIDED;
  }
  /* Storage roots with elision (liveness.c), one pass in id order: what
   * a node resolves to always has a lower id (a relocation's group root is
   * its lowest-id member, whose root is itself). */
  if (roots)
    e->root = g_new (SgNodeId, nn);
  for (SgNodeId v = 0; roots && v < n; v++) {
    const SgNode *nd = &g->nodes[v];
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, v, &k);
    bool elided = is_copy (nd->kind) && e->reason[v] == SG_COPY_ELIDED;
    SgNodeId r = v;
    if (e->view_of[v] >= 0 && !is_copy (nd->kind)) /* relocated */
      r = x.group_root[e->view_of[v]];
    else if (elided)
      r = e->view_of[v] >= 0 ? e->root[e->view_of[v]] : x.group_root[v];
    else if (k && sg_op_is_alias (nd->kind))
      r = e->root[in[0]];
    e->root[v] = r;
  }
  g_free (x.reader);
  g_free (x.is_output);
  g_free (x.group_root);
}

void
sg_graph_elision (const SgGraph *g, SgElision *e)
{
  g_return_if_fail (g && e);
  elision (g, e, true);
}

void
sg_graph_elision_reasons (const SgGraph *g, SgElision *e)
{
  g_return_if_fail (g && e);
  elision (g, e, false);
}

void
sg_elision_clear (SgElision *e)
{
  if (!e)
    return;
  g_free (e->reason);
  g_free (e->view_of);
  g_free (e->view_off);
  g_free (e->root);
  memset (e, 0, sizeof *e);
}

bool
sg_elision_relocated (const SgGraph *g, const SgElision *e, SgNodeId v)
{
  return e->view_of[v] >= 0 && !is_copy (g->nodes[v].kind);
}

/* lower.c: step 1 of the lowering, the values and buffers of every node
 * (sg_lower_values, codegen-private.h).
 *
 * Mirrors: Inductor's wrapper codegen (buffers, reuse, frees).
 * Requires: graph ids in program order (schedule/ and bucket/ done).
 * Invalidates: nothing (the graph is read only).
 *
 * Values and buffers in id order: placeholders own whole-step buffers;
 * compute nodes and collectives own one buffer per tensor (per tuple
 * element); views are new values on their base's buffer at an offset (0
 * for view-like ops, computed for slice/select); getitem IS the tuple
 * element's value and wait_tensor IS its collective's value (no new
 * value). Zero-copy buckets (graph/elide.c): an elided bucket_unpack is a
 * view of the bucket's result, an elided bucket_pack a view of the storage
 * its inputs already form or the owner of one buffer into which its inputs
 * are written at their concatenation offsets (graph inputs: a whole-step
 * buffer holding several input values); neither emits a kernel. A pack or
 * unpack that stays a kernel names why in its kwargs ("schedgraph_copy",
 * emit.c). The steps after: (2) instructions (emit.c), (3) lifetimes and
 * FREEs (codegen.c), (4) offsets (memplan.c).
 */
#include "codegen-private.h"

#include <string.h>

bool
sg_lower_fail (SgLower *l, SgNodeId id, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (l->error, SG_CODEGEN_ERROR, SG_CODEGEN_ERROR_GRAPH, "%s: node \"%s\": %s",
               l->g->source ? l->g->source : "graph", l->g->nodes[id].name, msg);
  return false;
}

/* Bytes a tensor of @m occupies: its elements, or further when strided. */
static uint64_t
meta_storage_bytes (const SgGraph *g, const SgMeta *m)
{
  uint64_t numel = sg_meta_numel (g, m), esz = sg_dtype_size (m->dtype);
  if (numel == 0)
    return 0;
  const int64_t *sh = sg_meta_shape (g, m), *st = sg_meta_stride (g, m);
  uint64_t last = 0;
  for (int32_t d = 0; d < m->ndim; d++)
    last += (uint64_t)(sh[d] - 1) * (uint64_t)(st[d] > 0 ? st[d] : 0);
  return MAX (numel, last + 1) * esz;
}

static int32_t
new_buffer (SgLower *l, uint64_t bytes, bool pinned)
{
  if (l->n_buffers >= l->cap_buffers) {
    int32_t cap = l->cap_buffers;
    SG_LOWER_GROW (l->buffers, l->n_buffers, l->cap_buffers);
    SG_LOWER_GROW (l->pinned, l->n_buffers, cap);
  }
  l->buffers[l->n_buffers] = (SgPlanBuffer){ 0, bytes, -1, -1 };
  l->pinned[l->n_buffers] = pinned;
  return l->n_buffers++;
}

static int32_t
new_value (SgLower *l, const char *name, const SgMeta *m, int32_t buffer, uint64_t offset,
           SgValueInit init)
{
  SgPlanValue v = { 0 };
  v.name = sg_plan_str (l->plan, name, false);
  v.buffer = buffer;
  v.offset = offset;
  v.dtype = m->dtype;
  sg_plan_value_set_dims (l->plan, &v, m->ndim, sg_meta_shape (l->g, m),
                          sg_meta_stride (l->g, m));
  v.init = init;
  SG_LOWER_GROW (l->values, l->n_values, l->cap_values);
  l->values[l->n_values] = v;
  return l->n_values++;
}

/* A value with its own, fresh buffer. */
static int32_t
owned_value (SgLower *l, const char *name, const SgMeta *m, SgValueInit init)
{
  if (m->ndim < 0 || m->dtype == SG_DTYPE_INVALID)
    return -1;
  int32_t b = new_buffer (l, meta_storage_bytes (l->g, m), init == SG_INIT_INPUT);
  return new_value (l, name, m, b, 0, init);
}

/* Integer parameter @p of node @id (graph/ops.c has the positions), @dflt
 * when absent or None. False for another type. */
static bool
int_param (const SgGraph *g, SgNodeId id, SgParam p, int64_t dflt, int64_t *out)
{
  const SgArg *a = sg_node_param (g, id, p);
  double f;
  if (sg_arg_is_none (a)) {
    *out = dflt;
    return true;
  }
  if (sg_arg_int (a, out))
    return true;
  /* An integral float beyond int64 (an open slice end) saturates. */
  if (!sg_arg_float (a, &f) || f != floor (f))
    return false;
  *out = f > 0 ? INT64_MAX : INT64_MIN;
  return true;
}

/* Byte offset of a slice/select view from its base value. */
static bool
view_delta (SgLower *l, SgNodeId id, const SgPlanValue *base, uint64_t *delta)
{
  const SgNode *n = &l->g->nodes[id];
  *delta = 0;
  if (n->kind != SG_OP_SLICE && n->kind != SG_OP_SELECT)
    return true;
  int64_t dim, start;
  SgParam at = n->kind == SG_OP_SLICE ? SG_PARAM_START : SG_PARAM_INDEX;
  if (!int_param (l->g, id, SG_PARAM_DIM, 0, &dim) || !int_param (l->g, id, at, 0, &start))
    return sg_lower_fail (l, id, "args[1..2]: dim and start/index must be integers");
  if (dim < 0)
    dim += base->ndim;
  if (dim < 0 || dim >= base->ndim)
    return sg_lower_fail (l, id, "args[1]: dim %" G_GINT64_FORMAT " out of range for a %d-d input",
                          dim, base->ndim);
  int64_t size = base->shape[dim];
  if (start < 0)
    start += size;
  if (n->kind == SG_OP_SELECT && (start < 0 || start >= size))
    return sg_lower_fail (l, id, "args[2]: index out of range for size %" G_GINT64_FORMAT, size);
  start = CLAMP (start, 0, size);
  *delta = (uint64_t)start * (uint64_t)base->stride[dim] * sg_dtype_size (base->dtype);
  return true;
}

static bool
copy_elided (const SgLower *l, SgNodeId id)
{
  return sg_elision_elided (l->g, &l->el, id);
}

/* The buffer an elided copy's relocated inputs share (made at the first). */
static int32_t
group_buffer (SgLower *l, SgNodeId owner, bool pinned)
{
  if (l->group_buf[owner] < 0)
    l->group_buf[owner] =
      new_buffer (l, meta_storage_bytes (l->g, &l->g->nodes[owner].meta), pinned);
  return l->group_buf[owner];
}

/* Gives value @v the rank-dependent block of @id (elide.c), if any. */
static void
set_roll (SgLower *l, int32_t v, SgNodeId id)
{
  if (v < 0 || !sg_elision_rolled (&l->el, id))
    return;
  const SgRollPlace *r = &l->el.roll[id];
  SgPlanValue *x = &l->values[v];
  x->roll_group = r->group;
  x->roll_shift = r->shift;
  x->roll_sign = r->sign;
  x->roll_block = r->block;
}

/* Step 1 for the nodes zero-copy copies place: 1 when @id is one, 0 when
 * it is not, -1 when it cannot be placed (@l's error set). */
static int
place_zero_copy (SgLower *l, SgNodeId id)
{
  const SgGraph *g = l->g;
  const SgNode *n = &g->nodes[id];
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, id, &k);
  if (sg_elision_relocated (g, &l->el, id)) {
    bool input = n->op == SG_NODE_PLACEHOLDER || n->op == SG_NODE_GET_ATTR;
    int32_t b = group_buffer (l, l->el.view_of[id], input);
    l->nval[id] = new_value (l, n->name, &n->meta, b, l->el.view_off[id],
                             input ? SG_INIT_INPUT : SG_INIT_NONE);
    set_roll (l, l->nval[id], id);
    return 1;
  }
  if (sg_op_class (n->kind) == SG_CLASS_VIEW && sg_elision_rolled (&l->el, id)) {
    /* a row block of an elided rank_roll: that block of the roll's input */
    const int32_t bv = l->nval[l->el.view_of[in[0]]];
    if (bv < 0) {
      sg_lower_fail (l, id, "the rows of a rank_roll whose input has no storage");
      return -1;
    }
    SgPlanValue base = l->values[bv];
    l->nval[id] = new_value (l, n->name, &n->meta, base.buffer, base.offset, SG_INIT_NONE);
    set_roll (l, l->nval[id], id);
    return 1;
  }
  if (!copy_elided (l, id))
    return 0;
  SgNodeId of = l->el.view_of[id];
  if (sg_elision_rolled (&l->el, id) || (n->kind == SG_OP_RANK_ROLL && of >= 0))
    return 1; /* no value: a cat whose rows lie in its rank_roll's buffer in rank order,
               * a rank_roll whose slices view its input's blocks */
  if (of < 0) { /* a relocation: its inputs came first and made the buffer */
    l->nval[id] = new_value (l, n->name, &n->meta, l->group_buf[id], 0, SG_INIT_NONE);
    return 1;
  }
  /* copy: new_value may grow the array */
  SgPlanValue base = l->values[l->nval[of]];
  l->nval[id] = new_value (l, n->name, &n->meta, base.buffer, base.offset + l->el.view_off[id],
                           SG_INIT_NONE);
  return 1;
}

/* Step 1 for one node. */
static bool
make_values (SgLower *l, SgNodeId id)
{
  const SgGraph *g = l->g;
  const SgNode *n = &g->nodes[id];
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, id, &k);
  l->nval[id] = -1;
  SgOpClass c = sg_op_class (n->kind);
  if (n->op == SG_NODE_OUTPUT)
    return true;
  const int placed = place_zero_copy (l, id);
  if (placed)
    return placed > 0;
  if (n->op == SG_NODE_PLACEHOLDER || n->op == SG_NODE_GET_ATTR || c == SG_CLASS_INPUT) {
    l->nval[id] = owned_value (l, n->name, &n->meta, SG_INIT_INPUT);
    return true;
  }
  if (c == SG_CLASS_GETITEM) {
    SgNodeId base = k ? in[0] : SG_NO_NODE;
    if (base != SG_NO_NODE && g->nodes[base].n_tuple && n->getitem_index >= 0 &&
        (uint32_t)n->getitem_index < g->nodes[base].n_tuple)
      l->nval[id] = l->tval[g->nodes[base].tuple_first + (uint32_t)n->getitem_index];
    else if (base != SG_NO_NODE)
      l->nval[id] = l->nval[base];
    return true;
  }
  if (c == SG_CLASS_WAIT) {
    if (k)
      l->nval[id] = l->nval[in[0]];
    return true;
  }
  if (c == SG_CLASS_VIEW) {
    int32_t bv = k ? l->nval[in[0]] : -1;
    if (bv < 0 || n->meta.ndim < 0)
      return true;
    /* copy: new_value may grow the array */
    SgPlanValue base = l->values[bv];
    uint64_t delta;
    if (!view_delta (l, id, &base, &delta))
      return false;
    if (base.buffer < 0)
      return true;
    l->nval[id] = new_value (l, n->name, &n->meta, base.buffer, base.offset + delta, SG_INIT_NONE);
    SgPlanValue *x = &l->values[l->nval[id]];
    x->roll_group = base.roll_group, x->roll_shift = base.roll_shift;
    x->roll_sign = base.roll_sign, x->roll_block = base.roll_block;
    return true;
  }
  if (n->n_tuple) {
    /* element i is "NAME.i" */
    const size_t len = strlen (n->name);
    char small[128];
    char *nm = len + 12 <= sizeof small ? small : g_malloc (len + 12);
    memcpy (nm, n->name, len);
    nm[len] = '.';
    for (uint32_t i = 0; i < n->n_tuple; i++) {
      char digits[12], *d = digits + sizeof digits;
      *--d = 0;
      uint32_t x = i;
      do
        *--d = (char)('0' + x % 10);
      while (x /= 10);
      memcpy (nm + len + 1, d, (size_t)(digits + sizeof digits - d));
      l->tval[n->tuple_first + i] =
        owned_value (l, nm, sg_node_tuple_meta (g, id, i), SG_INIT_NONE);
    }
    if (nm != small)
      g_free (nm);
    return true;
  }
  l->nval[id] = owned_value (l, n->name, &n->meta, SG_INIT_NONE);
  if (sg_op_is_collective (n->kind) && l->nval[id] < 0)
    return sg_lower_fail (l, id, "meta: a collective must produce a tensor");
  return true;
}

int32_t *
sg_lower_steal_ids (GArray *a, int32_t *n)
{
  *n = (int32_t)a->len;
  return (int32_t *)g_array_free (a, FALSE);
}

bool
sg_lower_values (SgLower *l)
{
  for (SgNodeId id = 0; id < l->g->n_nodes; id++)
    if (!make_values (l, id))
      return false;
  return true;
}

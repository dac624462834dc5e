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
sg_lower_fail (GError **error, const SgGraph *g, SgNodeId id, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, SG_CODEGEN_ERROR, SG_CODEGEN_ERROR_GRAPH, "%s: node \"%s\": %s",
               g->source ? g->source : "graph", g->nodes[id].name, msg);
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

/* The meta of node @node, or of its tuple element @elem (>= 0). */
static const SgMeta *
meta_of (const SgGraph *g, SgNodeId node, int32_t elem)
{
  return elem >= 0 ? sg_node_tuple_meta (g, node, (uint32_t)elem) : &g->nodes[node].meta;
}

/* A buffer sized by the meta of @node (@elem) once the layout is done. */
static int32_t
new_buffer (SgLower *l, SgNodeId node, int32_t elem, bool pinned)
{
  if (l->n_buffers >= l->cap_buffers) {
    l->cap_buffers = MAX (16, 2 * l->cap_buffers);
    l->buffers = g_renew (SgPlanBuffer, l->buffers, (size_t)l->cap_buffers);
    l->pinned = g_renew (bool, l->pinned, (size_t)l->cap_buffers);
    l->buf_node = g_renew (int32_t, l->buf_node, (size_t)l->cap_buffers);
    l->buf_elem = g_renew (int32_t, l->buf_elem, (size_t)l->cap_buffers);
  }
  l->buffers[l->n_buffers] = (SgPlanBuffer){ 0, 0, -1, -1 };
  l->pinned[l->n_buffers] = pinned;
  l->buf_node[l->n_buffers] = node;
  l->buf_elem[l->n_buffers] = elem;
  return l->n_buffers++;
}

/* A value of the meta of @node (@elem), named after it: its name and
 * dims are filled once the layout is done (fill_values). */
static int32_t
new_value (SgLower *l, SgNodeId node, int32_t elem, int32_t buffer, uint64_t offset,
           SgValueInit init)
{
  const SgMeta *m = meta_of (l->g, node, elem);
  if (l->n_values >= l->cap_values) {
    l->cap_values = MAX (16, 2 * l->cap_values);
    l->values = g_renew (SgPlanValue, l->values, (size_t)l->cap_values);
    l->val_node = g_renew (int32_t, l->val_node, (size_t)l->cap_values);
    l->val_elem = g_renew (int32_t, l->val_elem, (size_t)l->cap_values);
  }
  SgPlanValue *v = &l->values[l->n_values];
  *v = (SgPlanValue){ 0 };
  v->buffer = buffer;
  v->offset = offset;
  v->dtype = m->dtype;
  v->ndim = m->ndim >= 0 && m->ndim <= SG_PLAN_MAX_DIMS ? m->ndim : 0;
  v->init = init;
  l->val_node[l->n_values] = node;
  l->val_elem[l->n_values] = elem;
  return l->n_values++;
}

/* A value with its own, fresh buffer. */
static int32_t
owned_value (SgLower *l, SgNodeId node, int32_t elem, SgValueInit init)
{
  const SgMeta *m = meta_of (l->g, node, elem);
  if (m->ndim < 0 || m->dtype == SG_DTYPE_INVALID)
    return -1;
  int32_t b = new_buffer (l, node, elem, init == SG_INIT_INPUT);
  return new_value (l, node, elem, b, 0, init);
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

/* Byte offset of a slice/select view from its base value @bv. */
static bool
view_delta (SgLower *l, SgNodeId id, int32_t bv, uint64_t *delta)
{
  const SgPlanValue *base = &l->values[bv];
  const SgMeta *bm = meta_of (l->g, l->val_node[bv], l->val_elem[bv]);
  const SgNode *n = &l->g->nodes[id];
  *delta = 0;
  if (n->kind != SG_OP_SLICE && n->kind != SG_OP_SELECT)
    return true;
  int64_t dim, start;
  SgParam at = n->kind == SG_OP_SLICE ? SG_PARAM_START : SG_PARAM_INDEX;
  if (!int_param (l->g, id, SG_PARAM_DIM, 0, &dim) || !int_param (l->g, id, at, 0, &start))
    return sg_lower_fail (l->error, l->g, id, "args[1..2]: dim and start/index must be integers");
  if (dim < 0)
    dim += base->ndim;
  if (dim < 0 || dim >= base->ndim)
    return sg_lower_fail (l->error, l->g, id,
                          "args[1]: dim %" G_GINT64_FORMAT " out of range for a %d-d input", dim,
                          base->ndim);
  int64_t size = sg_meta_shape (l->g, bm)[dim];
  if (start < 0)
    start += size;
  if (n->kind == SG_OP_SELECT && (start < 0 || start >= size))
    return sg_lower_fail (l->error, l->g, id,
                          "args[2]: index out of range for size %" G_GINT64_FORMAT, size);
  start = CLAMP (start, 0, size);
  *delta = (uint64_t)start * (uint64_t)sg_meta_stride (l->g, bm)[dim] * sg_dtype_size (base->dtype);
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
    l->group_buf[owner] = new_buffer (l, owner, -1, pinned);
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
    l->nval[id] = new_value (l, id, -1, b, l->el.view_off[id], input ? SG_INIT_INPUT : SG_INIT_NONE);
    set_roll (l, l->nval[id], id);
    return 1;
  }
  if (sg_op_class (n->kind) == SG_CLASS_VIEW && sg_elision_rolled (&l->el, id)) {
    /* a row block of an elided rank_roll: that block of the roll's input */
    const int32_t bv = l->nval[l->el.view_of[in[0]]];
    if (bv < 0) {
      sg_lower_fail (l->error, l->g, id,
                     "the rows of a rank_roll whose input has no storage");
      return -1;
    }
    SgPlanValue base = l->values[bv];
    l->nval[id] = new_value (l, id, -1, base.buffer, base.offset, SG_INIT_NONE);
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
    l->nval[id] = new_value (l, id, -1, l->group_buf[id], 0, SG_INIT_NONE);
    return 1;
  }
  /* copy: new_value may grow the array */
  SgPlanValue base = l->values[l->nval[of]];
  l->nval[id] = new_value (l, id, -1, base.buffer, base.offset + l->el.view_off[id],
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
    l->nval[id] = owned_value (l, id, -1, SG_INIT_INPUT);
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
    if (!view_delta (l, id, bv, &delta))
      return false;
    if (base.buffer < 0)
      return true;
    l->nval[id] = new_value (l, id, -1, base.buffer, base.offset + delta, SG_INIT_NONE);
    SgPlanValue *x = &l->values[l->nval[id]];
    x->roll_group = base.roll_group, x->roll_shift = base.roll_shift;
    x->roll_sign = base.roll_sign, x->roll_block = base.roll_block;
    return true;
  }
  if (n->n_tuple) {
    for (uint32_t i = 0; i < n->n_tuple; i++)
      l->tval[n->tuple_first + i] = owned_value (l, id, (int32_t)i, SG_INIT_NONE);
    return true;
  }
  l->nval[id] = owned_value (l, id, -1, SG_INIT_NONE);
  if (sg_op_is_collective (n->kind) && l->nval[id] < 0)
    return sg_lower_fail (l->error, l->g, id, "meta: a collective must produce a tensor");
  return true;
}

int32_t *
sg_lower_steal_ids (GArray *a, int32_t *n)
{
  *n = (int32_t)a->len;
  return (int32_t *)g_array_free (a, FALSE);
}

/* --- names, dims and sizes on the pool ------------------------------------ */

/* Values (and buffers) per task. */
#define CHUNK 2048

typedef struct {
  SgLower *l;
  size_t *name_at, *dims_at; /* per task: where its values' names and dims begin */
  char *names;
  int64_t *dims;
  bool copy;                 /* the second job: copy (the first counts) */
} Fill;

/* Writes the decimal digits of @x ending before @end; returns the first. */
static char *
put_digits (char *end, uint32_t x)
{
  do
    *--end = (char)('0' + x % 10);
  while (x /= 10);
  return end;
}

/* Task t: values [CHUNK t, CHUNK (t + 1)): first the bytes of their names
 * ("NAME", "NAME.i" for tuple element i) and their dims; then, at
 * name_at[t] and dims_at[t], the names and dims themselves. And the
 * buffers of that range: their sizes. */
static void
fill_task (gpointer ctx, int32_t t, int32_t worker)
{
  (void)worker;
  Fill *f = ctx;
  SgLower *l = f->l;
  const SgGraph *g = l->g;
  size_t name_at = f->copy ? f->name_at[t] : 0, dims_at = f->copy ? f->dims_at[t] : 0;
  int32_t lo, hi;
  sg_range_of (t, CHUNK, l->n_values, &lo, &hi);
  for (int32_t v = lo; v < hi; v++) {
    SgPlanValue *x = &l->values[v];
    const char *name = g->nodes[l->val_node[v]].name;
    const size_t len = strlen (name);
    const int32_t elem = l->val_elem[v];
    char digits[12], *d = digits + sizeof digits;
    if (elem >= 0)
      d = put_digits (d, (uint32_t)elem);
    const size_t more = elem >= 0 ? 1 + (size_t)(digits + sizeof digits - d) : 0;
    if (f->copy) {
      char *at = f->names + name_at;
      memcpy (at, name, len);
      if (elem >= 0) {
        at[len] = '.';
        memcpy (at + len + 1, d, more - 1);
      }
      at[len + more] = 0;
      x->name = at;
      const SgMeta *m = meta_of (g, l->val_node[v], elem);
      if (m->ndim < 0 || m->ndim > SG_PLAN_MAX_DIMS) {
        sg_plan_value_set_dims (l->plan, x, m->ndim, NULL, NULL); /* refused, as before */
      } else {
        x->shape = f->dims + dims_at;
        x->stride = x->shape + m->ndim;
        memcpy (x->shape, sg_meta_shape (g, m), sizeof (int64_t) * (size_t)m->ndim);
        memcpy (x->stride, sg_meta_stride (g, m), sizeof (int64_t) * (size_t)m->ndim);
      }
    }
    name_at += len + more + 1;
    dims_at += 2 * (size_t)x->ndim;
  }
  if (!f->copy) {
    f->name_at[t] = name_at;
    f->dims_at[t] = dims_at;
    sg_range_of (t, CHUNK, l->n_buffers, &lo, &hi);
    for (int32_t b = lo; b < hi; b++)
      l->buffers[b].bytes = meta_storage_bytes (g, meta_of (g, l->buf_node[b], l->buf_elem[b]));
  }
}

/* The values' names and dims in two blocks of the plan, and the buffers'
 * sizes, in chunks on the pool. */
static void
fill_values (SgLower *l)
{
  const int32_t n_tasks = (MAX (l->n_values, l->n_buffers) + CHUNK - 1) / CHUNK;
  Fill f = { .l = l,
             .name_at = g_new (size_t, (size_t)n_tasks + 1),
             .dims_at = g_new (size_t, (size_t)n_tasks + 1) };
  sg_pool_run (l->pool, n_tasks, fill_task, &f);
  size_t names = 0, dims = 0; /* the tasks' totals into offsets */
  for (int32_t t = 0; t < n_tasks; t++) {
    const size_t a = f.name_at[t], b = f.dims_at[t];
    f.name_at[t] = names, f.dims_at[t] = dims;
    names += a, dims += b;
  }
  f.names = sg_plan_alloc (l->plan, names);
  f.dims = sg_plan_alloc (l->plan, dims * sizeof (int64_t));
  f.copy = true;
  sg_pool_run (l->pool, n_tasks, fill_task, &f);
  g_free (f.name_at);
  g_free (f.dims_at);
}

bool
sg_lower_values (SgLower *l)
{
  for (SgNodeId id = 0; id < l->g->n_nodes; id++)
    if (!make_values (l, id))
      return false;
  fill_values (l);
  /* (what the values came from: not needed after, not kept beside the
   * instructions) */
  g_clear_pointer (&l->val_node, g_free);
  g_clear_pointer (&l->val_elem, g_free);
  g_clear_pointer (&l->buf_node, g_free);
  g_clear_pointer (&l->buf_elem, g_free);
  return true;
}

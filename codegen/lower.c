/* lower.c: the graph in its final order -> the stream program (codegen.h).
 *
 * Mirrors: nvFuser's host IR lowering (explicit streams, events and
 * collectives) and Inductor's wrapper codegen (buffers, reuse, frees).
 * Requires: graph ids in program order (schedule/ and bucket/ done); costs
 * (estimate/) for est_us, else -1; @pred from sg_simulate() of that order.
 * Invalidates: nothing (the graph is read only).
 *
 * Steps: (1) values and buffers in id order: placeholders own whole-step
 * buffers; compute nodes and collectives own one buffer per tensor (per
 * tuple element); views are new values on their base's buffer at an offset
 * (0 for view-like ops, computed for slice/select); getitem IS the tuple
 * element's value and wait_tensor IS its collective's value (no new value).
 * Zero-copy buckets (graph/elide.c): an elided bucket_unpack is a view of
 * the bucket's result, an elided bucket_pack a view of the storage its
 * inputs already form or the owner of one buffer into which its inputs are
 * written at their concatenation offsets (graph inputs: a whole-step
 * buffer holding several input values); neither emits a kernel. A pack or
 * unpack that stays a kernel names why in its kwargs ("schedgraph_copy").
 * (2) instructions in id order: KERNEL on stream 0; a collective becomes
 * RECORD e (0), WAIT_EVENT e (1+g), COLLECTIVE (1+g), RECORD e' (1+g); its
 * wait_tensor becomes WAIT_EVENT e' (0) naming the collective; collectives
 * without a wait are waited at the end. A collective_permute is such a
 * collective with its pairs and transport; a matmul carries its sm_count. (3) lifetimes: producer to last
 * use, a collective's operands to its WAIT_EVENT, placeholders and outputs
 * whole-step; FREE after the last use (codegen.c). (4) offsets (memplan.c).
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
  SgPlanBuffer b = { 0, bytes, -1, -1 };
  g_array_append_val (l->buffers, b);
  g_array_append_val (l->pinned, pinned);
  return (int32_t)l->buffers->len - 1;
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
  g_array_append_val (l->values, v);
  return (int32_t)l->values->len - 1;
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
  SgPlanValue *x = &g_array_index (l->values, SgPlanValue, v);
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
    SgPlanValue base = g_array_index (l->values, SgPlanValue, bv);
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
  SgPlanValue base = g_array_index (l->values, SgPlanValue, l->nval[of]);
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
    SgPlanValue base = g_array_index (l->values, SgPlanValue, bv);
    uint64_t delta;
    if (!view_delta (l, id, &base, &delta))
      return false;
    if (base.buffer < 0)
      return true;
    l->nval[id] = new_value (l, n->name, &n->meta, base.buffer, base.offset + delta, SG_INIT_NONE);
    SgPlanValue *x = &g_array_index (l->values, SgPlanValue, l->nval[id]);
    x->roll_group = base.roll_group, x->roll_shift = base.roll_shift;
    x->roll_sign = base.roll_sign, x->roll_block = base.roll_block;
    return true;
  }
  if (n->n_tuple) {
    for (uint32_t i = 0; i < n->n_tuple; i++) {
      g_autofree char *nm = g_strdup_printf ("%s.%u", n->name, i);
      l->tval[n->tuple_first + i] =
        owned_value (l, nm, sg_node_tuple_meta (g, id, i), SG_INIT_NONE);
    }
    return true;
  }
  l->nval[id] = owned_value (l, n->name, &n->meta, SG_INIT_NONE);
  if (sg_op_is_collective (n->kind) && l->nval[id] < 0)
    return sg_lower_fail (l, id, "meta: a collective must produce a tensor");
  return true;
}

/* A node reference in a plan: {"value": ID} (a tuple node: {"values":
 * [IDs]}). The keys are constant strings, not copies (one allocation per
 * reference less). */
static cJSON *
value_ref (const SgGraph *g, SgNodeId r, gpointer user)
{
  const SgLower *l = user;
  cJSON *v = cJSON_CreateObject ();
  if (g->nodes[r].n_tuple) {
    cJSON *ids = cJSON_CreateArray ();
    cJSON_AddItemToObjectCS (v, "values", ids);
    for (uint32_t i = 0; i < g->nodes[r].n_tuple; i++)
      cJSON_AddItemToArray (ids, cJSON_CreateNumber (l->tval[g->nodes[r].tuple_first + i]));
  } else {
    cJSON_AddItemToObjectCS (v, "value", cJSON_CreateNumber (l->nval[r]));
  }
  return v;
}

/* Node @id's name in the plan's strings: its value's when it has one
 * (the same text), else a copy. */
static char *
node_name (SgLower *l, SgNodeId id)
{
  const int32_t v = l->nval[id];
  if (v >= 0 && strcmp (g_array_index (l->values, SgPlanValue, v).name, l->g->nodes[id].name) == 0)
    return g_array_index (l->values, SgPlanValue, v).name;
  return sg_plan_str (l->plan, l->g->nodes[id].name, false);
}

static SgPlanIns *
emit (SgLower *l, SgInsKind kind, int32_t stream)
{
  SgPlanIns in = { 0 };
  in.kind = kind;
  in.stream = stream;
  in.group = in.event = in.coll = in.buffer = -1;
  in.est_us = in.pred_start_us = in.pred_end_us = in.pred_exposed_us = -1;
  g_array_append_val (l->ins, in);
  return &g_array_index (l->ins, SgPlanIns, l->ins->len - 1);
}

static void
push_unique (GArray *a, int32_t v)
{
  if (v < 0)
    return;
  for (guint i = 0; i < a->len; i++)
    if (g_array_index (a, int32_t, i) == v)
      return;
  g_array_append_val (a, v);
}

int32_t *
sg_lower_steal_ids (GArray *a, int32_t *n)
{
  *n = (int32_t)a->len;
  return (int32_t *)g_array_free (a, FALSE);
}

static void
set_node_pred (SgLower *l, SgPlanIns *in, SgNodeId id)
{
  const SgNode *n = &l->g->nodes[id];
  if (n->est_src != SG_COST_NONE)
    in->est_us = n->est_us;
  if (l->pred && l->pred->node_start && l->pred->node_end) {
    in->pred_start_us = l->pred->node_start[id];
    in->pred_end_us = l->pred->node_end[id];
  }
  if (l->pred_row[id] >= 0) {
    const SgCollRow *r = &l->pred->rows[l->pred_row[id]];
    in->est_us = r->est_us;
    in->pred_start_us = r->start_us;
    in->pred_end_us = r->end_us;
    in->pred_exposed_us = r->exposed_us;
  }
}

static bool
emit_kernel (SgLower *l, SgNodeId id)
{
  const SgGraph *g = l->g;
  const SgNode *n = &g->nodes[id];
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, id, &k);
  GArray *ins = g_array_new (FALSE, FALSE, sizeof (int32_t));
  GArray *outs = g_array_new (FALSE, FALSE, sizeof (int32_t));
  for (uint32_t j = 0; j < k; j++) {
    const SgNode *src = &g->nodes[in[j]];
    if (src->n_tuple)
      for (uint32_t t = 0; t < src->n_tuple; t++)
        push_unique (ins, l->tval[src->tuple_first + t]);
    else
      push_unique (ins, l->nval[in[j]]);
  }
  if (n->n_tuple)
    for (uint32_t t = 0; t < n->n_tuple; t++)
      g_array_append_val (outs, l->tval[n->tuple_first + t]);
  else if (l->nval[id] >= 0)
    g_array_append_val (outs, l->nval[id]);
  SgPlanIns *x = emit (l, SG_INS_KERNEL, 0);
  x->name = node_name (l, id);
  x->op = n->kind;
  x->target = sg_plan_str (l->plan, n->target, true);
  x->in = sg_lower_steal_ids (ins, &x->n_in);
  x->out = sg_lower_steal_ids (outs, &x->n_out);
  x->args = sg_node_args_json (g, id, false, value_ref, l);
  x->kwargs = sg_node_args_json (g, id, true, value_ref, l);
  if (sg_elision_candidate (n->kind)) /* a copy that stays: why */
    cJSON_AddStringToObject (x->kwargs, "schedgraph_copy",
                             sg_copy_reason_text ((SgCopyReason)l->el.reason[id]));
  x->sm_count = sg_op_class (n->kind) == SG_CLASS_MATMUL ? n->sm_count : 0;
  set_node_pred (l, x, id);
  return true;
}

/* The collective's operands: one input and one output value per member
 * (a coalesced collective has several), with NCCL's count summed over them
 * (sg_collective_count of each). */
static bool
collective_operands (SgLower *l, SgNodeId id, int32_t **in, int32_t **out, int32_t *n_members,
                     int64_t *count, SgDtype *dtype)
{
  const SgGraph *g = l->g;
  const SgNode *n = &g->nodes[id];
  uint32_t m = sg_node_coll_members (g, id);
  *n_members = (int32_t)m;
  *in = g_new (int32_t, m);
  *out = g_new (int32_t, m);
  *count = 0;
  for (uint32_t i = 0; i < m; i++) {
    SgNodeId src = sg_node_coll_input (g, id, i);
    (*in)[i] = src != SG_NO_NODE ? l->nval[src] : -1;
    (*out)[i] = n->n_tuple ? l->tval[n->tuple_first + i] : l->nval[id];
    if ((*in)[i] < 0 || (*out)[i] < 0)
      return sg_lower_fail (l, id, "args[0]: member %u's input or result has no tensor value", i);
    const SgPlanValue *a = &g_array_index (l->values, SgPlanValue, (*in)[i]);
    const SgPlanValue *o = &g_array_index (l->values, SgPlanValue, (*out)[i]);
    uint64_t ni = 1, no = 1;
    for (int32_t d = 0; d < a->ndim; d++)
      ni *= (uint64_t)a->shape[d];
    for (int32_t d = 0; d < o->ndim; d++)
      no *= (uint64_t)o->shape[d];
    if (a->dtype != o->dtype)
      return sg_lower_fail (l, id, "meta.dtype: %s output of a %s input",
                            sg_dtype_name (o->dtype), sg_dtype_name (a->dtype));
    *dtype = a->dtype;
    *count += (int64_t)sg_collective_count (n->kind, ni, no);
  }
  return true;
}

static bool
emit_collective (SgLower *l, SgNodeId id)
{
  const SgGraph *g = l->g;
  const SgNode *n = &g->nodes[id];
  if (n->group < 0 || n->group >= g->n_groups)
    return sg_lower_fail (l, id, "group: no group");
  int32_t stream = 1 + n->group;
  g_autofree int32_t *in = NULL, *out = NULL;
  int32_t members = 0;
  int64_t count = 0;
  SgDtype dtype = SG_DTYPE_INVALID;
  if (!collective_operands (l, id, &in, &out, &members, &count, &dtype))
    return false;

  int32_t e = l->n_events++;
  emit (l, SG_INS_RECORD, 0)->event = e;
  emit (l, SG_INS_WAIT_EVENT, stream)->event = e;
  l->coll_ins[id] = (int32_t)l->ins->len;
  SgPlanIns *x = emit (l, SG_INS_COLLECTIVE, stream);
  x->name = node_name (l, id);
  x->op = n->kind;
  x->in = g_steal_pointer (&in);
  x->n_in = members;
  x->out = g_steal_pointer (&out);
  x->n_out = members;
  x->group = n->group;
  x->reduce = n->reduce;
  x->dtype = dtype;
  x->count = count;
  x->args = sg_node_args_json (g, id, false, value_ref, l);
  x->kwargs = sg_node_args_json (g, id, true, value_ref, l);
  const SgArg *mem = sg_node_kwarg (g, id, "schedgraph_bucket");
  if (mem && mem->type == SG_ARG_LIST) {
    uint32_t nm;
    const SgArg *m = sg_arg_items (g, mem, &nm);
    x->members = g_new0 (char *, (size_t)nm + 1);
    for (uint32_t i = 0; i < nm; i++) {
      if (!sg_arg_str (&m[i]))
        return sg_lower_fail (l, id, "kwargs.schedgraph_bucket[%d]: expected a node name",
                              x->n_members);
      x->members[x->n_members++] = g_strdup (sg_arg_str (&m[i]));
    }
  }
  if (n->kind == SG_OP_COLLECTIVE_PERMUTE) {
    SgPermute p;
    if (!sg_node_permute (g, id, &p, l->error)) {
      sg_permute_clear (&p);
      return false;
    }
    x->transport = p.transport;
    x->n_pairs = p.n_pairs;
    x->pairs = g_steal_pointer (&p.pairs);
    sg_permute_clear (&p);
  }
  set_node_pred (l, x, id);
  int32_t done = l->n_events++;
  emit (l, SG_INS_RECORD, stream)->event = done;
  l->coll_done[id] = done;
  return true;
}

static void
emit_wait (SgLower *l, SgNodeId coll, const char *name)
{
  SgPlanIns *w = emit (l, SG_INS_WAIT_EVENT, 0);
  w->event = l->coll_done[coll];
  w->coll = l->coll_ins[coll];
  w->name = sg_plan_str (l->plan, name, false);
  l->coll_waited[coll] = true;
}

bool
sg_lower_emit (SgLower *l)
{
  const SgGraph *g = l->g;
  for (SgNodeId id = 0; id < g->n_nodes; id++) {
    const SgNode *n = &g->nodes[id];
    SgOpClass c = sg_op_class (n->kind);
    if (n->op == SG_NODE_OUTPUT || n->op == SG_NODE_PLACEHOLDER || n->op == SG_NODE_GET_ATTR ||
        c == SG_CLASS_INPUT || c == SG_CLASS_VIEW || c == SG_CLASS_GETITEM || copy_elided (l, id))
      continue;
    if (c == SG_CLASS_WAIT) {
      SgNodeId t = sg_node_wait_target (g, id);
      if (t == SG_NO_NODE || !sg_op_is_collective (g->nodes[t].kind))
        return sg_lower_fail (l, id, "args[0]: a wait must name a collective");
      if (!l->coll_waited[t])
        emit_wait (l, t, n->name);
      continue;
    }
    if (sg_op_is_collective (n->kind) ? !emit_collective (l, id) : !emit_kernel (l, id))
      return false;
  }
  for (SgNodeId id = 0; id < g->n_nodes; id++)
    if (l->coll_ins[id] >= 0 && !l->coll_waited[id])
      emit_wait (l, id, NULL);
  return true;
}

bool
sg_lower_values (SgLower *l)
{
  for (SgNodeId id = 0; id < l->g->n_nodes; id++)
    if (!make_values (l, id))
      return false;
  return true;
}

/* emit.c: step 2 of the lowering, the instructions in id order
 * (sg_lower_lay_out, sg_lower_emit: codegen-private.h).
 *
 * Mirrors: nvFuser's host IR lowering (explicit streams, events and
 * collectives).
 * Requires: step 1 (lower.c: every node's values and buffers); costs
 * (estimate/) for est_us, else -1; @pred from sg_simulate() of that order.
 * Invalidates: nothing (the graph is read only).
 *
 * A KERNEL on stream 0 per compute node; a collective becomes RECORD e
 * (0), WAIT_EVENT e (1+g), COLLECTIVE (1+g), RECORD e' (1+g); its
 * wait_tensor becomes WAIT_EVENT e' (0) naming the collective; collectives
 * without a wait are waited at the end. A collective_permute is such a
 * collective with its pairs and transport; a matmul carries its sm_count.
 *
 * In four passes, none of which moves an instruction. The layout, in id
 * order on this thread: which node makes which instructions, their
 * pre-FREE indices, the events, the waits (all that depends on the nodes
 * before), in per-node arrays. The kernels' and collectives' operands, in
 * chunks of nodes on the pool (codegen.c then places the FREEs by them).
 * Then, in chunks of nodes on the pool, every instruction written once at
 * its final index with the FREEs after it (the operands moved in), and
 * last the kernels' and collectives' own contents (names, arguments as
 * JSON, predictions: most of the work, and each a function of its node
 * alone), after the per-node arrays are freed. A node that cannot
 * be lowered fails the step; of several, the first in id order names the
 * error, as one pass would.
 */
#include "codegen-private.h"

#include <string.h>

/* Nodes per task of the passes on the pool. */
#define CHUNK 1024

/* A task's own state: its error, and the plan strings of the targets it
 * met last (targets repeat; the plan's strings take a lock). */
#define TARGETS 8
typedef struct {
  GError *error;
  SgNodeId failed; /* the node that failed, or -1 */
  const char *target_of[TARGETS];
  char *target[TARGETS];
} Task;

/* A copy of @s among the plan's strings, from any thread. */
static char *
plan_str (SgLower *l, const char *s, bool shared)
{
  g_mutex_lock (&l->strings_lock);
  char *r = sg_plan_str (l->plan, s, shared);
  g_mutex_unlock (&l->strings_lock);
  return r;
}

static char *
target_str (SgLower *l, Task *t, const char *s)
{
  const size_t k = ((uintptr_t)s >> 4) % TARGETS;
  if (!s || t->target_of[k] != s) {
    t->target_of[k] = s;
    t->target[k] = plan_str (l, s, true);
  }
  return t->target[k];
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
  if (v >= 0 && strcmp (l->values[v].name, l->g->nodes[id].name) == 0)
    return l->values[v].name;
  return plan_str (l, l->g->nodes[id].name, false);
}

static void
blank (SgPlanIns *in, SgInsKind kind, int32_t stream)
{
  *in = (SgPlanIns){ 0 };
  in->kind = kind;
  in->stream = stream;
  in->group = in->event = in->coll = in->buffer = -1;
  in->est_us = in->pred_start_us = in->pred_end_us = in->pred_exposed_us = -1;
}

/* The final index of pre-FREE instruction @i. */
static inline int32_t
final_index (const SgLower *l, int32_t i)
{
  return i + l->free_before[i];
}

/* Instruction @i (pre-FREE index) at its final index, blank, with the
 * FREEs that follow it (codegen.c's place_frees chose them). */
static SgPlanIns *
place (SgLower *l, int32_t i, SgInsKind kind, int32_t stream)
{
  SgPlanIns *in = &l->ins[final_index (l, i)];
  blank (in, kind, stream);
  SgPlanIns *f = in + 1;
  for (int32_t k = l->free_before[i]; k < l->free_before[i + 1]; k++, f++) {
    blank (f, SG_INS_FREE, 0);
    f->buffer = l->dying[k];
  }
  return in;
}

/* Appends @v to the @n ids at @a unless it is there or negative. */
static void
push_unique (int32_t *a, int32_t *n, int32_t v)
{
  if (v < 0)
    return;
  for (int32_t i = 0; i < *n; i++)
    if (a[i] == v)
      return;
  a[(*n)++] = v;
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

/* A kernel's operands: its inputs' values (each once), its outputs'. */
static void
kernel_operands (SgLower *l, SgNodeId id, SgOperands *x)
{
  const SgGraph *g = l->g;
  const SgNode *n = &g->nodes[id];
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, id, &k);
  size_t max_in = 0;
  for (uint32_t j = 0; j < k; j++)
    max_in += g->nodes[in[j]].n_tuple ? g->nodes[in[j]].n_tuple : 1;
  int32_t n_in = 0, n_out = 0;
  int32_t *ins = g_new (int32_t, max_in + 1);
  int32_t *outs = g_new (int32_t, (size_t)n->n_tuple + 1);
  for (uint32_t j = 0; j < k; j++) {
    const SgNode *src = &g->nodes[in[j]];
    if (src->n_tuple)
      for (uint32_t u = 0; u < src->n_tuple; u++)
        push_unique (ins, &n_in, l->tval[src->tuple_first + u]);
    else
      push_unique (ins, &n_in, l->nval[in[j]]);
  }
  if (n->n_tuple)
    for (uint32_t u = 0; u < n->n_tuple; u++)
      outs[n_out++] = l->tval[n->tuple_first + u];
  else if (l->nval[id] >= 0)
    outs[n_out++] = l->nval[id];
  x->in = ins;
  x->n_in = n_in;
  x->out = outs;
  x->n_out = n_out;
}

/* The rest of a kernel (its operands are there). */
static void
fill_kernel (SgLower *l, Task *t, SgNodeId id, SgPlanIns *x)
{
  const SgGraph *g = l->g;
  const SgNode *n = &g->nodes[id];
  x->name = node_name (l, id);
  x->op = n->kind;
  x->target = target_str (l, t, n->target);
  x->args = sg_node_args_json (g, id, false, value_ref, l);
  x->kwargs = sg_node_args_json (g, id, true, value_ref, l);
  if (sg_elision_candidate (n->kind)) /* a copy that stays: why */
    cJSON_AddStringToObject (x->kwargs, "schedgraph_copy",
                             sg_copy_reason_text ((SgCopyReason)l->el.reason[id]));
  x->sm_count = sg_op_class (n->kind) == SG_CLASS_MATMUL ? n->sm_count : 0;
  set_node_pred (l, x, id);
}

/* The collective's operands: one input and one output value per member
 * (a coalesced collective has several; -1 where there is none). */
static void
collective_operands (SgLower *l, SgNodeId id, SgOperands *x)
{
  const SgGraph *g = l->g;
  const SgNode *n = &g->nodes[id];
  uint32_t m = sg_node_coll_members (g, id);
  x->n_in = x->n_out = (int32_t)m;
  x->in = g_new (int32_t, m);
  x->out = g_new (int32_t, m);
  for (uint32_t i = 0; i < m; i++) {
    SgNodeId src = sg_node_coll_input (g, id, i);
    x->in[i] = src != SG_NO_NODE ? l->nval[src] : -1;
    x->out[i] = n->n_tuple ? l->tval[n->tuple_first + i] : l->nval[id];
  }
}

/* The collective's operands checked, with NCCL's count summed over its
 * members (sg_collective_count of each). */
static bool
collective_count (SgLower *l, Task *t, SgNodeId id, SgPlanIns *x)
{
  const SgGraph *g = l->g;
  const SgNode *n = &g->nodes[id];
  x->count = 0;
  x->dtype = SG_DTYPE_INVALID;
  for (uint32_t i = 0; i < (uint32_t)x->n_in; i++) {
    if (x->in[i] < 0 || x->out[i] < 0)
      return sg_lower_fail (&t->error, g, id,
                            "args[0]: member %u's input or result has no tensor value", i);
    const SgPlanValue *a = &l->values[x->in[i]];
    const SgPlanValue *o = &l->values[x->out[i]];
    uint64_t ni = 1, no = 1;
    for (int32_t d = 0; d < a->ndim; d++)
      ni *= (uint64_t)a->shape[d];
    for (int32_t d = 0; d < o->ndim; d++)
      no *= (uint64_t)o->shape[d];
    if (a->dtype != o->dtype)
      return sg_lower_fail (&t->error, g, id, "meta.dtype: %s output of a %s input",
                            sg_dtype_name (o->dtype), sg_dtype_name (a->dtype));
    x->dtype = a->dtype;
    x->count += (int64_t)sg_collective_count (n->kind, ni, no);
  }
  return true;
}

static bool
fill_collective (SgLower *l, Task *t, SgNodeId id, SgPlanIns *x)
{
  const SgGraph *g = l->g;
  const SgNode *n = &g->nodes[id];
  if (!collective_count (l, t, id, x))
    return false;
  x->name = node_name (l, id);
  x->op = n->kind;
  x->group = n->group;
  x->reduce = n->reduce;
  x->args = sg_node_args_json (g, id, false, value_ref, l);
  x->kwargs = sg_node_args_json (g, id, true, value_ref, l);
  const SgArg *mem = sg_node_kwarg (g, id, "schedgraph_bucket");
  if (mem && mem->type == SG_ARG_LIST) {
    uint32_t nm;
    const SgArg *m = sg_arg_items (g, mem, &nm);
    x->members = g_new0 (char *, (size_t)nm + 1);
    for (uint32_t i = 0; i < nm; i++) {
      if (!sg_arg_str (&m[i]))
        return sg_lower_fail (&t->error, g, id,
                              "kwargs.schedgraph_bucket[%d]: expected a node name",
                              x->n_members);
      x->members[x->n_members++] = g_strdup (sg_arg_str (&m[i]));
    }
  }
  if (n->kind == SG_OP_COLLECTIVE_PERMUTE) {
    SgPermute p;
    if (!sg_node_permute (g, id, &p, &t->error)) {
      sg_permute_clear (&p);
      return false;
    }
    x->transport = p.transport;
    x->n_pairs = p.n_pairs;
    x->pairs = g_steal_pointer (&p.pairs);
    sg_permute_clear (&p);
  }
  set_node_pred (l, x, id);
  return true;
}

/* Pass 1: the instructions' layout (which node makes which, their
 * pre-FREE indices, the events, the waits) in per-node arrays, no
 * instruction written. False with l->error at the first node that cannot
 * be laid out; the nodes before it are laid out. */
static bool
lay_out (SgLower *l)
{
  const SgGraph *g = l->g;
  for (SgNodeId id = 0; id < g->n_nodes; id++) {
    const SgNode *n = &g->nodes[id];
    SgOpClass c = sg_op_class (n->kind);
    if (n->op == SG_NODE_OUTPUT || n->op == SG_NODE_PLACEHOLDER || n->op == SG_NODE_GET_ATTR ||
        c == SG_CLASS_INPUT || c == SG_CLASS_VIEW || c == SG_CLASS_GETITEM
        || sg_elision_elided (g, &l->el, id))
      continue;
    if (c == SG_CLASS_WAIT) {
      SgNodeId t = sg_node_wait_target (g, id);
      if (t == SG_NO_NODE || !sg_op_is_collective (g->nodes[t].kind))
        return sg_lower_fail (l->error, g, id, "args[0]: a wait must name a collective");
      if (!l->coll_waited[t]) {
        l->main_ins[id] = l->n_pre++;
        l->wait_for[id] = t;
        l->coll_waited[t] = true;
      }
      continue;
    }
    if (!sg_op_is_collective (n->kind)) {
      l->main_ins[id] = l->n_pre++;
      continue;
    }
    if (n->group < 0 || n->group >= g->n_groups)
      return sg_lower_fail (l->error, g, id, "group: no group");
    l->n_events += 2; /* RECORD e (0), WAIT_EVENT e, COLLECTIVE, RECORD e + 1 (1 + group) */
    l->main_ins[id] = l->n_pre + 2;
    l->n_pre += 4;
    l->coll_done[id] = l->n_events - 1;
  }
  for (SgNodeId id = 0; id < g->n_nodes; id++)
    if (l->coll_done[id] >= 0 && !l->coll_waited[id]) {
      g_array_append_val (l->end_waits, id);
      l->n_pre++;
    }
  return true;
}

/* Pass 2: the operands of nodes [CHUNK t, CHUNK (t + 1)) (before the
 * FREEs: they give the buffers' lifetimes). Their small arrays lie side
 * by side in the heap, in instruction order, not among the arguments'
 * JSON (the validator and the writer read them in that order). */
static void
operands_task (gpointer ctx, int32_t t, int32_t worker)
{
  (void)worker;
  SgLower *l = ctx;
  SgNodeId begin, end;
  sg_range_of (t, CHUNK, l->g->n_nodes, &begin, &end);
  for (SgNodeId id = begin; id < end; id++) {
    if (l->main_ins[id] < 0 || l->wait_for[id] >= 0)
      continue;
    if (sg_op_is_collective (l->g->nodes[id].kind))
      collective_operands (l, id, &l->ops[id]);
    else
      kernel_operands (l, id, &l->ops[id]);
  }
}

void
sg_lower_lay_out (SgLower *l)
{
  GError **error = l->error;
  l->error = &l->layout_error;
  (void)lay_out (l);
  l->error = error;
  sg_pool_run (l->pool, sg_ranges (l->g->n_nodes, CHUNK), operands_task, l);
}

/* The WAIT_EVENT at pre-FREE index @i of collective @coll. */
static void
put_wait (SgLower *l, int32_t i, SgNodeId coll, const char *name)
{
  SgPlanIns *w = place (l, i, SG_INS_WAIT_EVENT, 0);
  w->event = l->coll_done[coll];
  w->coll = final_index (l, l->main_ins[coll]);
  w->name = plan_str (l, name, false);
}

/* Node @id's instructions at their final indices, the KERNEL's or
 * COLLECTIVE's operands moved in (its contents: pass 4). */
static SgPlanIns *
put_node (SgLower *l, SgNodeId id)
{
  const SgNode *n = &l->g->nodes[id];
  const int32_t m = l->main_ins[id];
  SgPlanIns *x;
  if (!sg_op_is_collective (n->kind))
    x = place (l, m, SG_INS_KERNEL, 0);
  else {
    const int32_t stream = 1 + n->group, done = l->coll_done[id];
    place (l, m - 2, SG_INS_RECORD, 0)->event = done - 1;
    place (l, m - 1, SG_INS_WAIT_EVENT, stream)->event = done - 1;
    x = place (l, m, SG_INS_COLLECTIVE, stream);
    place (l, m + 1, SG_INS_RECORD, stream)->event = done;
  }
  const SgOperands *o = &l->ops[id];
  x->in = o->in;
  x->n_in = o->n_in;
  x->out = o->out;
  x->n_out = o->n_out;
  return x;
}

/* Pass 3: nodes [CHUNK t, CHUNK (t + 1)) written at their final indices
 * (the first touch of those pages: on the pool's threads, not one); the
 * last task writes the waits at the end. */
static void
write_task (gpointer ctx, int32_t t, int32_t worker)
{
  (void)worker;
  SgLower *l = ctx;
  const int32_t n_tasks = sg_ranges (l->g->n_nodes, CHUNK);
  if (t == n_tasks) {
    const int32_t first = l->n_pre - (int32_t)l->end_waits->len;
    for (guint k = 0; k < l->end_waits->len; k++)
      put_wait (l, first + (int32_t)k, g_array_index (l->end_waits, SgNodeId, k), NULL);
    return;
  }
  SgNodeId begin, end;
  sg_range_of (t, CHUNK, l->g->n_nodes, &begin, &end);
  for (SgNodeId id = begin; id < end; id++) {
    if (l->main_ins[id] < 0)
      continue;
    if (l->wait_for[id] >= 0)
      put_wait (l, l->main_ins[id], l->wait_for[id], l->g->nodes[id].name);
    else
      put_node (l, id);
  }
}

typedef struct {
  SgLower *l;
  Task *tasks;
} Fill;

/* Pass 4: the kernels' and collectives' contents, nodes [CHUNK t, CHUNK
 * (t + 1)), up to the first failing. */
static void
fill_task (gpointer ctx, int32_t t, int32_t worker)
{
  (void)worker;
  Fill *f = ctx;
  SgLower *l = f->l;
  Task *task = &f->tasks[t];
  SgNodeId begin, end;
  sg_range_of (t, CHUNK, l->g->n_nodes, &begin, &end);
  for (SgNodeId id = begin; id < end; id++) {
    if (l->main_ins[id] < 0)
      continue;
    SgPlanIns *x = &l->ins[final_index (l, l->main_ins[id])];
    if (x->kind == SG_INS_KERNEL)
      fill_kernel (l, task, id, x);
    else if (x->kind == SG_INS_COLLECTIVE && !fill_collective (l, task, id, x)) {
      task->failed = id;
      return;
    }
  }
}

bool
sg_lower_emit (SgLower *l)
{
  l->ins = g_new (SgPlanIns, (size_t)MAX (l->n_ins, 1));
  const int32_t n_tasks = sg_ranges (l->g->n_nodes, CHUNK);
  sg_pool_run (l->pool, n_tasks + 1, write_task, l);
  /* moved into the instructions: gone before the arguments' JSON */
  g_clear_pointer (&l->ops, g_free);
  g_clear_pointer (&l->wait_for, g_free);
  g_clear_pointer (&l->dying, g_free);
  Fill f = { l, g_new0 (Task, (size_t)n_tasks + 1) };
  for (int32_t t = 0; t < n_tasks; t++)
    f.tasks[t].failed = -1;
  sg_pool_run (l->pool, n_tasks, fill_task, &f);
  /* the first node that failed, in id order: a task's, else the layout's */
  GError *first = NULL;
  for (int32_t t = 0; t < n_tasks; t++) {
    if (!first && f.tasks[t].failed >= 0)
      first = g_steal_pointer (&f.tasks[t].error);
    g_clear_error (&f.tasks[t].error);
  }
  g_free (f.tasks);
  if (!first && l->layout_error)
    first = g_steal_pointer (&l->layout_error);
  g_clear_error (&l->layout_error);
  if (first)
    g_propagate_error (l->error, first);
  return !first;
}

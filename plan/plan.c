/* plan.c: the plan's lifetime, its strings and dimensions, the names of
 * its enums and the kernel-argument accessors (plan.h). The canonical text
 * is plan-text.c's, its hash plan-hash.c's, the file plan-write.c's.
 *
 * Requires: nothing. Invalidates: nothing.
 */
#include "plan-private.h"

#include <string.h>

G_DEFINE_QUARK (sg-plan-error-quark, sg_plan_error)

SgPlan *
sg_plan_new (void)
{
  SgPlan *p = g_new0 (SgPlan, 1);
  p->world_size = 1;
  p->n_streams = 1;
  p->pred.step_us = p->pred.compute_us = p->pred.comm_us = -1;
  p->pred.exposed_us = p->pred.lower_bound_us = -1;
  return p;
}

char *
sg_plan_str (SgPlan *p, const char *s, bool shared)
{
  g_return_val_if_fail (p != NULL, NULL);
  if (!s)
    return NULL;
  if (!p->strings)
    p->strings = g_string_chunk_new (1 << 16);
  return shared ? g_string_chunk_insert_const (p->strings, s) : g_string_chunk_insert (p->strings, s);
}

/* Blocks of DIMS_BLOCK integers (or one dims call's, if larger). */
#define DIMS_BLOCK 8192
struct SgPlanDims {
  SgPlanDims *next;
  size_t used, cap;
  int64_t v[];
};

void
sg_plan_value_set_dims (SgPlan *p, SgPlanValue *v, int32_t ndim, const int64_t *shape,
                        const int64_t *stride)
{
  g_return_if_fail (p != NULL && v != NULL && ndim >= 0 && ndim <= SG_PLAN_MAX_DIMS);
  size_t need = 2 * (size_t)ndim;
  SgPlanDims *d = p->dims;
  if (!d || d->cap - d->used < need) {
    size_t cap = MAX (need, (size_t)DIMS_BLOCK);
    d = g_malloc (sizeof (SgPlanDims) + cap * sizeof (int64_t));
    d->next = p->dims;
    d->used = 0;
    d->cap = cap;
    p->dims = d;
  }
  int64_t *at = d->v + d->used;
  d->used += need;
  v->ndim = ndim;
  v->shape = at;
  v->stride = at + ndim;
  for (int32_t k = 0; k < ndim; k++) {
    v->shape[k] = shape ? shape[k] : 0;
    v->stride[k] = stride ? stride[k] : 0;
  }
}

void *
sg_plan_alloc (SgPlan *p, size_t bytes)
{
  g_return_val_if_fail (p != NULL, NULL);
  const size_t cap = (bytes + sizeof (int64_t) - 1) / sizeof (int64_t);
  SgPlanDims *d = g_malloc (sizeof (SgPlanDims) + MAX (cap, 1) * sizeof (int64_t));
  d->used = d->cap = cap; /* full: sg_plan_value_set_dims takes none of it */
  if (p->dims) { /* behind the block that dims are taken from */
    d->next = p->dims->next;
    p->dims->next = d;
  } else {
    d->next = NULL;
    p->dims = d;
  }
  return d->v;
}

void
sg_plan_ins_clear (SgPlanIns *ins)
{
  g_free (ins->in);
  g_free (ins->out);
  if (ins->args)
    cJSON_Delete (ins->args);
  if (ins->kwargs)
    cJSON_Delete (ins->kwargs);
  for (int32_t i = 0; i < ins->n_members; i++)
    g_free (ins->members[i]);
  g_free (ins->members);
  g_free (ins->pairs);
  memset (ins, 0, sizeof *ins);
}

void
sg_plan_free (SgPlan *p)
{
  if (!p)
    return;
  for (int32_t i = 0; i < p->n_groups; i++) {
    g_free (p->groups[i].name);
    g_free (p->groups[i].partition);
  }
  g_free (p->groups);
  g_free (p->buffers);
  g_free (p->values);
  if (p->strings)
    g_string_chunk_free (p->strings);
  for (SgPlanDims *d = p->dims, *next; d; d = next) {
    next = d->next;
    g_free (d);
  }
  g_free (p->inputs);
  g_free (p->outputs);
  for (int32_t i = 0; i < p->n_ins; i++)
    sg_plan_ins_clear (&p->ins[i]);
  g_free (p->ins);
  g_free (p->graph);
  g_free (p->options);
  g_free (p);
}

/* --- names of the plan's enums ------------------------------------------- */

static const char *const ins_kind_names[] = { "kernel", "collective", "record", "wait_event",
                                              "free" };

const char *
sg_plan_ins_kind_name (SgInsKind k)
{
  g_return_val_if_fail ((size_t)k < G_N_ELEMENTS (ins_kind_names), "?");
  return ins_kind_names[k];
}

bool
sg_plan_ins_kind_from_name (const char *s, SgInsKind *out)
{
  for (size_t i = 0; i < G_N_ELEMENTS (ins_kind_names); i++)
    if (s && strcmp (s, ins_kind_names[i]) == 0) {
      *out = (SgInsKind)i;
      return true;
    }
  return false;
}

bool
sg_plan_op_from_name (const char *s, SgOpKind *out)
{
  for (int k = 0; k < SG_OP_N_KINDS; k++)
    if (s && strcmp (s, sg_op_name ((SgOpKind)k)) == 0) {
      *out = (SgOpKind)k;
      return true;
    }
  return false;
}

/* --- accessors for kernel arguments ---------------------------------------- */

static const cJSON *
arg_at (const SgPlanIns *ins, int i)
{
  if (!ins || !ins->args || !cJSON_IsArray (ins->args) || i < 0)
    return NULL;
  return cJSON_GetArrayItem (ins->args, i);
}

static bool
json_as_int (const cJSON *v, int64_t *out)
{
  if (!cJSON_IsNumber (v))
    return false;
  double d = v->valuedouble;
  if (d != floor (d) || d < -SG_PLAN_MAX_INT || d > SG_PLAN_MAX_INT)
    return false;
  *out = (int64_t)d;
  return true;
}

bool
sg_plan_arg_int (const SgPlanIns *ins, int i, int64_t *out)
{
  const cJSON *v = arg_at (ins, i);
  if (cJSON_IsBool (v)) {
    *out = cJSON_IsTrue (v) ? 1 : 0;
    return true;
  }
  return json_as_int (v, out);
}

bool
sg_plan_arg_double (const SgPlanIns *ins, int i, double *out)
{
  const cJSON *v = arg_at (ins, i);
  if (!cJSON_IsNumber (v))
    return false;
  *out = v->valuedouble;
  return true;
}

bool
sg_plan_arg_value (const SgPlanIns *ins, int i, int32_t *out)
{
  const cJSON *v = arg_at (ins, i);
  if (!cJSON_IsObject (v))
    return false;
  int64_t id;
  if (!json_as_int (cJSON_GetObjectItemCaseSensitive (v, "value"), &id) || id < -1 ||
      id > INT32_MAX)
    return false;
  *out = (int32_t)id;
  return true;
}

int
sg_plan_arg_ints (const SgPlanIns *ins, int i, int64_t *out, int max)
{
  const cJSON *v = arg_at (ins, i);
  if (!cJSON_IsArray (v))
    return -1;
  int n = 0;
  const cJSON *e;
  cJSON_ArrayForEach (e, v)
  {
    int64_t x;
    if (!json_as_int (e, &x))
      return -1;
    if (n < max)
      out[n] = x;
    n++;
  }
  return n <= max ? n : -1;
}

const cJSON *
sg_plan_kwarg (const SgPlanIns *ins, const char *key)
{
  if (!ins || !ins->kwargs || !cJSON_IsObject (ins->kwargs) || !key)
    return NULL;
  return cJSON_GetObjectItemCaseSensitive (ins->kwargs, key);
}

int32_t
sg_plan_arg_group (const SgPlan *plan, const SgPlanIns *ins)
{
  const int ga = sg_op_param_pos (ins->op, SG_PARAM_GROUP_NAME);
  const cJSON *v = arg_at (ins, ga);
  if (ga < 0 || !cJSON_IsString (v))
    return -1;
  for (int32_t g = 0; g < plan->n_groups; g++)
    if (strcmp (plan->groups[g].name, v->valuestring) == 0)
      return g;
  return -1;
}

void
sg_plan_permute_peers (const SgPlanIns *ins, int32_t me, int32_t *target, int32_t *source)
{
  *target = *source = -1;
  for (int32_t i = 0; i < ins->n_pairs; i++) {
    if (ins->pairs[2 * i] == me)
      *target = ins->pairs[2 * i + 1];
    if (ins->pairs[2 * i + 1] == me)
      *source = ins->pairs[2 * i];
  }
}

uint64_t
sg_plan_value_offset (const SgPlan *plan, const SgPlanValue *v, const int32_t *group_rank)
{
  g_return_val_if_fail (plan && v, 0);
  if (v->roll_block == 0)
    return v->offset;
  g_return_val_if_fail (group_rank && v->roll_group >= 0 && v->roll_group < plan->n_groups,
                        v->offset);
  const int64_t k = plan->groups[v->roll_group].n_ranks;
  return v->offset
         + v->roll_block
             * (uint64_t)sg_rank_roll_block (0, k, v->roll_shift, v->roll_sign,
                                             group_rank[v->roll_group]);
}

void
sg_plan_group_ranks (const SgPlan *plan, int32_t rank, int32_t *out)
{
  g_return_if_fail (plan && out);
  for (int32_t g = 0; g < plan->n_groups; g++) {
    const SgPlanGroup *gr = &plan->groups[g];
    out[g] = -1;
    for (int32_t j = 0; j < gr->n_ranks * gr->n_instances && out[g] < 0; j++)
      if (gr->partition[j] == rank)
        out[g] = j % gr->n_ranks;
  }
}

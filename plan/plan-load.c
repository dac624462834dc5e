/* plan-load.c: reads a plan file back into an SgPlan (plan.h).
 *
 * Mirrors: graph/'s loader discipline: every field checked for presence,
 * type and range, messages that name the field and its index.
 * Requires: nothing.
 * Invalidates: nothing.
 *
 * Order of checks: the text parses (else PARSE, "truncated" when the parser
 * ran off the end); format and version (VERSION); every field (INVALID);
 * the hash of the canonical text rebuilt from what was read (HASH); the
 * structural rules of sg_plan_validate() (INVALID).
 */
#include "plan-private.h"

#include "textio.h"

#include <inttypes.h>
#include <string.h>


typedef struct {
  const char *name;
  GError **error;
  SgPlan *p; /* the plan being read (its strings) */
} Loader;

static bool G_GNUC_PRINTF (2, 3) fail (Loader *l, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (l->error, SG_PLAN_ERROR, SG_PLAN_ERROR_INVALID, "plan %s: %s", l->name, msg);
  return false;
}

/* "ins[3].event" or "world_size" */
static char *
where (const char *sec, int64_t idx, const char *key)
{
  if (idx < 0)
    return g_strdup_printf ("%s%s%s", sec, key ? "." : "", key ? key : "");
  return g_strdup_printf ("%s[%" PRId64 "]%s%s", sec, idx, key ? "." : "", key ? key : "");
}

/* @key inside @sec[@idx]; a top-level field is @sec itself (key NULL). */
static const cJSON *
field (Loader *l, const cJSON *obj, const char *sec, int64_t idx, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (obj, key ? key : sec);
  if (!v) {
    g_autofree char *w = where (sec, idx, key);
    fail (l, "%s: missing", w);
  }
  return v;
}

static bool
as_int (Loader *l, const cJSON *v, const char *sec, int64_t idx, const char *key, int64_t min,
        int64_t max, int64_t *out)
{
  if (!cJSON_IsNumber (v) || v->valuedouble != floor (v->valuedouble) ||
      fabs (v->valuedouble) > SG_PLAN_MAX_INT || v->valuedouble < (double)min ||
      v->valuedouble > (double)max) {
    g_autofree char *w = where (sec, idx, key);
    fail (l, "%s: expected an integer in [%" PRId64 ", %" PRId64 "]", w, min, max);
    return false; /* spelled out: the callers' outputs are set whenever this is true */
  }
  *out = (int64_t)v->valuedouble;
  return true;
}

static bool
get_int (Loader *l, const cJSON *obj, const char *sec, int64_t idx, const char *key, int64_t min,
         int64_t max, int64_t *out)
{
  const cJSON *v = field (l, obj, sec, idx, key);
  return v && as_int (l, v, sec, idx, key, min, max, out);
}

static bool
get_i32 (Loader *l, const cJSON *obj, const char *sec, int64_t idx, const char *key, int64_t min,
         int32_t *out)
{
  int64_t x;
  if (!get_int (l, obj, sec, idx, key, min, INT32_MAX, &x))
    return false;
  *out = (int32_t)x;
  return true;
}

static bool
get_u64 (Loader *l, const cJSON *obj, const char *sec, int64_t idx, const char *key,
         uint64_t *out)
{
  int64_t x;
  if (!get_int (l, obj, sec, idx, key, 0, (int64_t)SG_PLAN_MAX_INT, &x))
    return false;
  *out = (uint64_t)x;
  return true;
}

static bool
get_us (Loader *l, const cJSON *obj, const char *sec, int64_t idx, const char *key, double *out)
{
  const cJSON *v = field (l, obj, sec, idx, key);
  if (!v)
    return false;
  if (!cJSON_IsNumber (v) || !isfinite (v->valuedouble)) {
    g_autofree char *w = where (sec, idx, key);
    return fail (l, "%s: expected a number of microseconds", w);
  }
  *out = v->valuedouble;
  return true;
}

static const char *
get_str (Loader *l, const cJSON *obj, const char *sec, int64_t idx, const char *key)
{
  const cJSON *v = field (l, obj, sec, idx, key);
  if (v && !cJSON_IsString (v)) {
    g_autofree char *w = where (sec, idx, key);
    fail (l, "%s: expected a string", w);
    return NULL;
  }
  return v ? v->valuestring : NULL;
}

static const cJSON *
get_array (Loader *l, const cJSON *obj, const char *sec, int64_t idx, const char *key, int *n)
{
  const cJSON *v = field (l, obj, sec, idx, key);
  if (v && !cJSON_IsArray (v)) {
    g_autofree char *w = where (sec, idx, key);
    fail (l, "%s: expected a list", w);
    return NULL;
  }
  if (v)
    *n = cJSON_GetArraySize (v);
  return v;
}

/* A list of integers >= @min into a new array. */
static bool
get_ids (Loader *l, const cJSON *obj, const char *sec, int64_t idx, const char *key, int64_t min,
         int32_t **out, int32_t *n_out)
{
  int n = 0;
  const cJSON *a = get_array (l, obj, sec, idx, key, &n);
  if (!a)
    return false;
  int32_t *v = g_new (int32_t, (size_t)n + 1);
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach (e, a)
  {
    int64_t x;
    if (!cJSON_IsNumber (e) || e->valuedouble < (double)min || e->valuedouble > INT32_MAX ||
        e->valuedouble != floor (e->valuedouble)) {
      g_autofree char *w = where (sec, idx, key);
      fail (l, "%s[%d]: expected an integer in [%" PRId64 ", %d]", w, i, min, INT32_MAX);
      g_free (v);
      return false;
    }
    x = (int64_t)e->valuedouble;
    v[i++] = (int32_t)x;
  }
  *out = v;
  *n_out = n;
  return true;
}

static bool
get_dims (Loader *l, const cJSON *obj, int64_t idx, const char *key, int64_t *out, int32_t *ndim)
{
  int n = 0;
  const cJSON *a = get_array (l, obj, "values", idx, key, &n);
  if (!a)
    return false;
  if (n > SG_PLAN_MAX_DIMS) {
    g_autofree char *w = where ("values", idx, key);
    return fail (l, "%s: %d dimensions, at most %d", w, n, SG_PLAN_MAX_DIMS);
  }
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach (e, a)
  {
    if (!cJSON_IsNumber (e) || e->valuedouble < 0 || e->valuedouble > SG_PLAN_MAX_INT ||
        e->valuedouble != floor (e->valuedouble)) {
      g_autofree char *w = where ("values", idx, key);
      return fail (l, "%s[%d]: expected a non-negative integer", w, i);
    }
    out[i++] = (int64_t)e->valuedouble;
  }
  *ndim = n;
  return true;
}

static bool
get_dtype (Loader *l, const cJSON *obj, const char *sec, int64_t idx, SgDtype *out)
{
  const char *s = get_str (l, obj, sec, idx, "dtype");
  if (!s)
    return false;
  *out = sg_dtype_from_name (s);
  if (*out == SG_DTYPE_INVALID) {
    g_autofree char *w = where (sec, idx, "dtype");
    return fail (l, "%s: unknown dtype \"%s\"", w, s);
  }
  return true;
}

static bool
load_groups (Loader *l, const cJSON *root, SgPlan *p)
{
  int n = 0;
  const cJSON *a = get_array (l, root, "groups", -1, NULL, &n);
  if (!a)
    return false;
  p->groups = g_new0 (SgPlanGroup, (size_t)n + 1);
  const cJSON *e;
  cJSON_ArrayForEach (e, a)
  {
    int i = p->n_groups;
    SgPlanGroup *gr = &p->groups[i];
    p->n_groups++;
    const char *name = get_str (l, e, "groups", i, "name");
    if (!name)
      return false;
    gr->name = g_strdup (name);
    int32_t np = 0;
    if (!get_i32 (l, e, "groups", i, "n_ranks", 1, &gr->n_ranks) ||
        !get_i32 (l, e, "groups", i, "n_instances", 1, &gr->n_instances) ||
        !get_ids (l, e, "groups", i, "partition", 0, &gr->partition, &np))
      return false;
    if ((int64_t)gr->n_ranks * gr->n_instances != np)
      return fail (l, "groups[%d].partition: %d ranks, expected n_ranks x n_instances = %" PRId64,
                   i, np, (int64_t)gr->n_ranks * gr->n_instances);
  }
  return true;
}

static bool
load_buffers (Loader *l, const cJSON *root, SgPlan *p)
{
  int n = 0;
  const cJSON *a = get_array (l, root, "buffers", -1, NULL, &n);
  if (!a)
    return false;
  p->buffers = g_new0 (SgPlanBuffer, (size_t)n + 1);
  const cJSON *e;
  cJSON_ArrayForEach (e, a)
  {
    int i = p->n_buffers++;
    SgPlanBuffer *b = &p->buffers[i];
    if (!get_u64 (l, e, "buffers", i, "offset", &b->offset) ||
        !get_u64 (l, e, "buffers", i, "bytes", &b->bytes) ||
        !get_i32 (l, e, "buffers", i, "first", 0, &b->first_ins) ||
        !get_i32 (l, e, "buffers", i, "last", 0, &b->last_ins))
      return false;
  }
  return true;
}

static bool
load_values (Loader *l, const cJSON *root, SgPlan *p)
{
  int n = 0;
  const cJSON *a = get_array (l, root, "values", -1, NULL, &n);
  if (!a)
    return false;
  p->values = g_new0 (SgPlanValue, (size_t)n + 1);
  const cJSON *e;
  cJSON_ArrayForEach (e, a)
  {
    int i = p->n_values++;
    SgPlanValue *v = &p->values[i];
    const char *name = get_str (l, e, "values", i, "name");
    if (!name)
      return false;
    v->name = sg_plan_str (l->p, name, false);
    int32_t nd = 0, nd2 = 0;
    int64_t shape[SG_PLAN_MAX_DIMS], stride[SG_PLAN_MAX_DIMS];
    if (!get_i32 (l, e, "values", i, "buffer", -1, &v->buffer) ||
        !get_u64 (l, e, "values", i, "offset", &v->offset) ||
        !get_dtype (l, e, "values", i, &v->dtype) ||
        !get_dims (l, e, i, "shape", shape, &nd) ||
        !get_dims (l, e, i, "stride", stride, &nd2))
      return false;
    if (nd2 != nd)
      return fail (l, "values[%d].stride: %d entries for a %d-d shape", i, nd2, nd);
    sg_plan_value_set_dims (p, v, nd, shape, stride);
    /* optional: written only when set (docs/plan-format.md, "roll") */
    const cJSON *roll = cJSON_GetObjectItemCaseSensitive (e, "roll");
    if (roll) {
      static const char *const keys[4] = { "group", "shift", "sign", "block" };
      static const int64_t lo[4] = { 0, -(int64_t)SG_PLAN_MAX_INT, -1, 1 };
      static const int64_t hi[4] = { INT32_MAX, (int64_t)SG_PLAN_MAX_INT, 1,
                                     (int64_t)SG_PLAN_MAX_INT };
      int64_t x[4];
      if (!cJSON_IsObject (roll))
        return fail (l, "values[%d].roll: expected an object", i);
      for (int k = 0; k < 4; k++) {
        g_autofree char *key = g_strconcat ("roll.", keys[k], NULL);
        const cJSON *f = cJSON_GetObjectItemCaseSensitive (roll, keys[k]);
        if (!f)
          return fail (l, "values[%d].%s: missing", i, key);
        if (!as_int (l, f, "values", i, key, lo[k], hi[k], &x[k]))
          return false;
      }
      if (x[2] == 0)
        return fail (l, "values[%d].roll.sign: 1 or -1", i);
      v->roll_group = (int32_t)x[0];
      v->roll_shift = x[1];
      v->roll_sign = (int32_t)x[2];
      v->roll_block = (uint64_t)x[3];
    }
    const char *init = get_str (l, e, "values", i, "init");
    if (!init)
      return false;
    if (strcmp (init, "input") == 0)
      v->init = SG_INIT_INPUT;
    else if (strcmp (init, "none") == 0)
      v->init = SG_INIT_NONE;
    else
      return fail (l, "values[%d].init: \"%s\", expected \"input\" or \"none\"", i, init);
  }
  return true;
}

static bool
load_op (Loader *l, const cJSON *e, int i, SgOpKind *op)
{
  const char *s = get_str (l, e, "ins", i, "op");
  if (!s)
    return false;
  if (!sg_plan_op_from_name (s, op))
    return fail (l, "ins[%d].op: unknown op \"%s\"", i, s);
  return true;
}

/* collective_permute's transport and pairs (ranges: sg_plan_validate). */
static bool
load_permute (Loader *l, const cJSON *e, int i, SgPlanIns *in)
{
  const char *tr = get_str (l, e, "ins", i, "transport");
  if (!tr)
    return false;
  if (!sg_transport_from_name (tr, &in->transport))
    return fail (l, "ins[%d].transport: unknown transport \"%s\" (nccl, ce)", i, tr);
  int n = 0;
  const cJSON *pairs = get_array (l, e, "ins", i, "pairs", &n);
  if (!pairs)
    return false;
  in->pairs = g_new0 (int32_t, 2 * (size_t)n + 1);
  const cJSON *p;
  cJSON_ArrayForEach (p, pairs)
  {
    int64_t s, t;
    const int k = in->n_pairs;
    if (!cJSON_IsArray (p) || cJSON_GetArraySize (p) != 2)
      return fail (l, "ins[%d].pairs[%d]: expected [source, target] group ranks", i, k);
    if (!as_int (l, cJSON_GetArrayItem (p, 0), "ins", i, "pairs", 0, INT32_MAX, &s) ||
        !as_int (l, cJSON_GetArrayItem (p, 1), "ins", i, "pairs", 0, INT32_MAX, &t))
      return false;
    in->pairs[2 * k] = (int32_t)s;
    in->pairs[2 * k + 1] = (int32_t)t;
    in->n_pairs++;
  }
  return true;
}

static bool
load_one_ins (Loader *l, const cJSON *e, int i, SgPlanIns *in)
{
  in->group = in->event = in->coll = in->buffer = -1;
  in->est_us = in->pred_start_us = in->pred_end_us = in->pred_exposed_us = -1;
  const char *kind = get_str (l, e, "ins", i, "kind");
  if (!kind)
    return false;
  if (!sg_plan_ins_kind_from_name (kind, &in->kind))
    return fail (l, "ins[%d].kind: unknown instruction \"%s\"", i, kind);
  if (!get_i32 (l, e, "ins", i, "stream", 0, &in->stream))
    return false;
  const cJSON *name = cJSON_GetObjectItemCaseSensitive (e, "name");
  if (name) {
    if (!cJSON_IsString (name))
      return fail (l, "ins[%d].name: expected a string", i);
    in->name = sg_plan_str (l->p, name->valuestring, false);
  }
  switch (in->kind) {
  case SG_INS_KERNEL:
  case SG_INS_COLLECTIVE:
    if (!load_op (l, e, i, &in->op) || !get_ids (l, e, "ins", i, "in", -1, &in->in, &in->n_in) ||
        !get_ids (l, e, "ins", i, "out", -1, &in->out, &in->n_out) ||
        !get_us (l, e, "ins", i, "est_us", &in->est_us) ||
        !get_us (l, e, "ins", i, "pred_start_us", &in->pred_start_us) ||
        !get_us (l, e, "ins", i, "pred_end_us", &in->pred_end_us))
      return false;
    break;
  case SG_INS_RECORD:
    return get_i32 (l, e, "ins", i, "event", 0, &in->event);
  case SG_INS_WAIT_EVENT:
    return get_i32 (l, e, "ins", i, "event", 0, &in->event) &&
           get_i32 (l, e, "ins", i, "coll", -1, &in->coll);
  case SG_INS_FREE:
    return get_i32 (l, e, "ins", i, "buffer", 0, &in->buffer);
  }
  const cJSON *args = field (l, e, "ins", i, "args");
  const cJSON *kwargs = args ? field (l, e, "ins", i, "kwargs") : NULL;
  if (!args || !kwargs)
    return false;
  if (!cJSON_IsArray (args))
    return fail (l, "ins[%d].args: expected a list", i);
  if (!cJSON_IsObject (kwargs))
    return fail (l, "ins[%d].kwargs: expected an object", i);
  in->args = cJSON_Duplicate (args, true);
  in->kwargs = cJSON_Duplicate (kwargs, true);
  if (in->kind == SG_INS_KERNEL) {
    const char *target = get_str (l, e, "ins", i, "target");
    if (!target)
      return false;
    in->target = sg_plan_str (l->p, target, true);
    /* optional: written only when set, so 0 is not a valid value */
    const cJSON *sm = cJSON_GetObjectItemCaseSensitive (e, "sm_count");
    int64_t v = 0;
    if (sm && !as_int (l, sm, "ins", i, "sm_count", 1, INT32_MAX, &v))
      return false;
    in->sm_count = (int32_t)v;
    return true;
  }
  const char *reduce = NULL;
  int n_members = 0;
  const cJSON *members = NULL;
  if (!get_i32 (l, e, "ins", i, "group", 0, &in->group) ||
      !get_int (l, e, "ins", i, "count", 0, (int64_t)SG_PLAN_MAX_INT, &in->count) ||
      !get_dtype (l, e, "ins", i, &in->dtype) ||
      !(reduce = get_str (l, e, "ins", i, "reduce")) ||
      !get_us (l, e, "ins", i, "pred_exposed_us", &in->pred_exposed_us) ||
      !(members = get_array (l, e, "ins", i, "members", &n_members)))
    return false;
  if (strcmp (reduce, "none") == 0)
    in->reduce = SG_REDUCE_NONE;
  else if (!sg_reduce_from_name (reduce, &in->reduce))
    return fail (l, "ins[%d].reduce: unknown reduce op \"%s\"", i, reduce);
  in->members = g_new0 (char *, (size_t)n_members + 1);
  const cJSON *m;
  cJSON_ArrayForEach (m, members)
  {
    if (!cJSON_IsString (m))
      return fail (l, "ins[%d].members[%d]: expected a node name", i, in->n_members);
    in->members[in->n_members++] = g_strdup (m->valuestring);
  }
  return in->op != SG_OP_COLLECTIVE_PERMUTE || load_permute (l, e, i, in);
}

static bool
load_pred (Loader *l, const cJSON *root, SgPlan *p)
{
  const cJSON *o = field (l, root, "pred", -1, NULL);
  if (!o)
    return false;
  if (!cJSON_IsObject (o))
    return fail (l, "pred: expected an object");
  SgPlanPrediction *pr = &p->pred;
  return get_us (l, o, "pred", -1, "step_us", &pr->step_us) &&
         get_us (l, o, "pred", -1, "compute_us", &pr->compute_us) &&
         get_us (l, o, "pred", -1, "comm_us", &pr->comm_us) &&
         get_us (l, o, "pred", -1, "exposed_us", &pr->exposed_us) &&
         get_us (l, o, "pred", -1, "lower_bound_us", &pr->lower_bound_us) &&
         get_u64 (l, o, "pred", -1, "peak_bytes", &pr->peak_bytes) &&
         get_i32 (l, o, "pred", -1, "collectives", 0, &pr->collectives) &&
         get_i32 (l, o, "pred", -1, "hidden", 0, &pr->hidden) &&
         get_i32 (l, o, "pred", -1, "partial", 0, &pr->partial) &&
         get_i32 (l, o, "pred", -1, "exposed", 0, &pr->exposed);
}

static bool
load_root (Loader *l, const cJSON *root, SgPlan *p, uint64_t *file_hash)
{
  const char *hash = get_str (l, root, "hash", -1, NULL);
  if (!hash)
    return false;
  if (strlen (hash) != 16 || strspn (hash, "0123456789abcdef") != 16)
    return fail (l, "hash: \"%s\" is not 16 lower-case hex digits", hash);
  *file_hash = g_ascii_strtoull (hash, NULL, 16);
  const char *graph = get_str (l, root, "graph", -1, NULL);
  const char *options = graph ? get_str (l, root, "options", -1, NULL) : NULL;
  if (!graph || !options)
    return false;
  p->graph = g_strdup (graph);
  p->options = g_strdup (options);
  if (!get_i32 (l, root, "world_size", -1, NULL, 1, &p->world_size) ||
      !get_i32 (l, root, "n_streams", -1, NULL, 1, &p->n_streams) ||
      !get_i32 (l, root, "n_events", -1, NULL, 0, &p->n_events) ||
      !get_u64 (l, root, "arena_bytes", -1, NULL, &p->arena_bytes) || !load_groups (l, root, p) ||
      !load_buffers (l, root, p) || !load_values (l, root, p) ||
      !get_ids (l, root, "inputs", -1, NULL, 0, &p->inputs, &p->n_inputs) ||
      !get_ids (l, root, "outputs", -1, NULL, -1, &p->outputs, &p->n_outputs))
    return false;
  int n = 0;
  const cJSON *a = get_array (l, root, "ins", -1, NULL, &n);
  if (!a)
    return false;
  p->ins = g_new0 (SgPlanIns, (size_t)n + 1);
  const cJSON *e;
  cJSON_ArrayForEach (e, a)
  {
    int i = p->n_ins++;
    if (!cJSON_IsObject (e))
      return fail (l, "ins[%d]: expected an object", i);
    if (!load_one_ins (l, e, i, &p->ins[i]))
      return false;
  }
  return load_pred (l, root, p);
}

SgPlan *
sg_plan_load_data (const char *data, size_t len, const char *name, GError **error)
{
  g_return_val_if_fail (data != NULL || len == 0, NULL);
  if (!name)
    name = "<memory>";
  GError *je = NULL;
  cJSON *root = sg_json_parse (data, len, &je);
  if (!root) {
    bool cut = g_error_matches (je, SG_JSON_ERROR, SG_JSON_ERROR_TRUNCATED);
    g_set_error (error, SG_PLAN_ERROR, SG_PLAN_ERROR_PARSE, "plan %s: %s%s", name,
                 cut ? "" : "corrupt: ", je->message);
    g_error_free (je);
    return NULL;
  }
  SgPlan *p = NULL;
  if (!cJSON_IsObject (root)) {
    g_set_error (error, SG_PLAN_ERROR, SG_PLAN_ERROR_VERSION,
                 "plan %s: not a schedgraph plan (the top level is not an object)", name);
    goto out;
  }
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive (root, "format");
  if (!cJSON_IsString (fmt) || strcmp (fmt->valuestring, SG_PLAN_FORMAT) != 0) {
    g_set_error (error, SG_PLAN_ERROR, SG_PLAN_ERROR_VERSION,
                 "plan %s: not a schedgraph plan (format is %s%s%s, expected \"" SG_PLAN_FORMAT
                 "\")",
                 name, cJSON_IsString (fmt) ? "\"" : "",
                 cJSON_IsString (fmt) ? fmt->valuestring : "missing",
                 cJSON_IsString (fmt) ? "\"" : "");
    goto out;
  }
  const cJSON *ver = cJSON_GetObjectItemCaseSensitive (root, "version");
  if (!cJSON_IsNumber (ver) || ver->valuedouble != SG_PLAN_VERSION) {
    if (cJSON_IsNumber (ver))
      g_set_error (error, SG_PLAN_ERROR, SG_PLAN_ERROR_VERSION,
                   "plan %s: plan version %g, this build reads version %d: regenerate the plan "
                   "with this schedgraph",
                   name, ver->valuedouble, SG_PLAN_VERSION);
    else
      g_set_error (error, SG_PLAN_ERROR, SG_PLAN_ERROR_VERSION,
                   "plan %s: version: missing or not a number (this build reads version %d)",
                   name, SG_PLAN_VERSION);
    goto out;
  }
  uint64_t file_hash = 0;
  p = sg_plan_new ();
  Loader l = { name, error, p };
  if (!load_root (&l, root, p, &file_hash))
    goto fail;
  g_free (sg_plan_to_json (p, NULL));
  if (p->hash != file_hash) {
    g_set_error (error, SG_PLAN_ERROR, SG_PLAN_ERROR_HASH,
                 "plan %s: content hash mismatch: the file says %016" PRIx64
                 ", its content hashes to %016" PRIx64 " (corrupted or edited)",
                 name, file_hash, p->hash);
    goto fail;
  }
  GError *e = NULL;
  if (!sg_plan_validate (p, &e)) {
    g_set_error (error, SG_PLAN_ERROR, SG_PLAN_ERROR_INVALID, "plan %s: %s", name, e->message);
    g_error_free (e);
    goto fail;
  }
  goto out;
fail:
  sg_plan_free (p);
  p = NULL;
out:
  cJSON_Delete (root);
  return p;
}

SgPlan *
sg_plan_load (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  g_autofree char *data = NULL;
  size_t len = 0;
  GError *e = NULL;
  if (!g_file_get_contents (path, &data, &len, &e)) {
    g_set_error (error, SG_PLAN_ERROR, SG_PLAN_ERROR_IO, "cannot read plan %s: %s", path,
                 e->message);
    g_error_free (e);
    return NULL;
  }
  return sg_plan_load_data (data, len, path, error);
}

/* profile.c: measured times (docs/profile-format.md): load, check, look up.
 *
 * Version 1 or 2 (2 adds the `contention` section: raw in-place
 * measurements of collectives beside kernels, kept as samples for
 * contention.c). Entries are grouped in families (gemm: op x dtype; attention: op x dtype
 * x causal; collectives: kind x group size x nodes; ops: target), each
 * sorted by size (flops or bytes). A lookup is an exact key match, else a
 * log-log interpolation in size between the neighbouring measured sizes,
 * linear scaling above the largest, and no answer below the smallest.
 *
 * Requires: nothing. Invalidates: nothing.
 */
#include "estimate-private.h"
#include "textio.h"

#include <math.h>
#include <string.h>

#define PROFILE_FORMAT "schedgraph.profile"
#define PROFILE_VERSION 2 /* the newest read; version 1 has no contention section */
#define KEY_LEN 6

typedef struct {
  int64_t key[KEY_LEN]; /* exact key within the family */
  double x;             /* size: flops or bytes */
  double us;
  int index;            /* position in its JSON array, for messages */
} Entry;

typedef enum { FAM_GEMM, FAM_ATTENTION, FAM_COLL, FAM_OPS, FAM_N } FamKind;
static const char *const fam_names[FAM_N] = { "gemm", "attention", "collectives", "ops" };

typedef struct {
  FamKind kind;
  int64_t fkey[3]; /* op/kind, dtype/group size, causal/nodes */
  char *target;    /* ops only */
  GArray *entries; /* Entry, sorted by (x, key) */
  double *xs, *ys; /* distinct sizes and their (geometric mean) times */
  size_t n_xs;
} Family;

struct SgProfile {
  char *device;
  GPtrArray *families; /* Family *, file order of first appearance */
  GArray *contention;  /* SgContentionSample, file order */
};

static void
family_free (gpointer p)
{
  Family *f = p;
  g_array_unref (f->entries);
  g_free (f->target);
  g_free (f->xs);
  g_free (f->ys);
  g_free (f);
}

void
sg_profile_free (SgProfile *p)
{
  if (!p)
    return;
  g_ptr_array_unref (p->families);
  for (guint i = 0; i < p->contention->len; i++)
    sg_contention_sample_clear (&g_array_index (p->contention, SgContentionSample, i));
  g_array_unref (p->contention);
  g_free (p->device);
  g_free (p);
}

const char *
sg_profile_device (const SgProfile *p)
{
  return p->device ? p->device : "";
}

const SgContentionSample *
sg_profile_contention (const SgProfile *p, size_t *n)
{
  *n = p->contention->len;
  return (const SgContentionSample *)(const void *)p->contention->data;
}

bool
sg_interp_loglog (const double *xs, const double *ys, size_t n, double x, double *y)
{
  if (n == 0 || !(x >= xs[0]))
    return false;
  size_t lo = 0, hi = n; /* last index with xs[i] <= x */
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (xs[mid] <= x)
      lo = mid;
    else
      hi = mid;
  }
  if (xs[lo] == x) {
    *y = ys[lo];
  } else if (lo == n - 1) {
    *y = ys[lo] * (x / xs[lo]);
  } else {
    double t = (log (x) - log (xs[lo])) / (log (xs[lo + 1]) - log (xs[lo]));
    *y = exp (log (ys[lo]) + t * (log (ys[lo + 1]) - log (ys[lo])));
  }
  return true;
}

/* --- loading ------------------------------------------------------------ */

typedef struct {
  const char *file;
  const char *array;
  int index;
  GError **error;
} Ctx;

static gboolean
bad (const Ctx *c, const char *field, const char *fmt, ...) G_GNUC_PRINTF (3, 4);

static gboolean
bad (const Ctx *c, const char *field, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (c->array)
    g_set_error (c->error, SG_ESTIMATE_ERROR, SG_ESTIMATE_ERROR_PROFILE, "%s: %s[%d].%s: %s",
                 c->file, c->array, c->index, field, msg);
  else
    g_set_error (c->error, SG_ESTIMATE_ERROR, SG_ESTIMATE_ERROR_PROFILE, "%s: %s: %s", c->file,
                 field, msg);
  return FALSE;
}

/* An integer field >= @min; @def when absent (or required when def < 0). */
static bool
get_int (const Ctx *c, const cJSON *o, const char *k, int64_t def, int64_t min, int64_t *out)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (o, k);
  if (!v) {
    if (def < 0)
      return bad (c, k, "missing");
    *out = def;
    return true;
  }
  if (!cJSON_IsNumber (v) || !isfinite (v->valuedouble) ||
      v->valuedouble != floor (v->valuedouble) || fabs (v->valuedouble) > 9.0e15)
    return bad (c, k, "expected an integer");
  if (v->valuedouble < (double)min)
    return bad (c, k, "%.0f is below the minimum %" G_GINT64_FORMAT, v->valuedouble, min);
  *out = (int64_t)v->valuedouble;
  return true;
}

/* A time in microseconds: > 0, or >= 0 with @zero_ok; @def when absent
 * (required when def < 0). */
static bool
get_time (const Ctx *c, const cJSON *o, const char *k, bool zero_ok, double def, double *out)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (o, k);
  if (!v) {
    if (def < 0)
      return bad (c, k, "missing");
    *out = def;
    return true;
  }
  if (!cJSON_IsNumber (v) || !isfinite (v->valuedouble)
      || !(zero_ok ? v->valuedouble >= 0 : v->valuedouble > 0))
    return bad (c, k, "expected a %s time in microseconds", zero_ok ? "non-negative" : "positive");
  *out = v->valuedouble;
  return true;
}

static bool
get_us (const Ctx *c, const cJSON *o, double *out)
{
  return get_time (c, o, "us", false, -1, out);
}

static const char *
get_str (const Ctx *c, const cJSON *o, const char *k, bool required, bool *ok)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (o, k);
  *ok = true;
  if (!v) {
    if (required)
      *ok = bad (c, k, "missing");
    return NULL;
  }
  if (!cJSON_IsString (v))
    *ok = bad (c, k, "expected a string");
  return *ok ? v->valuestring : NULL;
}

static bool
get_dtype (const Ctx *c, const cJSON *o, bool required, SgDtype *out)
{
  bool ok;
  const char *s = get_str (c, o, "dtype", required, &ok);
  if (!ok)
    return false;
  *out = SG_DTYPE_INVALID;
  if (s && (*out = sg_dtype_from_name (s)) == SG_DTYPE_INVALID)
    return bad (c, "dtype", "unknown dtype \"%s\"", s);
  return true;
}

static bool
get_kind (const Ctx *c, const cJSON *o, const char *k, SgOpClass klass, SgOpKind *out)
{
  bool ok;
  const char *s = get_str (c, o, k, true, &ok);
  if (!ok)
    return false;
  for (int i = 0; i < SG_OP_N_KINDS; i++)
    if (sg_op_class ((SgOpKind)i) == klass && strcmp (sg_op_name ((SgOpKind)i), s) == 0) {
      *out = (SgOpKind)i;
      return true;
    }
  return bad (c, k, "unknown %s \"%s\"",
              klass == SG_CLASS_MATMUL      ? "matmul op (mm, addmm, bmm, baddbmm)"
              : klass == SG_CLASS_ATTENTION ? "attention op (sdpa_flash, sdpa_cudnn_backward, ...)"
                                            : "collective kind",
              s);
}

static Family *
family_get (SgProfile *p, FamKind kind, const int64_t fkey[3], const char *target)
{
  for (guint i = 0; i < p->families->len; i++) {
    Family *f = p->families->pdata[i];
    if (f->kind == kind && memcmp (f->fkey, fkey, sizeof f->fkey) == 0 &&
        g_strcmp0 (f->target, target) == 0)
      return f;
  }
  Family *f = g_new0 (Family, 1);
  f->kind = kind;
  memcpy (f->fkey, fkey, sizeof f->fkey);
  f->target = g_strdup (target);
  f->entries = g_array_new (FALSE, FALSE, sizeof (Entry));
  g_ptr_array_add (p->families, f);
  return f;
}

static bool
parse_entry (SgProfile *p, FamKind fk, const cJSON *o, const Ctx *c)
{
  if (!cJSON_IsObject (o))
    return bad (c, "", "expected an object");
  int64_t fkey[3] = { 0, 0, 0 };
  Entry e = { .index = c->index };
  const char *target = NULL;
  SgOpKind kind;
  SgDtype dtype;
  switch (fk) {
  case FAM_GEMM: {
    int64_t b, m, n, k;
    if (!get_kind (c, o, "op", SG_CLASS_MATMUL, &kind) || !get_dtype (c, o, true, &dtype) ||
        !get_int (c, o, "m", -1, 1, &m) || !get_int (c, o, "n", -1, 1, &n) ||
        !get_int (c, o, "k", -1, 1, &k) || !get_int (c, o, "batch", 1, 1, &b))
      return false;
    fkey[0] = kind;
    fkey[1] = dtype;
    int64_t key[KEY_LEN] = { b, m, n, k, 0, 0 };
    memcpy (e.key, key, sizeof key);
    e.x = 2.0 * (double)b * (double)m * (double)n * (double)k;
    break;
  }
  case FAM_ATTENTION: {
    int64_t b, h, sq, skv, d;
    const cJSON *cv = cJSON_GetObjectItemCaseSensitive (o, "causal");
    if (!get_kind (c, o, "op", SG_CLASS_ATTENTION, &kind) || !get_dtype (c, o, true, &dtype) ||
        !get_int (c, o, "batch", -1, 1, &b) || !get_int (c, o, "heads", -1, 1, &h) ||
        !get_int (c, o, "seq_q", -1, 1, &sq) || !get_int (c, o, "seq_kv", -1, 1, &skv) ||
        !get_int (c, o, "head_dim", -1, 1, &d))
      return false;
    if (cv && !cJSON_IsBool (cv))
      return bad (c, "causal", "expected true or false");
    bool causal = cJSON_IsTrue (cv);
    fkey[0] = kind;
    fkey[1] = dtype;
    fkey[2] = causal;
    int64_t key[KEY_LEN] = { b, h, sq, skv, d, 0 };
    memcpy (e.key, key, sizeof key);
    e.x = 4.0 * (double)b * (double)h * (double)sq * (double)skv * (double)d * (causal ? 0.5 : 1);
    if (kind == SG_OP_SDPA_FLASH_BWD || kind == SG_OP_SDPA_EFFICIENT_BWD ||
        kind == SG_OP_SDPA_CUDNN_BWD)
      e.x *= 2.5;
    break;
  }
  case FAM_COLL: {
    int64_t bytes, gs, nodes;
    if (!get_kind (c, o, "kind", SG_CLASS_COLLECTIVE, &kind) || !get_dtype (c, o, false, &dtype) ||
        !get_int (c, o, "bytes", -1, 1, &bytes) || !get_int (c, o, "group_size", -1, 2, &gs) ||
        !get_int (c, o, "nodes", 1, 1, &nodes))
      return false;
    if (nodes > gs)
      return bad (c, "nodes", "%" G_GINT64_FORMAT " nodes for a group of %" G_GINT64_FORMAT,
                  nodes, gs);
    fkey[0] = kind;
    fkey[1] = gs;
    fkey[2] = nodes;
    e.x = (double)bytes;
    break;
  }
  case FAM_OPS: {
    bool ok;
    int64_t bytes;
    target = get_str (c, o, "target", true, &ok);
    if (!ok || !get_int (c, o, "bytes", -1, 0, &bytes))
      return false;
    if (!*target)
      return bad (c, "target", "empty");
    e.x = (double)bytes;
    break;
  }
  default:
    g_assert_not_reached ();
  }
  if (!get_us (c, o, &e.us))
    return false;
  g_array_append_val (family_get (p, fk, fkey, target)->entries, e);
  return true;
}

#define MAX_REPS 1024

/* A `contention` entry (version 2): one in-place measurement, kept raw. */
static bool
parse_contention (SgProfile *p, const cJSON *o, const Ctx *c)
{
  if (!cJSON_IsObject (o))
    return bad (c, "", "expected an object");
  SgContentionSample s = { .index = c->index };
  int64_t bytes, gs, nodes, rpr;
  bool ok;
  const char *tr, *kc, *key, *order;
  if (!get_kind (c, o, "kind", SG_CLASS_COLLECTIVE, &s.kind)
      || !get_int (c, o, "bytes", -1, 1, &bytes) || !get_int (c, o, "group_size", -1, 2, &gs)
      || !get_int (c, o, "nodes", 1, 1, &nodes) || !get_int (c, o, "runs_per_rep", 1, 1, &rpr))
    return false;
  if (nodes > gs)
    return bad (c, "nodes", "%" G_GINT64_FORMAT " nodes for a group of %" G_GINT64_FORMAT, nodes,
                gs);
  if (!(tr = get_str (c, o, "transport", false, &ok), ok))
    return false;
  if (tr && !sg_transport_from_name (tr, &s.transport))
    return bad (c, "transport", "unknown transport \"%s\" (nccl, ce)", tr);
  if (!(kc = get_str (c, o, "kernel", true, &ok), ok))
    return false;
  if (!sg_kernel_class_from_name (kc, &s.klass))
    return bad (c, "kernel", "unknown kernel class \"%s\" (gemm, attention, attention_backward, "
                "map, reduction, gemm_sm)", kc);
  if (!(key = get_str (c, o, "kernel_key", true, &ok), ok))
    return false;
  if (!*key)
    return bad (c, "kernel_key", "empty");
  if (!(order = get_str (c, o, "order", true, &ok), ok))
    return false;
  if (strcmp (order, "comm_first") != 0 && strcmp (order, "kernel_first") != 0)
    return bad (c, "order", "\"%s\" is neither comm_first nor kernel_first", order);
  if (!get_time (c, o, "comm_solo_us", false, -1, &s.comm_solo_us)
      || !get_time (c, o, "rep_solo_us", false, -1, &s.rep_solo_us)
      || !get_time (c, o, "lag_us", true, 0, &s.lag_us)
      || !get_time (c, o, "comm_us", false, -1, &s.comm_us))
    return false;
  const cJSON *reps = cJSON_GetObjectItemCaseSensitive (o, "reps_us");
  if (!cJSON_IsArray (reps) || cJSON_GetArraySize (reps) < 1
      || cJSON_GetArraySize (reps) > MAX_REPS)
    return bad (c, "reps_us", "expected an array of 1 to %d times", MAX_REPS);
  s.n_reps = cJSON_GetArraySize (reps);
  s.reps_us = g_new (double, (size_t)s.n_reps);
  const cJSON *r;
  int i = 0;
  cJSON_ArrayForEach (r, reps)
  {
    if (!cJSON_IsNumber (r) || !isfinite (r->valuedouble) || !(r->valuedouble > 0)) {
      g_free (s.reps_us);
      return bad (c, "reps_us", "element %d: expected a positive time in microseconds", i);
    }
    s.reps_us[i++] = r->valuedouble;
  }
  s.bytes = (uint64_t)bytes;
  s.group_size = (int32_t)gs;
  s.nodes = (int32_t)nodes;
  s.runs_per_rep = (int32_t)rpr;
  s.kernel_first = strcmp (order, "kernel_first") == 0;
  s.kernel_key = g_strdup (key);
  g_array_append_val (p->contention, s);
  return true;
}

/* Two contention entries with the same key (collective, kernel, order). */
static bool
contention_unique (const SgProfile *p, const char *file, GError **error)
{
  const SgContentionSample *s = (const SgContentionSample *)(const void *)p->contention->data;
  for (guint i = 0; i < p->contention->len; i++)
    for (guint j = 0; j < i; j++)
      if (s[i].transport == s[j].transport && s[i].kind == s[j].kind
          && s[i].group_size == s[j].group_size && s[i].nodes == s[j].nodes
          && s[i].bytes == s[j].bytes && s[i].kernel_first == s[j].kernel_first
          && strcmp (s[i].kernel_key, s[j].kernel_key) == 0) {
        g_set_error (error, SG_ESTIMATE_ERROR, SG_ESTIMATE_ERROR_PROFILE,
                     "%s: contention[%d]: duplicates the key of contention[%d]", file, s[i].index,
                     s[j].index);
        return false;
      }
  return true;
}

static int
entry_cmp (const void *a, const void *b)
{
  const Entry *x = a, *y = b;
  if (x->x != y->x)
    return x->x < y->x ? -1 : 1;
  int c = memcmp (x->key, y->key, sizeof x->key);
  return c ? c : (x->index > y->index) - (x->index < y->index);
}

static bool
family_finish (Family *f, const char *file, GError **error)
{
  g_array_sort (f->entries, entry_cmp);
  Entry *es = (Entry *)(void *)f->entries->data;
  guint n = f->entries->len;
  f->xs = g_new (double, n);
  f->ys = g_new (double, n);
  f->n_xs = 0;
  for (guint i = 0; i < n;) {
    guint j = i;
    double logsum = 0.0;
    for (; j < n && es[j].x == es[i].x; j++) {
      logsum += log (es[j].us);
      if (j > i && memcmp (es[j].key, es[j - 1].key, sizeof es[j].key) == 0) {
        g_set_error (error, SG_ESTIMATE_ERROR, SG_ESTIMATE_ERROR_PROFILE,
                     "%s: %s[%d]: duplicates the key of %s[%d]", file, fam_names[f->kind],
                     es[j].index, fam_names[f->kind], es[j - 1].index);
        return false;
      }
    }
    /* Sizes of 0 (an ops entry of an empty value) answer exact lookups
     * only: log-log interpolation and linear scaling need sizes > 0. */
    if (es[i].x > 0) {
      f->xs[f->n_xs] = es[i].x;
      f->ys[f->n_xs++] = exp (logsum / (j - i));
    }
    i = j;
  }
  return true;
}

SgProfile *
sg_profile_load_data (const char *data, size_t len, const char *name, int32_t world_size,
                      GError **error)
{
  Ctx c = { .file = name, .error = error };
  GError *je = NULL;
  cJSON *root = sg_json_parse (data, len, &je);
  if (!root) {
    bad (&c, "json", "%s", je->message);
    g_error_free (je);
    return NULL;
  }
  SgProfile *p = g_new0 (SgProfile, 1);
  p->families = g_ptr_array_new_with_free_func (family_free);
  p->contention = g_array_new (FALSE, FALSE, sizeof (SgContentionSample));
  bool ok = false;
  bool sok;
  int64_t version, ws;
  const char *fmt;
  if (!cJSON_IsObject (root)) {
    bad (&c, "json", "the profile must be a JSON object");
    goto out;
  }
  fmt = get_str (&c, root, "format", true, &sok);
  if (!sok)
    goto out;
  if (strcmp (fmt, PROFILE_FORMAT) != 0) {
    bad (&c, "format", "\"%s\" is not \"%s\"", fmt, PROFILE_FORMAT);
    goto out;
  }
  if (!get_int (&c, root, "version", -1, 0, &version))
    goto out;
  if (version < 1 || version > PROFILE_VERSION) {
    bad (&c, "version", "version %" G_GINT64_FORMAT " is not supported (expected 1 to %d)",
         version, PROFILE_VERSION);
    goto out;
  }
  if (!get_int (&c, root, "world_size", -1, 1, &ws))
    goto out;
  if (world_size > 0 && ws != world_size) {
    bad (&c, "world_size",
         "measured with world_size %" G_GINT64_FORMAT ", the graph has %d: not this job's profile",
         ws, world_size);
    goto out;
  }
  const char *dev = get_str (&c, root, "device", false, &sok);
  if (!sok)
    goto out;
  p->device = g_strdup (dev);
  for (int fk = 0; fk < FAM_N; fk++) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive (root, fam_names[fk]);
    if (!arr)
      continue;
    if (!cJSON_IsArray (arr)) {
      bad (&c, fam_names[fk], "expected an array");
      goto out;
    }
    Ctx ec = { .file = name, .array = fam_names[fk], .error = error };
    const cJSON *e;
    cJSON_ArrayForEach (e, arr)
    {
      if (!parse_entry (p, (FamKind)fk, e, &ec))
        goto out;
      ec.index++;
    }
  }
  {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive (root, "contention");
    if (arr && version < 2) {
      bad (&c, "contention", "needs version 2 (this profile says %" G_GINT64_FORMAT ")", version);
      goto out;
    }
    if (arr && !cJSON_IsArray (arr)) {
      bad (&c, "contention", "expected an array");
      goto out;
    }
    Ctx ec = { .file = name, .array = "contention", .error = error };
    const cJSON *e;
    cJSON_ArrayForEach (e, arr)
    {
      if (!parse_contention (p, e, &ec))
        goto out;
      ec.index++;
    }
  }
  for (guint i = 0; i < p->families->len; i++)
    if (!family_finish (p->families->pdata[i], name, error))
      goto out;
  if (!contention_unique (p, name, error))
    goto out;
  ok = true;
out:
  cJSON_Delete (root);
  if (!ok) {
    sg_profile_free (p);
    return NULL;
  }
  return p;
}

SgProfile *
sg_profile_load (const char *path, int32_t world_size, GError **error)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  GError *io = NULL;
  if (!g_file_get_contents (path, &text, &len, &io)) {
    g_set_error (error, SG_ESTIMATE_ERROR, SG_ESTIMATE_ERROR_PROFILE,
                 "%s: cannot read profile: %s", path, io->message);
    g_error_free (io);
    return NULL;
  }
  return sg_profile_load_data (text, len, path, world_size, error);
}

/* --- lookup ------------------------------------------------------------- */

static const Family *
family_find (const SgProfile *p, FamKind kind, const int64_t fkey[3], const char *target)
{
  for (guint i = 0; i < p->families->len; i++) {
    const Family *f = p->families->pdata[i];
    if (f->kind == kind && f->fkey[0] == fkey[0] && f->fkey[1] == fkey[1] &&
        f->fkey[2] == fkey[2] && (!target || g_strcmp0 (f->target, target) == 0))
      return f;
  }
  return NULL;
}

static bool
family_lookup (const Family *f, const int64_t key[KEY_LEN], double x, double *us)
{
  const Entry *es = (const Entry *)(const void *)f->entries->data;
  guint lo = 0, hi = f->entries->len;
  while (lo < hi) { /* first entry with es.x >= x */
    guint mid = (lo + hi) / 2;
    if (es[mid].x < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (guint i = lo; i < f->entries->len && es[i].x == x; i++)
    if (memcmp (es[i].key, key, sizeof es[i].key) == 0) {
      *us = es[i].us;
      return true;
    }
  return sg_interp_loglog (f->xs, f->ys, f->n_xs, x, us);
}

bool
sg_profile_shape_us (const SgProfile *p, const SgShape *s, double *us)
{
  if (!p)
    return false;
  if (sg_op_class (s->op) == SG_CLASS_MATMUL) {
    int64_t fkey[3] = { s->op, s->dtype, 0 };
    const Family *f = family_find (p, FAM_GEMM, fkey, NULL);
    if (!f && (s->op == SG_OP_ADDMM || s->op == SG_OP_BADDBMM)) {
      fkey[0] = s->op == SG_OP_ADDMM ? SG_OP_MM : SG_OP_BMM;
      f = family_find (p, FAM_GEMM, fkey, NULL);
    }
    int64_t key[KEY_LEN] = { s->batch, s->m, s->n, s->k, 0, 0 };
    return f && family_lookup (f, key, s->flops, us);
  }
  int64_t fkey[3] = { s->op, s->dtype, s->causal };
  const Family *f = family_find (p, FAM_ATTENTION, fkey, NULL);
  int64_t key[KEY_LEN] = { s->batch, s->heads, s->seq_q, s->seq_kv, s->head_dim, 0 };
  return f && family_lookup (f, key, s->flops, us);
}

bool
sg_profile_collective_us (const SgProfile *p, SgOpKind kind, uint64_t bytes, int32_t group_size,
                          int32_t n_nodes, double *us)
{
  if (!p)
    return false;
  int64_t fkey[3] = { kind, group_size, n_nodes };
  const Family *f = family_find (p, FAM_COLL, fkey, NULL);
  int64_t key[KEY_LEN] = { 0 };
  return f && family_lookup (f, key, (double)bytes, us);
}

bool
sg_profile_op_us (const SgProfile *p, const char *target, uint64_t bytes, double *us)
{
  if (!p || !target)
    return false;
  int64_t fkey[3] = { 0, 0, 0 };
  const Family *f = family_find (p, FAM_OPS, fkey, target);
  int64_t key[KEY_LEN] = { 0 };
  return f && family_lookup (f, key, (double)bytes, us);
}

/* plan.c: the plan's lifetime, its canonical JSON text, its hash, the atomic
 * file write and the kernel-argument accessors (plan.h).
 *
 * Mirrors: nvFuser's host IR printer (one explicit instruction per line).
 * Requires: nothing (a plan in memory, built by codegen/ or the loader).
 * Invalidates: plan->hash is recomputed by every sg_plan_to_json().
 *
 * Canonical text (docs/plan-format.md): fixed key order, one element of each
 * list per line, integers for ids and bytes, "%.3f" for microseconds, the
 * hash as 16 lower-case hex digits. A file gets it piece by piece (the
 * whole text is never in memory: the hash is written in last). The hash is FNV-1a 64 over the text
 * with the hash digits all '0' and without the `graph` line (the file name
 * is not content); the loader rebuilds the text from what it parsed, so any
 * change of content (not of the bytes' layout only) is detected.
 */
#include "plan-private.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <string.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <unistd.h>

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

/* --- canonical JSON --------------------------------------------------------- */

/* Appends without g_string_insert_len's generality (the writer's hot
 * path; GString grows as g_string_append_len makes it). */
static inline void
put_len (GString *s, const char *v, size_t n)
{
  if (G_UNLIKELY (s->len + n >= s->allocated_len)) {
    g_string_append_len (s, v, (gssize)n);
    return;
  }
  memcpy (s->str + s->len, v, n);
  s->len += n;
  s->str[s->len] = 0;
}

static inline void
put_s (GString *s, const char *v)
{
  put_len (s, v, strlen (v));
}

#define put_lit(s, lit) put_len ((s), "" lit, sizeof (lit) - 1)

static void
put_str (GString *s, const char *v)
{
  if (!v) {
    put_lit (s, "null");
    return;
  }
  g_string_append_c (s, '"');
  const unsigned char *c = (const unsigned char *)v;
  while (*c) {
    const unsigned char *run = c; /* what needs no escape, appended at once */
    while (*c >= 0x20 && *c != '"' && *c != '\\')
      c++;
    put_len (s, (const char *)run, c - run);
    if (!*c)
      break;
    switch (*c) {
    case '"':
      put_lit (s, "\\\"");
      break;
    case '\\':
      put_lit (s, "\\\\");
      break;
    case '\n':
      put_lit (s, "\\n");
      break;
    case '\t':
      put_lit (s, "\\t");
      break;
    default:
      g_string_append_printf (s, "\\u%04x", *c);
    }
    c++;
  }
  g_string_append_c (s, '"');
}

/* printf is the bottleneck of a 100k-node plan: integers by hand. */
static void
put_u64 (GString *s, uint64_t v)
{
  char buf[24];
  char *at = buf + sizeof buf;
  do {
    *--at = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  put_len (s, at, buf + sizeof buf - at);
}

static void
put_i64 (GString *s, int64_t v)
{
  if (v < 0) {
    g_string_append_c (s, '-');
    put_u64 (s, (uint64_t)0 - (uint64_t)v);
  } else
    put_u64 (s, (uint64_t)v);
}

/* ",\"key\":" then the integer */
static void
put_key_int (GString *s, const char *key, int64_t v)
{
  put_s (s, key);
  put_i64 (s, v);
}

static void
put_us (GString *s, double v)
{
  /* "%.3f" of any finite double: up to 309 integer digits (DBL_MAX), the
   * point and 3 decimals; G_ASCII_DTOSTR_BUF_SIZE (39) truncated it, and
   * the text no longer loaded with its hash */
  char buf[DBL_MAX_10_EXP + 8];
  if (!isfinite (v) || v < 0) {
    put_lit (s, "-1.000");
    return;
  }
  if (v < 1e12) { /* exact thousandths: "%.3f" without printf's cost */
    uint64_t m = (uint64_t)llround (v * 1000.0);
    put_u64 (s, m / 1000);
    char frac[5] = { '.', (char)('0' + m / 100 % 10), (char)('0' + m / 10 % 10),
                     (char)('0' + m % 10), 0 };
    put_s (s, frac);
    return;
  }
  put_s (s, g_ascii_formatd (buf, sizeof buf, "%.3f", v));
}

/* a JSON array of the @n integers at @v, each int32_t or int64_t (@width) */
static void
put_int_array (GString *s, const void *v, size_t width, int32_t n)
{
  g_assert (width == sizeof (int32_t) || width == sizeof (int64_t));
  g_string_append_c (s, '[');
  for (int32_t i = 0; i < n; i++) {
    if (i)
      g_string_append_c (s, ',');
    put_i64 (s, width == sizeof (int64_t) ? ((const int64_t *)v)[i] : ((const int32_t *)v)[i]);
  }
  g_string_append_c (s, ']');
}

#define put_ints(s, v, n) put_int_array ((s), (v), sizeof *(v), (n))

/* A string as cJSON 1.7's print_string_ptr writes it (NULL: ""). */
static void
put_cjson_str (GString *s, const char *v)
{
  static const char short_esc[32] = { ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r',
                                      ['\t'] = 't' };
  g_string_append_c (s, '"');
  const unsigned char *c = (const unsigned char *)(v ? v : "");
  while (*c) {
    const unsigned char *run = c;
    while (*c > 31 && *c != '"' && *c != '\\')
      c++;
    put_len (s, (const char *)run, c - run);
    if (!*c)
      break;
    g_string_append_c (s, '\\');
    if (*c == '"' || *c == '\\')
      g_string_append_c (s, (char)*c);
    else if (short_esc[*c])
      g_string_append_c (s, short_esc[*c]);
    else
      g_string_append_printf (s, "u%04x", *c);
    c++;
  }
  g_string_append_c (s, '"');
}

/* @v as cJSON_PrintUnformatted writes it (cJSON 1.7's print_value), without
 * its allocation per call. An integral number below 1e15 (not -0) has one
 * text in every cJSON 1.7 ("%1.15g", or "%d" of valueint): its digits;
 * any other number goes through cJSON itself. False for what cJSON would
 * not print (@s then holds a part). */
static bool
put_cjson_value (GString *s, const cJSON *v)
{
  switch (v->type & 0xff) {
  case cJSON_NULL:
    put_lit (s, "null");
    return true;
  case cJSON_False:
    put_lit (s, "false");
    return true;
  case cJSON_True:
    put_lit (s, "true");
    return true;
  case cJSON_Number:
    if (fabs (v->valuedouble) < 1e15 && v->valuedouble == floor (v->valuedouble) &&
        !(v->valuedouble == 0 && signbit (v->valuedouble))) {
      put_i64 (s, (int64_t)v->valuedouble);
      return true;
    } else {
      char *t = cJSON_PrintUnformatted (v);
      if (t)
        put_s (s, t);
      cJSON_free (t);
      return t != NULL;
    }
  case cJSON_Raw:
    if (!v->valuestring)
      return false;
    put_s (s, v->valuestring);
    return true;
  case cJSON_String:
    put_cjson_str (s, v->valuestring);
    return true;
  case cJSON_Array:
  case cJSON_Object: {
    bool object = (v->type & 0xff) == cJSON_Object;
    g_string_append_c (s, object ? '{' : '[');
    for (const cJSON *e = v->child; e; e = e->next) {
      if (e != v->child)
        g_string_append_c (s, ',');
      if (object) {
        put_cjson_str (s, e->string);
        g_string_append_c (s, ':');
      }
      if (!put_cjson_value (s, e))
        return false;
    }
    g_string_append_c (s, object ? '}' : ']');
    return true;
  }
  default:
    return false;
  }
}

/* @v's cJSON_PrintUnformatted text, @empty when there is none. */
static void
put_cjson (GString *s, const cJSON *v, const char *empty)
{
  size_t at = s->len;
  if (v && put_cjson_value (s, v))
    return;
  g_string_truncate (s, at);
  put_s (s, empty);
}

static void
put_ins (GString *s, const SgPlanIns *in)
{
  put_lit (s, "{\"kind\":");
  put_str (s, sg_plan_ins_kind_name (in->kind));
  put_key_int (s, ",\"stream\":", in->stream);
  if (in->name) {
    put_lit (s, ",\"name\":");
    put_str (s, in->name);
  }
  switch (in->kind) {
  case SG_INS_KERNEL:
  case SG_INS_COLLECTIVE:
    put_lit (s, ",\"op\":");
    put_str (s, sg_op_name (in->op));
    if (in->kind == SG_INS_KERNEL) {
      put_lit (s, ",\"target\":");
      put_str (s, in->target);
    }
    put_lit (s, ",\"in\":");
    put_ints (s, in->in, in->n_in);
    put_lit (s, ",\"out\":");
    put_ints (s, in->out, in->n_out);
    put_lit (s, ",\"args\":");
    put_cjson (s, in->args, "[]");
    put_lit (s, ",\"kwargs\":");
    put_cjson (s, in->kwargs, "{}");
    if (in->kind == SG_INS_KERNEL && in->sm_count > 0)
      put_key_int (s, ",\"sm_count\":", in->sm_count);
    if (in->kind == SG_INS_COLLECTIVE) {
      put_key_int (s, ",\"group\":", in->group);
      put_key_int (s, ",\"count\":", in->count);
      put_lit (s, ",\"dtype\":");
      put_str (s, sg_dtype_name (in->dtype));
      put_lit (s, ",\"reduce\":");
      put_str (s, sg_reduce_name (in->reduce));
      put_lit (s, ",\"members\":[");
      for (int32_t i = 0; i < in->n_members; i++) {
        if (i)
          g_string_append_c (s, ',');
        put_str (s, in->members[i]);
      }
      g_string_append_c (s, ']');
      if (in->op == SG_OP_COLLECTIVE_PERMUTE) {
        put_lit (s, ",\"transport\":");
        put_str (s, sg_transport_name (in->transport));
        put_lit (s, ",\"pairs\":[");
        for (int32_t i = 0; i < in->n_pairs; i++) {
          put_s (s, i ? ",[" : "[");
          put_i64 (s, in->pairs[2 * i]);
          g_string_append_c (s, ',');
          put_i64 (s, in->pairs[2 * i + 1]);
          g_string_append_c (s, ']');
        }
        g_string_append_c (s, ']');
      }
    }
    put_lit (s, ",\"est_us\":");
    put_us (s, in->est_us);
    put_lit (s, ",\"pred_start_us\":");
    put_us (s, in->pred_start_us);
    put_lit (s, ",\"pred_end_us\":");
    put_us (s, in->pred_end_us);
    if (in->kind == SG_INS_COLLECTIVE) {
      put_lit (s, ",\"pred_exposed_us\":");
      put_us (s, in->pred_exposed_us);
    }
    break;
  case SG_INS_RECORD:
    put_key_int (s, ",\"event\":", in->event);
    break;
  case SG_INS_WAIT_EVENT:
    put_key_int (s, ",\"event\":", in->event);
    put_key_int (s, ",\"coll\":", in->coll);
    break;
  case SG_INS_FREE:
    put_key_int (s, ",\"buffer\":", in->buffer);
    break;
  }
  g_string_append_c (s, '}');
}

uint64_t
sg_plan_fnv1a (const char *data, size_t len)
{
  return sg_plan_fnv1a_more (UINT64_C (0xcbf29ce484222325), data, len);
}

uint64_t
sg_plan_fnv1a_more (uint64_t h, const char *data, size_t len)
{
  /* a word per load, its bytes in text order (the same hash, fewer
   * instructions: the writer hashes every byte of the plan) */
  const uint64_t prime = UINT64_C (0x100000001b3);
  size_t i = 0;
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
  for (; len - i >= 8; i += 8) {
    uint64_t w;
    memcpy (&w, data + i, sizeof w);
    for (int b = 0; b < 8; b++)
      h = (h ^ (w >> (8 * b) & 0xFF)) * prime;
  }
#endif
  for (; i < len; i++) {
    h ^= (unsigned char)data[i];
    h *= prime;
  }
  return h;
}

#define HASH_KEY "\"hash\":\""

/* Where the canonical text goes: all of it into @s, or, with @f, through
 * @s in pieces of about SPILL bytes (the whole text is never in memory;
 * the hash is patched in at the end). */
#define SPILL ((size_t)1 << 20)
typedef struct {
  GString *s;
  FILE *f;
  size_t done;                 /* bytes given to @f before s's first */
  uint64_t hash;               /* FNV-1a of those, the graph line aside */
  size_t graph_from, graph_to; /* the graph line, absolute */
  bool failed;                 /* a write to @f failed */
} Out;

/* Hashes the bytes in the buffer (at @o->done) but the graph line's. */
static void
hash_buffer (Out *o)
{
  size_t a = o->done, b = o->done + o->s->len;
  size_t cut_a = CLAMP (o->graph_from, a, b), cut_b = CLAMP (o->graph_to, a, b);
  o->hash = sg_plan_fnv1a_more (o->hash, o->s->str, cut_a - a);
  o->hash = sg_plan_fnv1a_more (o->hash, o->s->str + (cut_b - a), b - cut_b);
}

/* With a file: writes the buffer once it holds SPILL bytes. */
static void
spill (Out *o, bool force)
{
  if (!o->f || (!force && o->s->len < SPILL))
    return;
  hash_buffer (o);
  if (fwrite (o->s->str, 1, o->s->len, o->f) != o->s->len)
    o->failed = true;
  o->done += o->s->len;
  g_string_truncate (o->s, 0);
}

/* The canonical text of @p into @o, plan->hash set and written in. */
static void
plan_text (SgPlan *p, Out *o)
{
  GString *s = o->s;
  o->hash = UINT64_C (0xcbf29ce484222325);
  put_s (s, "{\"format\":\"" SG_PLAN_FORMAT "\",\n");
  g_string_append_printf (s, "\"version\":%d,\n", SG_PLAN_VERSION);
  size_t hash_at = s->len + strlen (HASH_KEY);
  put_lit (s, HASH_KEY "0000000000000000\",\n");
  /* The graph's file name is provenance, not content: ranks that planned
   * copies of one graph under other names run the same plan. */
  o->graph_from = s->len;
  put_lit (s, "\"graph\":");
  put_str (s, p->graph ? p->graph : "");
  put_lit (s, ",\n");
  o->graph_to = s->len;
  put_lit (s, "\"options\":");
  put_str (s, p->options ? p->options : "");
  g_string_append_printf (s,
                          ",\n\"world_size\":%" PRId32 ",\n\"n_streams\":%" PRId32
                          ",\n\"n_events\":%" PRId32 ",\n\"arena_bytes\":%" PRIu64 ",\n",
                          p->world_size, p->n_streams, p->n_events, p->arena_bytes);

  put_lit (s, "\"groups\":[");
  for (int32_t i = 0; i < p->n_groups; i++) {
    const SgPlanGroup *gr = &p->groups[i];
    put_s (s, i ? ",\n{\"name\":" : "\n{\"name\":");
    put_str (s, gr->name);
    put_key_int (s, ",\"n_ranks\":", gr->n_ranks);
    put_key_int (s, ",\"n_instances\":", gr->n_instances);
    put_lit (s, ",\"partition\":");
    put_ints (s, gr->partition, gr->n_ranks * gr->n_instances);
    g_string_append_c (s, '}');
  }
  put_lit (s, "],\n\"buffers\":[");
  for (int32_t i = 0; i < p->n_buffers; i++) {
    const SgPlanBuffer *b = &p->buffers[i];
    put_s (s, i ? ",\n{\"offset\":" : "\n{\"offset\":");
    put_u64 (s, b->offset);
    put_lit (s, ",\"bytes\":");
    put_u64 (s, b->bytes);
    put_key_int (s, ",\"first\":", b->first_ins);
    put_key_int (s, ",\"last\":", b->last_ins);
    g_string_append_c (s, '}');
    spill (o, false);
  }
  put_lit (s, "],\n\"values\":[");
  for (int32_t i = 0; i < p->n_values; i++) {
    const SgPlanValue *v = &p->values[i];
    put_s (s, i ? ",\n{\"name\":" : "\n{\"name\":");
    put_str (s, v->name);
    put_key_int (s, ",\"buffer\":", v->buffer);
    put_lit (s, ",\"offset\":");
    put_u64 (s, v->offset);
    if (v->roll_block > 0) { /* written only when set */
      put_key_int (s, ",\"roll\":{\"group\":", v->roll_group);
      put_key_int (s, ",\"shift\":", v->roll_shift);
      put_key_int (s, ",\"sign\":", v->roll_sign);
      put_lit (s, ",\"block\":");
      put_u64 (s, v->roll_block);
      g_string_append_c (s, '}');
    }
    put_lit (s, ",\"dtype\":");
    put_str (s, sg_dtype_name (v->dtype));
    put_lit (s, ",\"shape\":");
    put_ints (s, v->shape, v->ndim);
    put_lit (s, ",\"stride\":");
    put_ints (s, v->stride, v->ndim);
    put_s (s, v->init == SG_INIT_INPUT ? ",\"init\":\"input\"}" : ",\"init\":\"none\"}");
    spill (o, false);
  }
  put_lit (s, "],\n\"inputs\":");
  put_ints (s, p->inputs, p->n_inputs);
  put_lit (s, ",\n\"outputs\":");
  put_ints (s, p->outputs, p->n_outputs);
  put_lit (s, ",\n\"ins\":[");
  for (int32_t i = 0; i < p->n_ins; i++) {
    put_s (s, i ? ",\n" : "\n");
    put_ins (s, &p->ins[i]);
    spill (o, false);
  }
  const SgPlanPrediction *pr = &p->pred;
  put_lit (s, "],\n\"pred\":{\"step_us\":");
  put_us (s, pr->step_us);
  put_lit (s, ",\"compute_us\":");
  put_us (s, pr->compute_us);
  put_lit (s, ",\"comm_us\":");
  put_us (s, pr->comm_us);
  put_lit (s, ",\"exposed_us\":");
  put_us (s, pr->exposed_us);
  put_lit (s, ",\"lower_bound_us\":");
  put_us (s, pr->lower_bound_us);
  g_string_append_printf (s,
                          ",\"peak_bytes\":%" PRIu64 ",\"collectives\":%" PRId32
                          ",\"hidden\":%" PRId32 ",\"partial\":%" PRId32 ",\"exposed\":%" PRId32
                          "}\n}\n",
                          pr->peak_bytes, pr->collectives, pr->hidden, pr->partial, pr->exposed);

  char hex[17];
  if (o->f) {
    spill (o, true);
    p->hash = o->hash;
    g_snprintf (hex, sizeof hex, "%016" PRIx64, p->hash);
    if (fseek (o->f, (long)hash_at, SEEK_SET) != 0 || fwrite (hex, 1, 16, o->f) != 16)
      o->failed = true;
    return;
  }
  hash_buffer (o);
  p->hash = o->hash;
  g_snprintf (hex, sizeof hex, "%016" PRIx64, p->hash);
  memcpy (s->str + hash_at, hex, 16);
}

char *
sg_plan_to_json (SgPlan *p, size_t *len)
{
  g_return_val_if_fail (p != NULL, NULL);
  Out o = { .s = g_string_sized_new (4096 + (size_t)p->n_ins * 160 + (size_t)p->n_values * 120) };
  plan_text (p, &o);
  if (len)
    *len = o.s->len;
  return g_string_free (o.s, FALSE);
}

bool
sg_plan_write_file (SgPlan *plan, const char *path, GError **error)
{
  g_return_val_if_fail (plan != NULL && path != NULL, false);
  /* A temporary file in the same directory, filled piece by piece,
   * flushed to disk and renamed over @path: never a partial plan at
   * @path, never the whole text in memory. */
  g_autofree char *tmp = g_strdup_printf ("%s.XXXXXX", path);
  int fd = g_mkstemp_full (tmp, O_RDWR | O_CLOEXEC, 0666);
  FILE *f = fd >= 0 ? fdopen (fd, "w") : NULL;
  if (!f) {
    int err = errno;
    if (fd >= 0) {
      close (fd);
      g_unlink (tmp);
    }
    g_set_error (error, SG_PLAN_ERROR, SG_PLAN_ERROR_IO, "cannot write plan %s: %s", path,
                 g_strerror (err));
    return false;
  }
  Out o = { .s = g_string_sized_new (SPILL + SPILL / 4), .f = f };
  plan_text (plan, &o);
  g_string_free (o.s, TRUE);
  int err = 0;
  if (o.failed || fflush (f) != 0 || fsync (fileno (f)) != 0)
    err = errno ? errno : EIO;
  if (fclose (f) != 0 && !err)
    err = errno ? errno : EIO;
  if (!err && g_rename (tmp, path) != 0)
    err = errno ? errno : EIO;
  if (err) {
    g_unlink (tmp);
    g_set_error (error, SG_PLAN_ERROR, SG_PLAN_ERROR_IO, "cannot write plan %s: %s", path,
                 g_strerror (err));
    return false;
  }
  return true;
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

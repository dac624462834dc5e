/* plan-text.c: the plan's canonical JSON text (plan.h, docs/plan-format.md).
 *
 * Mirrors: nvFuser's host IR printer (one explicit instruction per line).
 * Requires: nothing (a plan in memory, built by codegen/ or the loader).
 * Invalidates: plan->hash is recomputed by every sg_plan_to_json().
 *
 * Fixed key order, one element of each list per line, integers for ids and
 * bytes, "%.3f" for microseconds, the hash as 16 lower-case hex digits.
 * The hash is FNV-1a 64 (plan-hash.c) over the text with the hash digits
 * all '0' and without the `graph` line (the file name is not content); the
 * loader rebuilds the text from what it parsed, so any change of content
 * (not of the bytes' layout only) is detected.
 *
 * The text is made in pieces (plan-private.h): the head, up to the list of
 * buffers, then items: each buffer, value and instruction, and the lines
 * between the lists. An item's text depends on the plan and its index
 * alone, so ranges of items can be written at once into buffers of their
 * own and joined in order (plan-write.c does, for the file); here they are
 * written in order into one string.
 */
#include "plan-private.h"

#include <float.h>
#include <inttypes.h>
#include <string.h>

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

/* The bytes a JSON string holds as they are: not a control character
 * (nor the terminating 0), '"' or '\\'. */
#define PLAIN(c) ((c) >= 0x20 && (c) != '"' && (c) != '\\')
#define PLAIN8(c)                                                                          \
  PLAIN (c), PLAIN (c + 1), PLAIN (c + 2), PLAIN (c + 3), PLAIN (c + 4), PLAIN (c + 5),    \
    PLAIN (c + 6), PLAIN (c + 7)
#define PLAIN64(c)                                                                         \
  PLAIN8 (c), PLAIN8 (c + 8), PLAIN8 (c + 16), PLAIN8 (c + 24), PLAIN8 (c + 32),          \
    PLAIN8 (c + 40), PLAIN8 (c + 48), PLAIN8 (c + 56)
static const bool plain[256] = { PLAIN64 (0), PLAIN64 (64), PLAIN64 (128), PLAIN64 (192) };
#undef PLAIN
#undef PLAIN8
#undef PLAIN64

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
    while (plain[*c])
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

/* printf is the bottleneck of a 100k-node plan: integers by hand, two
 * digits a step. */
static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324"
                                     "25262728293031323334353637383940414243444546474849"
                                     "50515253545556575859606162636465666768697071727374"
                                     "75767778798081828384858687888990919293949596979899";

static void
put_u64 (GString *s, uint64_t v)
{
  /* the digits end at buf + 24; a copy of 24 bytes from the first (at
   * most 20 of them, the rest past the end within buf) is a fixed-size
   * one, without a call to memcpy for each number */
  char buf[48];
  char *at = buf + 24;
  while (v >= 100) {
    const unsigned d = (unsigned)(v % 100) * 2;
    v /= 100;
    *--at = digit_pairs[d + 1];
    *--at = digit_pairs[d];
  }
  if (v >= 10) {
    *--at = digit_pairs[2 * v + 1];
    *--at = digit_pairs[2 * v];
  } else
    *--at = (char)('0' + v);
  const size_t n = (size_t)(buf + 24 - at);
  if (G_UNLIKELY (s->len + 24 >= s->allocated_len)) {
    put_len (s, at, n);
    return;
  }
  memcpy (s->str + s->len, at, 24);
  s->len += n;
  s->str[s->len] = 0;
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

/* ",\"key\":" (a literal) then the integer */
#define put_key_int(s, key, v) (put_lit ((s), key), put_i64 ((s), (v)))

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
    const char frac[4] = { '.', (char)('0' + m / 100 % 10), (char)('0' + m / 10 % 10),
                           (char)('0' + m % 10) };
    put_len (s, frac, sizeof frac);
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


#define HASH_KEY "\"hash\":\""

void
sg_plan_text_head (GString *s, const SgPlan *p, SgPlanHead *at)
{
  put_s (s, "{\"format\":\"" SG_PLAN_FORMAT "\",\n");
  g_string_append_printf (s, "\"version\":%d,\n", SG_PLAN_VERSION);
  at->hash_at = s->len + strlen (HASH_KEY);
  put_lit (s, HASH_KEY "0000000000000000\",\n");
  /* The graph's file name is provenance, not content: ranks that planned
   * copies of one graph under other names run the same plan. */
  at->graph_from = s->len;
  put_lit (s, "\"graph\":");
  put_str (s, p->graph ? p->graph : "");
  put_lit (s, ",\n");
  at->graph_to = s->len;
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
}

static void
put_buffer (GString *s, const SgPlan *p, int32_t i)
{
  const SgPlanBuffer *b = &p->buffers[i];
  put_s (s, i ? ",\n{\"offset\":" : "\n{\"offset\":");
  put_u64 (s, b->offset);
  put_lit (s, ",\"bytes\":");
  put_u64 (s, b->bytes);
  put_key_int (s, ",\"first\":", b->first_ins);
  put_key_int (s, ",\"last\":", b->last_ins);
  g_string_append_c (s, '}');
}

static void
put_value (GString *s, const SgPlan *p, int32_t i)
{
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
}

static void
put_tail (GString *s, const SgPlan *p)
{
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
}

size_t
sg_plan_text_items (const SgPlan *p)
{
  return (size_t)p->n_buffers + (size_t)p->n_values + (size_t)p->n_ins + 3;
}

/* Items: the buffers, the values' opening line, the values, the lines of
 * inputs and outputs opening the instructions, the instructions, the
 * tail (predictions). */
void
sg_plan_text_range (GString *s, const SgPlan *p, size_t from, size_t to)
{
  const size_t nb = (size_t)p->n_buffers, nv = (size_t)p->n_values, ni = (size_t)p->n_ins;
  const size_t values_at = nb + 1, ins_at = values_at + nv + 1, tail_at = ins_at + ni;
  for (size_t k = from; k < to; k++) {
    if (k < nb) {
      put_buffer (s, p, (int32_t)k);
    } else if (k == nb) {
      put_lit (s, "],\n\"values\":[");
    } else if (k < values_at + nv) {
      put_value (s, p, (int32_t)(k - values_at));
    } else if (k == values_at + nv) {
      put_lit (s, "],\n\"inputs\":");
      put_ints (s, p->inputs, p->n_inputs);
      put_lit (s, ",\n\"outputs\":");
      put_ints (s, p->outputs, p->n_outputs);
      put_lit (s, ",\n\"ins\":[");
    } else if (k < tail_at) {
      put_s (s, k > ins_at ? ",\n" : "\n");
      put_ins (s, &p->ins[k - ins_at]);
    } else {
      put_tail (s, p);
    }
  }
}

uint64_t
sg_plan_text_hash (const GString *head, const SgPlanHead *at)
{
  uint64_t h = sg_plan_fnv1a_more (SG_PLAN_FNV_OFFSET, head->str, at->graph_from);
  return sg_plan_fnv1a_more (h, head->str + at->graph_to, head->len - at->graph_to);
}

void
sg_plan_text_set_hash (SgPlan *p, uint64_t hash, char hex[17])
{
  p->hash = hash;
  g_snprintf (hex, 17, "%016" PRIx64, hash);
}

char *
sg_plan_to_json (SgPlan *p, size_t *len)
{
  g_return_val_if_fail (p != NULL, NULL);
  GString *s = g_string_sized_new (4096 + (size_t)p->n_ins * 160 + (size_t)p->n_values * 120);
  SgPlanHead at;
  sg_plan_text_head (s, p, &at);
  uint64_t h = sg_plan_text_hash (s, &at);
  size_t body = s->len;
  sg_plan_text_range (s, p, 0, sg_plan_text_items (p));
  h = sg_plan_fnv1a_long (h, s->str + body, s->len - body);
  char hex[17];
  sg_plan_text_set_hash (p, h, hex);
  memcpy (s->str + at.hash_at, hex, 16);
  if (len)
    *len = s->len;
  return g_string_free (s, FALSE);
}

/* test_plan.c: the plan's canonical JSON, loader and validator (plan/),
 * on a hand-built plan: compute, one all_gather with its events, a free.
 *
 * Every rejection test checks the error code and that the message names
 * what is wrong, so a loader that rejects for another reason fails.
 */
#include <check.h>
#include <signal.h>
#include <sys/resource.h>
#include <glib/gstdio.h>
#include <string.h>

#include "plan.h"
#include "plan-private.h"

static int32_t *
ids (int n, ...)
{
  int32_t *v = g_new (int32_t, (size_t)n + 1);
  va_list ap;
  va_start (ap, n);
  for (int i = 0; i < n; i++)
    v[i] = va_arg (ap, int32_t);
  va_end (ap);
  return v;
}

static void
set_value (SgPlan *p, SgPlanValue *v, const char *name, int32_t buffer, SgDtype dt, int64_t rows,
           int64_t cols, SgValueInit init)
{
  v->name = sg_plan_str (p, name, false);
  v->buffer = buffer;
  v->dtype = dt;
  sg_plan_value_set_dims (p, v, 2, (const int64_t[]){ rows, cols }, (const int64_t[]){ cols, 1 });
  v->init = init;
}

static SgPlanIns
ins_new (SgInsKind kind, int32_t stream)
{
  SgPlanIns in = { 0 };
  in.kind = kind;
  in.stream = stream;
  in.group = in.event = in.coll = in.buffer = -1;
  in.est_us = in.pred_start_us = in.pred_end_us = in.pred_exposed_us = -1;
  return in;
}

/* A collective on stream 1 over group 0 reading value @in, writing @out. */
static SgPlanIns
coll_new (SgPlan *p, const char *name, SgOpKind op, int32_t in, int32_t out, SgDtype dtype, int64_t count)
{
  SgPlanIns c = ins_new (SG_INS_COLLECTIVE, 1);
  c.name = sg_plan_str (p, name, false);
  c.op = op;
  c.in = ids (1, in);
  c.n_in = 1;
  c.out = ids (1, out);
  c.n_out = 1;
  c.group = 0;
  c.dtype = dtype;
  c.count = count;
  return c;
}

/* An empty world-2 plan: group "0" over ranks 0 and 1, two streams, two
 * events. */
static SgPlan *
two_rank_plan (void)
{
  SgPlan *p = sg_plan_new ();
  p->world_size = 2;
  p->n_groups = 1;
  p->groups = g_new0 (SgPlanGroup, 1);
  p->groups[0].name = g_strdup ("0");
  p->groups[0].n_ranks = 2;
  p->groups[0].n_instances = 1;
  p->groups[0].partition = ids (2, 0, 1);
  p->n_streams = 2;
  p->n_events = 2;
  return p;
}

/* x[8,16] (input), w[4,16] (input shard); ag = all_gather(w) [8,16];
 * y = mm(x, t(ag)) [8,8]; output y.
 * 0 RECORD e0 s0; 1 WAIT e0 s1; 2 COLL ag s1; 3 RECORD e1 s1; 4 WAIT e1 s0 coll 2;
 * 5 KERNEL mm; 6 FREE ag's buffer. */
static SgPlan *
small_plan (void)
{
  SgPlan *p = two_rank_plan ();
  p->graph = g_strdup ("small \"test\"\n");
  p->options = g_strdup ("reorder=1 bucket=1");
  p->n_buffers = 4;
  p->buffers = g_new0 (SgPlanBuffer, 4);
  p->buffers[0] = (SgPlanBuffer){ 0, 256, 0, 6 };   /* x bf16 8x16 */
  p->buffers[1] = (SgPlanBuffer){ 256, 128, 0, 6 }; /* w bf16 4x16 */
  p->buffers[2] = (SgPlanBuffer){ 512, 256, 2, 5 }; /* ag */
  p->buffers[3] = (SgPlanBuffer){ 768, 128, 5, 6 }; /* y bf16 8x8 */
  p->arena_bytes = 1024;
  p->n_values = 5;
  p->values = g_new0 (SgPlanValue, 5);
  set_value (p, &p->values[0], "x", 0, SG_DTYPE_BF16, 8, 16, SG_INIT_INPUT);
  set_value (p, &p->values[1], "w", 1, SG_DTYPE_BF16, 4, 16, SG_INIT_INPUT);
  set_value (p, &p->values[2], "ag", 2, SG_DTYPE_BF16, 8, 16, SG_INIT_NONE);
  set_value (p, &p->values[3], "t", 2, SG_DTYPE_BF16, 16, 8, SG_INIT_NONE);
  p->values[3].stride[0] = 1;
  p->values[3].stride[1] = 16;
  set_value (p, &p->values[4], "y", 3, SG_DTYPE_BF16, 8, 8, SG_INIT_NONE);
  p->n_inputs = 2;
  p->inputs = ids (2, 0, 1);
  p->n_outputs = 2;
  p->outputs = ids (2, 4, -1);
  p->n_ins = 7;
  p->ins = g_new0 (SgPlanIns, 7);
  p->ins[0] = ins_new (SG_INS_RECORD, 0);
  p->ins[0].event = 0;
  p->ins[1] = ins_new (SG_INS_WAIT_EVENT, 1);
  p->ins[1].event = 0;
  SgPlanIns *c = &p->ins[2];
  *c = coll_new (p, "ag", SG_OP_ALL_GATHER, 1, 2, SG_DTYPE_BF16, 64);
  c->members = g_new0 (char *, 2);
  c->members[0] = g_strdup ("ag");
  c->n_members = 1;
  c->est_us = 31.25;
  c->pred_start_us = 0;
  c->pred_end_us = 31.25;
  c->pred_exposed_us = 31.25;
  p->ins[3] = ins_new (SG_INS_RECORD, 1);
  p->ins[3].event = 1;
  p->ins[4] = ins_new (SG_INS_WAIT_EVENT, 0);
  p->ins[4].event = 1;
  p->ins[4].coll = 2;
  p->ins[4].name = sg_plan_str (p, "wait_ag", false);
  SgPlanIns *k = &p->ins[5];
  *k = ins_new (SG_INS_KERNEL, 0);
  k->name = sg_plan_str (p, "y", false);
  k->op = SG_OP_MM;
  k->target = sg_plan_str (p, "aten.mm.default", true);
  k->in = ids (2, 0, 3);
  k->n_in = 2;
  k->out = ids (1, 4);
  k->n_out = 1;
  k->args = cJSON_Parse ("[{\"value\":0},{\"value\":3},[1,2,-3],2.5,true,\"s\\u0001\"]");
  k->kwargs = cJSON_Parse ("{\"alpha\":1}");
  k->est_us = 1.5;
  p->ins[6] = ins_new (SG_INS_FREE, 0);
  p->ins[6].buffer = 2;
  p->pred.step_us = 33;
  p->pred.peak_bytes = 768;
  p->pred.collectives = 1;
  p->pred.exposed = 1;
  return p;
}

static char *
replace_once (const char *text, const char *from, const char *to)
{
  const char *at = strstr (text, from);
  ck_assert_msg (at != NULL, "test setup: \"%s\" not in the plan text", from);
  return g_strdup_printf ("%.*s%s%s", (int)(at - text), text, to, at + strlen (from));
}

/* Loads @text and expects @code with @needle in the message. */
static void
expect_reject (const char *text, size_t len, int code, const char *needle)
{
  g_autoptr (GError) e = NULL;
  SgPlan *p = sg_plan_load_data (text, len, "t.json", &e);
  ck_assert_msg (p == NULL, "plan accepted, expected an error containing \"%s\"", needle);
  ck_assert_msg (e != NULL && e->domain == SG_PLAN_ERROR, "no plan error");
  ck_assert_msg (e->code == code && strstr (e->message, needle) && strstr (e->message, "t.json"),
                 "expected code %d with \"%s\", got %d: %s", code, needle, e->code, e->message);
}

START_TEST (small_plan_validates_and_round_trips_byte_identical)
{
  g_autoptr (SgPlan) p = small_plan ();
  g_autoptr (GError) e = NULL;
  ck_assert_msg (sg_plan_validate (p, &e), "%s", e ? e->message : "");
  size_t len;
  g_autofree char *a = sg_plan_to_json (p, &len);
  ck_assert_uint_eq (strlen (a), len);
  ck_assert_ptr_nonnull (strstr (a, "\"est_us\":31.250,\"pred_start_us\":0.000,"));
  ck_assert_ptr_nonnull (strstr (a, "\"pred_start_us\":-1.000"));
  ck_assert_ptr_nonnull (strstr (a, "{\"offset\":768,\"bytes\":128,\"first\":5,\"last\":6}"));
  ck_assert_ptr_nonnull (strstr (a, "\"outputs\":[4,-1]"));
  g_autoptr (SgPlan) q = sg_plan_load_data (a, len, "a", &e);
  ck_assert_msg (q != NULL, "%s", e ? e->message : "");
  ck_assert_uint_eq (q->hash, p->hash);
  size_t len2;
  g_autofree char *b = sg_plan_to_json (q, &len2);
  ck_assert_str_eq (a, b);
  ck_assert_int_eq (q->n_ins, 7);
  ck_assert_int_eq (q->ins[2].count, 64);
  ck_assert_int_eq (q->ins[4].coll, 2);
  ck_assert_str_eq (q->graph, "small \"test\"\n");
  ck_assert_int_eq (q->values[3].stride[1], 16);
  ck_assert_int_eq (q->outputs[1], -1);
  ck_assert (q->ins[2].est_us == 31.25);
}
END_TEST

/* Names and targets live in the plan's strings (freed with it): names
 * are copies, a target one copy per text; a loaded plan's too. */
START_TEST (names_are_copies_and_targets_are_shared_among_the_plan_strings)
{
  g_autoptr (SgPlan) p = sg_plan_new ();
  char name[] = "mm_1";
  char *a = sg_plan_str (p, name, false), *b = sg_plan_str (p, name, false);
  ck_assert_ptr_ne (a, name);
  ck_assert_ptr_ne (a, b);
  name[0] = 'x';
  ck_assert_str_eq (a, "mm_1");
  char *t = sg_plan_str (p, "aten.mm.default", true);
  ck_assert_ptr_eq (sg_plan_str (p, "aten.mm.default", true), t);
  ck_assert_ptr_null (sg_plan_str (p, NULL, false));
  g_autoptr (SgPlan) s = small_plan ();
  size_t len;
  g_autofree char *text = sg_plan_to_json (s, &len);
  g_autoptr (SgPlan) q = sg_plan_load_data (text, len, "a", NULL);
  ck_assert_ptr_nonnull (q);
  ck_assert_str_eq (q->ins[5].target, "aten.mm.default");
  ck_assert_str_eq (q->ins[4].name, "wait_ag");
  ck_assert_str_eq (q->values[0].name, s->values[0].name);
}
END_TEST

START_TEST (times_of_any_finite_size_round_trip_with_their_hash)
{
  /* fuzz_plan (issue 18's long run): pred_end_us 3.5e203 was written
   * through a 39-byte buffer, truncated, and the text no longer loaded */
  g_autoptr (SgPlan) p = small_plan ();
  p->ins[2].pred_end_us = 3.5e203;
  p->ins[2].est_us = 1e12;
  size_t len;
  g_autofree char *a = sg_plan_to_json (p, &len);
  g_autoptr (GError) e = NULL;
  g_autoptr (SgPlan) q = sg_plan_load_data (a, len, "a", &e);
  ck_assert_msg (q != NULL, "%s", e ? e->message : "");
  ck_assert (q->ins[2].pred_end_us == 3.5e203);
  ck_assert (q->ins[2].est_us == 1e12);
  g_autofree char *b = sg_plan_to_json (q, NULL);
  ck_assert_str_eq (a, b);
}
END_TEST

/* The word-at-a-time FNV-1a is the byte-at-a-time one at every length,
 * alignment and split point. */
START_TEST (fnv1a_by_words_equals_fnv1a_by_bytes_at_every_length_and_split)
{
  char text[80];
  for (size_t i = 0; i < sizeof text; i++)
    text[i] = (char)(i * 37 + 11);
  for (size_t off = 0; off < 8; off++)
    for (size_t len = 0; off + len <= sizeof text; len++) {
      uint64_t want = UINT64_C (0xcbf29ce484222325);
      for (size_t i = 0; i < len; i++)
        want = (want ^ (unsigned char)text[off + i]) * UINT64_C (0x100000001b3);
      ck_assert_uint_eq (sg_plan_fnv1a (text + off, len), want);
      for (size_t cut = 0; cut <= len; cut++)
        ck_assert_uint_eq (sg_plan_fnv1a_more (sg_plan_fnv1a (text + off, cut), text + off + cut,
                                               len - cut),
                           want);
    }
  /* the published FNV-1a 64 vectors */
  ck_assert_uint_eq (sg_plan_fnv1a ("a", 1), UINT64_C (0xaf63dc4c8601ec8c));
  ck_assert_uint_eq (sg_plan_fnv1a ("foobar", 6), UINT64_C (0x85944171f73967e8));
}
END_TEST

/* Pieces hashed apart and combined (plan-hash.c) give the one pass's
 * hash from any state, for any cut into any number of pieces, empty ones
 * and ones shorter than a word included. */
START_TEST (pieces_hashed_apart_combine_to_fnv1a_at_any_split)
{
  GRand *rnd = g_rand_new_with_seed (16);
  char text[6000];
  for (int trial = 0; trial < 400; trial++) {
    size_t len = (size_t)g_rand_int_range (rnd, 0, trial < 200 ? 40 : (int)sizeof text);
    for (size_t i = 0; i < len; i++)
      text[i] = (char)g_rand_int_range (rnd, 0, 256);
    uint64_t h = ((uint64_t)g_rand_int (rnd) << 32) | g_rand_int (rnd);
    int n = g_rand_int_range (rnd, 1, 11);
    size_t cut[12];
    cut[0] = 0;
    cut[n] = len;
    for (int k = 1; k < n; k++)
      cut[k] = (size_t)g_rand_int_range (rnd, 0, (int)len + 1);
    for (int k = 1; k < n; k++) /* sorted: pieces in text order */
      for (int j = k; j > 1 && cut[j - 1] > cut[j]; j--) {
        size_t t = cut[j];
        cut[j] = cut[j - 1];
        cut[j - 1] = t;
      }
    SgHashPiece pc[12];
    for (int k = 0; k < n; k++)
      pc[k] = (SgHashPiece){ .data = text + cut[k], .len = cut[k + 1] - cut[k] };
    ck_assert_uint_eq (sg_hash_pieces (h, pc, n), sg_plan_fnv1a_more (h, text, len));
  }
  g_rand_free (rnd);
}
END_TEST

/* A long text hashed on one thread as pieces at once (the writer's and
 * sg_plan_to_json's hash) gives the one pass's hash from any state, at
 * lengths around the threshold and well above it. */
START_TEST (long_text_hashed_in_pieces_on_one_thread_equals_fnv1a)
{
  GRand *rnd = g_rand_new_with_seed (13);
  const size_t most = 4 * SG_PLAN_FNV_LONG + 77;
  g_autofree char *text = g_malloc (most);
  for (size_t i = 0; i < most; i++)
    text[i] = (char)g_rand_int_range (rnd, 0, 256);
  const size_t lens[] = { 0, 1, 7, SG_PLAN_FNV_LONG - 1, SG_PLAN_FNV_LONG,
                          SG_PLAN_FNV_LONG + 1, SG_PLAN_FNV_LONG + 13, 2 * SG_PLAN_FNV_LONG + 5,
                          most };
  for (size_t k = 0; k < G_N_ELEMENTS (lens); k++)
    for (size_t off = 0; off < 3; off++) {
      const size_t len = MIN (lens[k], most - off);
      uint64_t h = ((uint64_t)g_rand_int (rnd) << 32) | g_rand_int (rnd);
      ck_assert_uint_eq (sg_plan_fnv1a_long (h, text + off, len),
                         sg_plan_fnv1a_more (h, text + off, len));
    }
  g_rand_free (rnd);
}
END_TEST

START_TEST (plan_hash_is_fnv1a_of_text_with_zero_hash_without_the_graph_line)
{
  g_autoptr (SgPlan) p = small_plan ();
  g_autofree char *a = sg_plan_to_json (p, NULL);
  char hex[17];
  g_snprintf (hex, sizeof hex, "%016" G_GINT64_MODIFIER "x", p->hash);
  ck_assert_ptr_nonnull (strstr (a, hex));
  g_autofree char *zero = replace_once (a, hex, "0000000000000000");
  g_autofree char *content = replace_once (zero, "\"graph\":\"small \\\"test\\\"\\n\",\n", "");
  uint64_t h = UINT64_C (0xcbf29ce484222325);
  for (const unsigned char *c = (const unsigned char *)content; *c; c++)
    h = (h ^ *c) * UINT64_C (0x100000001b3);
  ck_assert_uint_eq (h, p->hash);
  /* another option text gives another hash */
  g_free (p->options);
  p->options = g_strdup ("reorder=0");
  g_free (sg_plan_to_json (p, NULL));
  ck_assert_uint_ne (h, p->hash);
}
END_TEST

START_TEST (the_graph_file_name_does_not_change_the_hash)
{
  /* Ranks that planned copies of one graph under other names (issue 18)
   * must agree on the plan. */
  g_autoptr (SgPlan) p = small_plan ();
  g_autofree char *a = sg_plan_to_json (p, NULL);
  uint64_t h = p->hash;
  g_free (p->graph);
  p->graph = g_strdup ("copy-of-the-graph.json");
  size_t len;
  g_autofree char *b = sg_plan_to_json (p, &len);
  ck_assert_uint_eq (p->hash, h);
  ck_assert_str_ne (a, b);
  g_autoptr (GError) e = NULL;
  g_autoptr (SgPlan) q = sg_plan_load_data (b, len, "b", &e);
  ck_assert_msg (q != NULL, "%s", e ? e->message : "");
  ck_assert_str_eq (q->graph, "copy-of-the-graph.json");
}
END_TEST

START_TEST (the_hash_field_must_be_canonical_lower_case_hex)
{
  g_autoptr (SgPlan) p = small_plan ();
  g_autofree char *a = sg_plan_to_json (p, NULL);
  char hex[17];
  g_snprintf (hex, sizeof hex, "%016" G_GINT64_MODIFIER "x", p->hash);
  g_autofree char *upper = g_ascii_strup (hex, -1);
  ck_assert_str_ne (upper, hex); /* the hash has a letter */
  g_autofree char *text = replace_once (a, hex, upper);
  expect_reject (text, strlen (text), SG_PLAN_ERROR_INVALID, "16 lower-case hex digits");
  g_autofree char *sign = replace_once (a, hex, "+00000000000000a");
  expect_reject (sign, strlen (sign), SG_PLAN_ERROR_INVALID, "16 lower-case hex digits");
}
END_TEST

START_TEST (a_collective_without_reduce_and_dtype_sets_one_error)
{
  /* Each field fails once: GLib aborts this test (fatal warnings, main)
   * on an error set over another. */
  g_autoptr (SgPlan) p = small_plan ();
  g_autofree char *a = sg_plan_to_json (p, NULL);
  g_autofree char *b = replace_once (a, ",\"dtype\":\"bfloat16\",\"reduce\":\"none\"", "");
  expect_reject (b, strlen (b), SG_PLAN_ERROR_INVALID, "ins[2].dtype: missing");
}
END_TEST

START_TEST (numbers_that_are_not_finite_and_nul_escapes_are_rejected)
{
  g_autoptr (SgPlan) p = small_plan ();
  g_autofree char *a = sg_plan_to_json (p, NULL);
  /* cJSON parses 1e400 as infinity and would print it back as null */
  g_autofree char *inf = replace_once (a, "2.5", "1e400");
  expect_reject (inf, strlen (inf), SG_PLAN_ERROR_PARSE, "number 1e400 is out of range");
  g_autofree char *nul = replace_once (a, "{\"name\":\"w\"", "{\"name\":\"w\\u0000x\"");
  expect_reject (nul, strlen (nul), SG_PLAN_ERROR_PARSE, "\\u0000 (NUL) in a string");
  g_autofree char *bom = g_strconcat ("\xEF\xBB\xBF", a, NULL);
  expect_reject (bom, strlen (bom), SG_PLAN_ERROR_PARSE, "byte-order mark");
  GString *deep = g_string_new (NULL);
  for (int i = 0; i < 5000; i++)
    g_string_append_c (deep, '[');
  for (int i = 0; i < 5000; i++)
    g_string_append_c (deep, ']');
  g_autofree char *nest = replace_once (a, "2.5", deep->str);
  g_string_free (deep, TRUE);
  expect_reject (nest, strlen (nest), SG_PLAN_ERROR_PARSE, "nesting deeper than 1000 levels");
}
END_TEST

START_TEST (arg_accessors_read_kernel_arguments)
{
  g_autoptr (SgPlan) p = small_plan ();
  const SgPlanIns *k = &p->ins[5];
  int32_t v;
  int64_t x, l[4];
  double d;
  ck_assert (sg_plan_arg_value (k, 1, &v) && v == 3);
  ck_assert (!sg_plan_arg_value (k, 2, &v));
  ck_assert_int_eq (sg_plan_arg_ints (k, 2, l, 4), 3);
  ck_assert_int_eq (l[2], -3);
  ck_assert_int_eq (sg_plan_arg_ints (k, 2, l, 2), -1);
  ck_assert (sg_plan_arg_double (k, 3, &d) && d == 2.5);
  ck_assert (!sg_plan_arg_int (k, 3, &x));
  ck_assert (sg_plan_arg_int (k, 4, &x) && x == 1);
  ck_assert (!sg_plan_arg_int (k, 9, &x));
  ck_assert_ptr_nonnull (sg_plan_kwarg (k, "alpha"));
  ck_assert_ptr_null (sg_plan_kwarg (k, "beta"));
}
END_TEST

/* The writer prints kernel arguments itself (no cJSON allocation per
 * instruction): its text must stay cJSON_PrintUnformatted's, byte for byte,
 * for every kind of JSON value (integers, fractions, large and negative
 * numbers, escapes, nesting, empty containers, keys that need escapes). */
START_TEST (kernel_arguments_are_written_as_cjson_prints_them)
{
  static const char *const args[] = {
    "[0,-1,2147483647,-2147483648,2147483648,-2147483649,1e300,-0.0,4503599627370497]",
    "[0.1,2.5,1e-06,-3.25e-12,0.30000000000000004,123456789.123,1.7976931348623157e308]",
    "[\"\",\"a\\\"b\",\"back\\\\slash\",\"\\b\\f\\n\\r\\t\\u0001\\u001f\",\"\u00e9\u4e2d\"]",
    "[[],{},[[[]]],{\"a\":{\"b\":[true,false,null]}},{\"\\n\\u0002\":\"k\"}]",
  };
  for (size_t i = 0; i < G_N_ELEMENTS (args); i++) {
    g_autoptr (SgPlan) p = small_plan ();
    SgPlanIns *k = &p->ins[5];
    cJSON_Delete (k->args);
    k->args = cJSON_Parse (args[i]);
    ck_assert_msg (k->args != NULL, "test setup: %s", args[i]);
    char *want = cJSON_PrintUnformatted (k->args);
    g_autofree char *needle = g_strdup_printf ("\"args\":%s,\"kwargs\":{\"alpha\":1}", want);
    cJSON_free (want);
    g_autofree char *text = sg_plan_to_json (p, NULL);
    ck_assert_msg (strstr (text, needle) != NULL, "%s not in the plan text", needle);
  }
}
END_TEST

START_TEST (write_file_is_atomic_and_loads_back)
{
  g_autoptr (SgPlan) p = small_plan ();
  g_autoptr (GError) e = NULL;
  g_autofree char *dir = g_dir_make_tmp ("sgplan-XXXXXX", &e);
  ck_assert_ptr_nonnull (dir);
  g_autofree char *path = g_build_filename (dir, "plan.json", NULL);
  ck_assert_msg (sg_plan_write_file (p, path, &e), "%s", e ? e->message : "");
  g_autoptr (SgPlan) q = sg_plan_load (path, &e);
  ck_assert_msg (q != NULL, "%s", e ? e->message : "");
  ck_assert_uint_eq (q->hash, p->hash);
  /* a path in a missing directory fails with IO and leaves nothing behind */
  g_autofree char *bad_path = g_build_filename (dir, "missing", "plan.json", NULL);
  ck_assert (!sg_plan_write_file (p, bad_path, &e) && e->code == SG_PLAN_ERROR_IO);
  ck_assert (!g_file_test (bad_path, G_FILE_TEST_EXISTS));
  g_clear_error (&e);
  ck_assert_ptr_null (sg_plan_load (bad_path, &e));
  ck_assert_int_eq (e->code, SG_PLAN_ERROR_IO);
  g_unlink (path);
  g_rmdir (dir);
}
END_TEST

/* small_plan with 30000 more values: its text (about 3 MB) spans several
 * of the writer's pieces. */
static SgPlan *
big_plan (void)
{
  SgPlan *p = small_plan ();
  int32_t extra = 30000;
  p->values = g_renew (SgPlanValue, p->values, (size_t)(p->n_values + extra));
  memset (&p->values[p->n_values], 0, sizeof (SgPlanValue) * (size_t)extra);
  for (int32_t i = 0; i < extra; i++) {
    g_autofree char *name = g_strdup_printf ("unused_value_%d_with_a_long_name_to_fill_pieces", i);
    set_value (p, &p->values[p->n_values + i], name, -1, SG_DTYPE_F32, 2, 3, SG_INIT_NONE);
  }
  p->n_values += extra;
  return p;
}

/* A plan written in pieces: the file holds exactly sg_plan_to_json's text,
 * hash included, and loads back. */
START_TEST (a_plan_written_in_pieces_is_its_text)
{
  g_autoptr (SgPlan) p = big_plan ();
  size_t len;
  g_autofree char *text = sg_plan_to_json (p, &len);
  ck_assert_uint_gt (len, 3u << 20);
  uint64_t hash = p->hash;
  g_autoptr (GError) e = NULL;
  g_autofree char *dir = g_dir_make_tmp ("sgplan-XXXXXX", &e);
  g_autofree char *path = g_build_filename (dir, "plan.json", NULL);
  ck_assert_msg (sg_plan_write_file (p, path, &e), "%s", e ? e->message : "");
  ck_assert_uint_eq (p->hash, hash);
  g_autofree char *back = NULL;
  size_t back_len;
  ck_assert (g_file_get_contents (path, &back, &back_len, NULL));
  ck_assert_uint_eq (back_len, len);
  ck_assert (memcmp (back, text, len) == 0);
  g_autoptr (SgPlan) q = sg_plan_load (path, &e);
  ck_assert_msg (q != NULL, "%s", e ? e->message : "");
  ck_assert_uint_eq (q->hash, hash);
  g_unlink (path);
  g_rmdir (dir);
}
END_TEST

/* A runner that runs the tasks last first, on this thread: a writer that
 * relied on the order of its tasks would write another text. */
static void
run_backwards (gpointer pool, int32_t n_tasks, SgPlanTaskFunc fn, gpointer ctx)
{
  (void)pool;
  for (int32_t t = n_tasks - 1; t >= 0; t--)
    fn (ctx, t, t % 3);
}

/* Written by "several workers" (rounds of tasks, the hash in pieces), the
 * file is still sg_plan_to_json's text, hash included. */
START_TEST (a_plan_written_by_several_workers_is_its_text)
{
  g_autoptr (SgPlan) p = big_plan ();
  size_t len;
  g_autofree char *text = sg_plan_to_json (p, &len);
  uint64_t hash = p->hash;
  g_autoptr (GError) e = NULL;
  g_autofree char *dir = g_dir_make_tmp ("sgplan-XXXXXX", &e);
  g_autofree char *path = g_build_filename (dir, "plan.json", NULL);
  for (int32_t workers = 1; workers <= 5; workers++) {
    const SgPlanRunner runner = { run_backwards, NULL, workers };
    p->hash = 0;
    ck_assert_msg (sg_plan_write_file_with (p, path, &runner, &e), "%s", e ? e->message : "");
    ck_assert_uint_eq (p->hash, hash);
    g_autofree char *back = NULL;
    size_t back_len;
    ck_assert (g_file_get_contents (path, &back, &back_len, NULL));
    ck_assert_uint_eq (back_len, len);
    ck_assert (memcmp (back, text, len) == 0);
  }
  g_unlink (path);
  g_rmdir (dir);
}
END_TEST

/* A write that fails after some pieces reached the disk (the file size
 * limit stops it at 1 MB of about 3): an IO error, the plan already at the
 * path unchanged, and no temporary file left beside it. */
START_TEST (a_write_failing_midway_leaves_the_old_plan_and_no_temporary)
{
  g_autoptr (SgPlan) old = small_plan ();
  g_autoptr (SgPlan) p = big_plan ();
  g_autoptr (GError) e = NULL;
  g_autofree char *dir = g_dir_make_tmp ("sgplan-XXXXXX", &e);
  g_autofree char *path = g_build_filename (dir, "plan.json", NULL);
  ck_assert_msg (sg_plan_write_file (old, path, &e), "%s", e ? e->message : "");
  g_autofree char *before = NULL;
  ck_assert (g_file_get_contents (path, &before, NULL, NULL));

  /* one thread, and "three" (tasks in rounds, the hash in pieces) */
  const SgPlanRunner three = { run_backwards, NULL, 3 };
  for (int k = 0; k < 2; k++) {
    struct rlimit was, lim;
    ck_assert_int_eq (getrlimit (RLIMIT_FSIZE, &was), 0);
    lim = was;
    lim.rlim_cur = 1u << 20;
    signal (SIGXFSZ, SIG_IGN); /* the write fails with EFBIG instead */
    ck_assert_int_eq (setrlimit (RLIMIT_FSIZE, &lim), 0);
    g_clear_error (&e);
    bool ok = sg_plan_write_file_with (p, path, k ? &three : NULL, &e);
    ck_assert_int_eq (setrlimit (RLIMIT_FSIZE, &was), 0);
    ck_assert (!ok);
    ck_assert_int_eq (e->code, SG_PLAN_ERROR_IO);
    ck_assert_ptr_nonnull (strstr (e->message, path));

    g_autofree char *after = NULL;
    ck_assert (g_file_get_contents (path, &after, NULL, NULL));
    ck_assert_str_eq (after, before);
    g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
    const char *name;
    int n = 0;
    while ((name = g_dir_read_name (d)) != NULL) {
      ck_assert_str_eq (name, "plan.json");
      n++;
    }
    ck_assert_int_eq (n, 1);
  }
  g_unlink (path);
  g_rmdir (dir);
}
END_TEST

/* The memory rule as it was first written (an ordered tree of the live
 * buffers' offsets), the reference for sg_plan_check_memory. */
static int
cmp_u64 (gconstpointer a, gconstpointer b, gpointer data)
{
  (void)data;
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static char *
memory_rule_by_tree (const SgPlan *p)
{
  int32_t n = 0;
  g_autofree int32_t *by_first = g_new (int32_t, (size_t)p->n_buffers + 1);
  for (int32_t b = 0; b < p->n_buffers; b++)
    if (p->buffers[b].bytes > 0)
      by_first[n++] = b;
  g_autofree int32_t *by_last = g_memdup2 (by_first, sizeof (int32_t) * ((size_t)n + 1));
  sg_plan_sort_buffers_by_time (p, by_first, n, false);
  sg_plan_sort_buffers_by_time (p, by_last, n, true);
  GTree *live = g_tree_new_full (cmp_u64, NULL, NULL, NULL);
  char *msg = NULL;
  int32_t r = 0;
  for (int32_t k = 0; k < n && !msg; k++) {
    int32_t b = by_first[k];
    const SgPlanBuffer *x = &p->buffers[b];
    for (; r < n && p->buffers[by_last[r]].last_ins < x->first_ins; r++)
      g_tree_remove (live, &p->buffers[by_last[r]].offset);
    GTreeNode *next = g_tree_lower_bound (live, &x->offset);
    GTreeNode *prev = next ? g_tree_node_previous (next) : g_tree_node_last (live);
    int32_t hit = -1;
    if (next && p->buffers[GPOINTER_TO_INT (g_tree_node_value (next))].offset < x->offset + x->bytes)
      hit = GPOINTER_TO_INT (g_tree_node_value (next));
    if (hit < 0 && prev) {
      int32_t y = GPOINTER_TO_INT (g_tree_node_value (prev));
      if (p->buffers[y].offset + p->buffers[y].bytes > x->offset)
        hit = y;
    }
    if (hit >= 0)
      msg = g_strdup_printf ("buffers[%d] overlaps buffers[%d]", b, hit);
    else
      g_tree_insert (live, (gpointer)&x->offset, GINT_TO_POINTER (b));
  }
  g_tree_destroy (live);
  return msg;
}

/* sg_plan_check_memory (a set of ranks by offset) finds the first overlap
 * the tree found, on random buffers: crowded and sparse arenas, equal
 * offsets, empty buffers, offsets beyond 32 bits, buffers live for the
 * whole step; on "2 to 9 workers" (slabs of time) the same verdict. */
START_TEST (memory_rule_finds_the_overlap_the_tree_found)
{
  GRand *rnd = g_rand_new_with_seed (7);
  int overlaps = 0;
  for (int trial = 0; trial < 3000; trial++) {
    g_autoptr (SgPlan) p = sg_plan_new ();
    p->n_ins = 160;
    p->n_buffers = g_rand_int_range (rnd, 0, trial % 10 ? 40 : 700);
    p->buffers = g_new0 (SgPlanBuffer, (size_t)p->n_buffers + 1);
    const int32_t slots = g_rand_int_range (rnd, 1, 4 * p->n_buffers + 2);
    const int32_t span = g_rand_int_range (rnd, 1, 60);
    const uint64_t scale = trial % 3 ? 256 : (UINT64_C (1) << 40);
    for (int32_t b = 0; b < p->n_buffers; b++) {
      SgPlanBuffer *x = &p->buffers[b];
      x->offset = (uint64_t)g_rand_int_range (rnd, 0, slots) * scale;
      x->bytes = g_rand_int_range (rnd, 0, 8) ? (uint64_t)g_rand_int_range (rnd, 1, 4) * scale
                                                 - (uint64_t)g_rand_int_range (rnd, 0, 2)
                                              : 0;
      x->first_ins = g_rand_int_range (rnd, 0, 100);
      x->last_ins = x->first_ins + g_rand_int_range (rnd, 0, span);
      if (g_rand_int_range (rnd, 0, 8) == 0) /* the whole step */
        x->first_ins = 0, x->last_ins = p->n_ins - 1;
    }
    g_autofree char *want = memory_rule_by_tree (p);
    g_autoptr (GError) e = NULL;
    bool ok = sg_plan_check_memory (p, &e);
    ck_assert_msg (ok == (want == NULL), "trial %d: %s", trial, want ? want : e->message);
    const SgPlanRunner some = { run_backwards, NULL, 2 + trial % 8 };
    ck_assert_msg (sg_plan_check_memory_with (p, &some) == ok, "trial %d, %d workers", trial,
                   some.n_workers);
    p->n_ins = 0; /* lifetimes only: there is no instruction array */
    if (want) {
      overlaps++;
      /* "buffers[B] [..) live [..] overlaps buffers[H] [..": the same B and H */
      int32_t b, h, wb, wh;
      ck_assert_int_eq (sscanf (e->message, "buffers[%d] %*[^o]overlaps buffers[%d]", &b, &h), 2);
      ck_assert_int_eq (sscanf (want, "buffers[%d] overlaps buffers[%d]", &wb, &wh), 2);
      ck_assert_int_eq (b, wb);
      ck_assert_int_eq (h, wh);
    }
  }
  ck_assert_int_gt (overlaps, 500);
  ck_assert_int_lt (overlaps, 2900);
  g_rand_free (rnd);
}
END_TEST

/* (key, position) order: what a stable sort by key gives. */
static const uint64_t *cmp_keys;
static int
by_key_then_position (const void *x, const void *y)
{
  const int32_t *a = x, *b = y; /* {id, position} */
  if (cmp_keys[a[0]] != cmp_keys[b[0]])
    return cmp_keys[a[0]] < cmp_keys[b[0]] ? -1 : 1;
  return (a[1] > b[1]) - (a[1] < b[1]);
}

/* The radix sort shared by the memory rule and codegen's packer: stable,
 * ascending, whatever the keys' widths and a bound above the largest. */
START_TEST (ids_sort_by_key_stably_with_any_bound_above_the_keys)
{
  GRand *r = g_rand_new_with_seed (5);
  for (int trial = 0; trial < 200; trial++) {
    const int32_t n = g_rand_int_range (r, 0, 3000), n_ids = n + 7;
    const int bits = g_rand_int_range (r, 1, 64);
    g_autofree uint64_t *key = g_new (uint64_t, (size_t)n_ids);
    uint64_t top = 0;
    for (int32_t k = 0; k < n_ids; k++) {
      key[k] = ((uint64_t)g_rand_int (r) << 32 | g_rand_int (r)) >> (64 - bits);
      if (g_rand_boolean (r))
        key[k] >>= g_rand_int_range (r, 0, bits); /* many ties at small keys */
    }
    g_autofree int32_t *ids = g_new (int32_t, (size_t)n + 1);
    g_autofree int32_t *pairs = g_new (int32_t, 2 * (size_t)n + 2);
    for (int32_t k = 0; k < n; k++) {
      ids[k] = g_rand_int_range (r, 0, n_ids);
      pairs[2 * k] = ids[k];
      pairs[2 * k + 1] = k;
      top = MAX (top, key[ids[k]]);
    }
    if (trial % 2 && top < UINT64_MAX / 4)
      top = top * 4 + 3;
    sg_plan_sort_by_key (ids, n, key, top);
    cmp_keys = key;
    qsort (pairs, (size_t)n, 2 * sizeof (int32_t), by_key_then_position);
    for (int32_t k = 0; k < n; k++)
      ck_assert_int_eq (ids[k], pairs[2 * k]);
  }
  g_rand_free (r);
}
END_TEST

START_TEST (truncated_plan_is_rejected_at_every_length)
{
  g_autoptr (SgPlan) p = small_plan ();
  size_t len;
  g_autofree char *a = sg_plan_to_json (p, &len);
  for (size_t cut = 0; cut < len - 2; cut += 1 + cut / 64) {
    g_autoptr (GError) e = NULL;
    SgPlan *q = sg_plan_load_data (a, cut, "t.json", &e);
    ck_assert_msg (q == NULL, "truncated at %zu accepted", cut);
    ck_assert_int_eq (e->code, SG_PLAN_ERROR_PARSE);
    ck_assert_msg (strstr (e->message, cut ? "truncated" : "empty"), "cut %zu: %s", cut,
                   e->message);
  }
}
END_TEST

START_TEST (corrupt_plans_are_rejected_with_a_clear_message)
{
  g_autoptr (SgPlan) p = small_plan ();
  size_t len;
  g_autofree char *a = sg_plan_to_json (p, &len);
  g_autofree char *junk = replace_once (a, "\"values\":[", "\"values\":[}{");
  expect_reject (junk, strlen (junk), SG_PLAN_ERROR_PARSE, "corrupt");
  g_autofree char *trail = g_strdup_printf ("%s}", a);
  expect_reject (trail, strlen (trail), SG_PLAN_ERROR_PARSE, "trailing");
  g_autofree char *fmt = replace_once (a, "schedgraph.plan", "schedgraph.graph");
  expect_reject (fmt, strlen (fmt), SG_PLAN_ERROR_VERSION, "not a schedgraph plan");
  g_autofree char *ver = replace_once (a, "\"version\":1", "\"version\":2");
  expect_reject (ver, strlen (ver), SG_PLAN_ERROR_VERSION, "version 2");
  /* one changed byte of content: the hash catches it */
  g_autofree char *edit = replace_once (a, "\"count\":64", "\"count\":65");
  expect_reject (edit, strlen (edit), SG_PLAN_ERROR_HASH, "hash mismatch");
  g_autofree char *hash = replace_once (a, "\"hash\":\"", "\"hash\":\"x");
  expect_reject (hash, strlen (hash), SG_PLAN_ERROR_INVALID, "hash");
  g_autofree char *type = replace_once (a, "\"world_size\":2", "\"world_size\":\"2\"");
  expect_reject (type, strlen (type), SG_PLAN_ERROR_INVALID, "world_size");
  g_autofree char *miss = replace_once (a, "\"event\":1,\"coll\":2", "\"event\":1");
  expect_reject (miss, strlen (miss), SG_PLAN_ERROR_INVALID, "ins[4].coll: missing");
  g_autofree char *kind = replace_once (a, "\"kind\":\"free\"", "\"kind\":\"launch\"");
  expect_reject (kind, strlen (kind), SG_PLAN_ERROR_INVALID, "ins[6].kind");
}
END_TEST

/* Re-serialises @p after a broken rule so the hash matches: only the
 * validator stands between the broken plan and a backend. Frees @p. */
static void
expect_invalid_and_free (SgPlan *p, const char *needle)
{
  /* on "three workers" (tasks run last first): the same first error */
  const SgPlanRunner three = { run_backwards, NULL, 3 };
  g_autoptr (GError) one = NULL, many = NULL;
  ck_assert (!sg_plan_validate (p, &one));
  ck_assert (!sg_plan_validate_with (p, &three, NULL, NULL, &many));
  ck_assert_str_eq (many->message, one->message);
  size_t len;
  g_autofree char *text = sg_plan_to_json (p, &len);
  sg_plan_free (p);
  expect_reject (text, len, SG_PLAN_ERROR_INVALID, needle);
}

START_TEST (out_of_range_indices_are_rejected_naming_the_field)
{
  SgPlan *p;
  p = small_plan ();
  p->ins[5].in[1] = 99;
  expect_invalid_and_free (p, "in value 99 out of range");
  p = small_plan ();
  p->ins[0].event = 7;
  expect_invalid_and_free (p, "ins[0].event 7: out of range");
  p = small_plan ();
  p->ins[6].buffer = 4;
  expect_invalid_and_free (p, "ins[6].buffer 4: out of range");
  p = small_plan ();
  p->ins[2].group = 1;
  expect_invalid_and_free (p, "group 1: out of range");
  p = small_plan ();
  p->values[2].buffer = 9;
  expect_invalid_and_free (p, "values[2] \"ag\".buffer 9: out of range");
  p = small_plan ();
  p->outputs[0] = 5;
  expect_invalid_and_free (p, "outputs[0] = 5");
  p = small_plan ();
  p->ins[5].stream = 3;
  expect_invalid_and_free (p, "ins[5].stream 3");
  p = small_plan (); /* sizes that would make the validator allocate gigabytes */
  p->n_events = 2000000000;
  expect_invalid_and_free (p, "n_events 2000000000");
  p = small_plan ();
  p->world_size = 2000000000;
  expect_invalid_and_free (p, "world_size 2000000000");
}
END_TEST

START_TEST (broken_stream_rules_are_rejected)
{
  SgPlan *p;
  p = small_plan (); /* wait before record */
  p->ins[1].event = 1;
  expect_invalid_and_free (p, "before any RECORD");
  p = small_plan (); /* collective on the compute stream */
  p->ins[2].stream = 0;
  expect_invalid_and_free (p, "must run on stream 1");
  p = small_plan (); /* count that does not match the operands */
  p->ins[2].count = 32;
  expect_invalid_and_free (p, "count 32");
  p = small_plan (); /* wait_tensor pointing at a kernel */
  p->ins[4].coll = 5;
  expect_invalid_and_free (p, "not an earlier collective");
  p = small_plan (); /* collective never waited */
  p->ins[4].coll = -1;
  expect_invalid_and_free (p, "no WAIT_EVENT waits for it");
  p = small_plan (); /* event recorded twice */
  p->ins[3].event = 0;
  expect_invalid_and_free (p, "recorded twice");
}
END_TEST

START_TEST (broken_memory_rules_are_rejected)
{
  SgPlan *p;
  p = small_plan (); /* ag's buffer dies before the wait */
  p->buffers[2].last_ins = 3;
  expect_invalid_and_free (p, "dies at ins[3], before its wait ins[4]");
  p = small_plan (); /* y written before its buffer's lifetime starts */
  p->buffers[3].first_ins = 6;
  expect_invalid_and_free (p, "outside its buffer 3's lifetime [6, 6]");
  p = small_plan (); /* freed while live */
  p->buffers[2].last_ins = 6;
  expect_invalid_and_free (p, "live until ins[6]");
  p = small_plan (); /* y overlaps x while both live */
  p->buffers[3].offset = 0;
  expect_invalid_and_free (p, "overlaps");
  p = small_plan (); /* y may reuse ag's memory only after ag dies: it does not here */
  p->buffers[3].offset = 512;
  expect_invalid_and_free (p, "overlaps");
  p = small_plan (); /* misaligned */
  p->buffers[3].offset = 800;
  expect_invalid_and_free (p, "not 256-byte aligned");
  p = small_plan (); /* outside the arena */
  p->arena_bytes = 880;
  expect_invalid_and_free (p, "does not fit arena_bytes");
  p = small_plan (); /* a view reaching past its buffer */
  p->values[3].offset = 2;
  expect_invalid_and_free (p, "reach past buffers[2]");
  p = small_plan (); /* a stride whose extent overflows 64 bits */
  p->values[3].stride[1] = INT64_C (4000000000000000);
  p->values[3].shape[1] = 8000;
  expect_invalid_and_free (p, "reach past buffers[2]");
  p = small_plan (); /* read before written */
  p->ins[5].in[1] = 4;
  p->ins[5].out[0] = 3;
  expect_invalid_and_free (p, "before anything writes");
  p = small_plan (); /* an output that dies early */
  p->buffers[3].last_ins = 5;
  expect_invalid_and_free (p, "not at the end");
}
END_TEST

/* Memory reuse across streams. x (input) -> k1 -> h -> k2 -> g; an
 * all_reduce on stream 1 writes o into h's bytes after h's FREE; y = k3 (o, g).
 * @variant 0: RECORD e0 after the FREE (safe); 1: RECORD e0 before k2, so the
 * collective may overwrite h while k2 reads it; 2: h never freed. */
static SgPlan *
reuse_plan (int variant)
{
  SgPlan *p = two_rank_plan ();
  p->n_values = 5;
  p->values = g_new0 (SgPlanValue, 5);
  const char *names[] = { "x", "h", "g", "o", "y" };
  for (int v = 0; v < 5; v++) {
    set_value (p, &p->values[v], names[v], v, SG_DTYPE_F32, 1, 8, v ? SG_INIT_NONE : SG_INIT_INPUT);
    p->values[v].ndim = 1;
    p->values[v].shape[0] = 8;
    p->values[v].stride[0] = 1;
  }
  p->n_inputs = 1;
  p->inputs = ids (1, 0);
  p->n_outputs = 1;
  p->outputs = ids (1, 4);
  p->ins = g_new0 (SgPlanIns, 12);
  int n = 0;
#define KERNEL(NM, A, B, OUT)                                                                    \
  do {                                                                                         \
    SgPlanIns *k_ = &p->ins[n++];                                                              \
    *k_ = ins_new (SG_INS_KERNEL, 0);                                                          \
    k_->name = sg_plan_str (p, NM, false);                                                     \
    k_->op = SG_OP_ADD_TENSOR;                                                                 \
    k_->target = sg_plan_str (p, "aten.add.Tensor", true);                                     \
    k_->in = (B) >= 0 ? ids (2, A, B) : ids (1, A);                                            \
    k_->n_in = (B) >= 0 ? 2 : 1;                                                               \
    k_->out = ids (1, OUT);                                                                    \
    k_->n_out = 1;                                                                             \
  } while (0)
  int at[4]; /* instruction index of k1, k2, coll, k3 */
  at[0] = n;
  KERNEL ("k1", 0, -1, 1);
  if (variant == 1) {
    p->ins[n] = ins_new (SG_INS_RECORD, 0);
    p->ins[n++].event = 0;
  }
  at[1] = n;
  KERNEL ("k2", 1, -1, 2);
  int free_h = -1;
  if (variant != 2) {
    free_h = n;
    p->ins[n] = ins_new (SG_INS_FREE, 0);
    p->ins[n++].buffer = 1;
  }
  if (variant != 1) {
    p->ins[n] = ins_new (SG_INS_RECORD, 0);
    p->ins[n++].event = 0;
  }
  p->ins[n] = ins_new (SG_INS_WAIT_EVENT, 1);
  p->ins[n++].event = 0;
  at[2] = n;
  SgPlanIns *c = &p->ins[n++];
  *c = coll_new (p, "ar", SG_OP_ALL_REDUCE, 0, 3, SG_DTYPE_F32, 8);
  c->reduce = SG_REDUCE_SUM;
  p->ins[n] = ins_new (SG_INS_RECORD, 1);
  p->ins[n++].event = 1;
  p->ins[n] = ins_new (SG_INS_WAIT_EVENT, 0);
  p->ins[n].event = 1;
  p->ins[n++].coll = at[2];
  at[3] = n;
  KERNEL ("k3", 3, 2, 4);
#undef KERNEL
  p->ins[n] = ins_new (SG_INS_FREE, 0);
  p->ins[n++].buffer = 2;
  p->ins[n] = ins_new (SG_INS_FREE, 0);
  p->ins[n++].buffer = 3;
  p->n_ins = n;
  p->n_buffers = 5;
  p->buffers = g_new0 (SgPlanBuffer, 5);
  p->buffers[0] = (SgPlanBuffer){ 0, 32, 0, n - 1 };
  p->buffers[1] = (SgPlanBuffer){ 256, 32, at[0], at[1] };
  p->buffers[2] = (SgPlanBuffer){ 512, 32, at[1], at[3] };
  p->buffers[3] = (SgPlanBuffer){ 256, 32, at[2], at[3] }; /* h's bytes */
  p->buffers[4] = (SgPlanBuffer){ 768, 32, at[3], n - 1 };
  p->arena_bytes = 1024;
  ck_assert (free_h < 0 || free_h > at[1]);
  return p;
}

START_TEST (memory_reuse_across_streams_needs_an_event_after_the_free)
{
  g_autoptr (GError) e = NULL;
  g_autoptr (SgPlan) safe = reuse_plan (0);
  ck_assert_msg (sg_plan_validate (safe, &e), "%s", e ? e->message : "");
  SgPlan *p = reuse_plan (1);
  expect_invalid_and_free (p, "first touches buffers[3] without waiting for the FREE");
  p = reuse_plan (2);
  expect_invalid_and_free (p, "buffers[1] dies at ins[1] but is never freed");
}
END_TEST

START_TEST (a_read_needs_an_event_after_its_write)
{
  /* RECORD e0 moved in front of k1, and the all_reduce reads g (k2's
   * output): stream 1 waits on an event that predates g's write. */
  SgPlan *p = reuse_plan (0);
  SgPlanIns rec = p->ins[3];
  memmove (&p->ins[1], &p->ins[0], sizeof (SgPlanIns) * 3);
  p->ins[0] = rec;
  p->buffers[1].first_ins = 1;
  p->buffers[1].last_ins = 2;
  p->buffers[2].first_ins = 2;
  p->ins[5].in[0] = 2;
  expect_invalid_and_free (p, "ins[5] \"ar\" on stream 1 reads value \"g\" before its write "
                              "(stream 0 step 3)");
}
END_TEST

static Suite *
plan_suite (void)
{
  Suite *s = suite_create ("plan");
  TCase *tc = tcase_create ("plan");
  tcase_add_test (tc, small_plan_validates_and_round_trips_byte_identical);
  tcase_add_test (tc, names_are_copies_and_targets_are_shared_among_the_plan_strings);
  tcase_add_test (tc, times_of_any_finite_size_round_trip_with_their_hash);
  tcase_add_test (tc, fnv1a_by_words_equals_fnv1a_by_bytes_at_every_length_and_split);
  tcase_add_test (tc, pieces_hashed_apart_combine_to_fnv1a_at_any_split);
  tcase_add_test (tc, long_text_hashed_in_pieces_on_one_thread_equals_fnv1a);
  tcase_add_test (tc, plan_hash_is_fnv1a_of_text_with_zero_hash_without_the_graph_line);
  tcase_add_test (tc, the_graph_file_name_does_not_change_the_hash);
  tcase_add_test (tc, the_hash_field_must_be_canonical_lower_case_hex);
  tcase_add_test (tc, a_collective_without_reduce_and_dtype_sets_one_error);
  tcase_add_test (tc, numbers_that_are_not_finite_and_nul_escapes_are_rejected);
  tcase_add_test (tc, arg_accessors_read_kernel_arguments);
  tcase_add_test (tc, kernel_arguments_are_written_as_cjson_prints_them);
  tcase_add_test (tc, write_file_is_atomic_and_loads_back);
  tcase_add_test (tc, a_plan_written_in_pieces_is_its_text);
  tcase_add_test (tc, a_plan_written_by_several_workers_is_its_text);
  tcase_add_test (tc, a_write_failing_midway_leaves_the_old_plan_and_no_temporary);
  tcase_add_test (tc, memory_rule_finds_the_overlap_the_tree_found);
  tcase_add_test (tc, ids_sort_by_key_stably_with_any_bound_above_the_keys);
  tcase_add_test (tc, truncated_plan_is_rejected_at_every_length);
  tcase_add_test (tc, corrupt_plans_are_rejected_with_a_clear_message);
  tcase_add_test (tc, out_of_range_indices_are_rejected_naming_the_field);
  tcase_add_test (tc, broken_stream_rules_are_rejected);
  tcase_add_test (tc, broken_memory_rules_are_rejected);
  tcase_add_test (tc, memory_reuse_across_streams_needs_an_event_after_the_free);
  tcase_add_test (tc, a_read_needs_an_event_after_its_write);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  /* A GLib warning (an error set over another) fails the test. */
  g_log_set_always_fatal (G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);
  SRunner *sr = srunner_create (plan_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}

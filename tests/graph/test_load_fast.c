/* test_load_fast.c: the parallel `nodes` reader (graph/load-nodes.c) and
 * the parallel validator (graph/validate.c) against the sequential paths.
 *
 * The reader alone (SG_LOAD_FAST_ONLY) takes every sample and generated
 * graph and gives the graph the sequential reader gives, every node field,
 * pool entry and name, with pools of 1, 2, 3 and 8 threads and with tiny
 * chunks (many rounds, cuts inside nodes); it declines every graph the
 * sequential reader refuses (so the loader's message is always the
 * sequential one); the validator gives the same verdict and message
 * whatever the thread count, the first failing node in id order. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "common.h"
#include "graph-private.h"
#include "load-private.h"

/* No pool, and pools of 1, 2, 3 and 8 threads. */
static const int32_t threads[] = { 0, 1, 2, 3, 8 };
#define N_POOLS G_N_ELEMENTS (threads)
typedef struct {
  SgPool *p[N_POOLS];
} Pools;

static void
pools_init (Pools *pools)
{
  for (size_t t = 0; t < N_POOLS; t++)
    pools->p[t] = threads[t] ? sg_pool_new (threads[t]) : NULL;
}

static void
pools_clear (Pools *pools)
{
  for (size_t t = 0; t < N_POOLS; t++)
    sg_pool_free (pools->p[t]);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Pools, pools_clear)

/* Check records every assertion's place (a write each): the millions of
 * comparisons below assert only on a difference. */
#define SAME(cond)                                                                                 \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      ck_abort_msg ("differ: %s", #cond);                                                          \
  } while (0)

static void
assert_same_arg (const SgArg *a, const SgArg *b)
{
  SAME (a->type == b->type);
  SAME (a->tag == b->tag);
  SAME (a->n == b->n);
  switch (a->type) {
  case SG_ARG_BOOL:
    SAME (a->b == b->b);
    break;
  case SG_ARG_INT:
    SAME (a->i == b->i);
    break;
  case SG_ARG_FLOAT:
    SAME (memcmp (&a->f, &b->f, sizeof a->f) == 0);
    break;
  case SG_ARG_NODE:
    SAME (a->input == b->input);
    break;
  case SG_ARG_LIST:
  case SG_ARG_DICT:
    SAME (a->first == b->first);
    break;
  case SG_ARG_NONE:
    break;
  default:
    SAME (strcmp (a->s, b->s) == 0);
    break;
  }
}

static void
assert_same_meta (const SgMeta *a, const SgMeta *b)
{
  SAME (a->ndim == b->ndim);
  SAME (a->dtype == b->dtype);
  SAME (a->first == b->first);
}

/* Every field of every node, every pool entry, the names, the header. */
static void
assert_same_graph (const SgGraph *a, const SgGraph *b)
{
  SAME (a->world_size == b->world_size);
  SAME (a->rank == b->rank);
  SAME (a->n_groups == b->n_groups);
  for (int32_t i = 0; i < a->n_groups; i++) {
    SAME (strcmp (a->groups[i].name, b->groups[i].name) == 0);
    SAME (a->groups[i].n_ranks == b->groups[i].n_ranks);
  }
  SAME (a->n_nodes == b->n_nodes);
  SAME (a->nodes_cap == b->nodes_cap);
  SAME (a->output == b->output);
  for (SgNodeId i = 0; i < a->n_nodes; i++) {
    const SgNode *x = &a->nodes[i], *y = &b->nodes[i];
    SAME (strcmp (x->name, y->name) == 0);
    SAME (strcmp (x->target, y->target) == 0);
    SAME (x->op == y->op);
    SAME (x->kind == y->kind);
    SAME (x->in_first == y->in_first);
    SAME (x->n_in == y->n_in);
    SAME (x->args_first == y->args_first);
    SAME (x->n_args == y->n_args);
    SAME (x->kwargs_first == y->kwargs_first);
    SAME (x->n_kwargs == y->n_kwargs);
    assert_same_meta (&x->meta, &y->meta);
    SAME (x->tuple_first == y->tuple_first);
    SAME (x->n_tuple == y->n_tuple);
    SAME (x->group == y->group);
    SAME (x->group_size == y->group_size);
    SAME (x->reduce == y->reduce);
    SAME (x->getitem_index == y->getitem_index);
    SAME (x->sm_count == y->sm_count);
    SAME (memcmp (&x->cost_us, &y->cost_us, sizeof x->cost_us) == 0);
    SAME (memcmp (&x->est_us, &y->est_us, sizeof x->est_us) == 0);
    SAME (x->est_src == y->est_src);
    SAME (sg_graph_lookup (a, x->name) == i);
    SAME (sg_graph_lookup (b, x->name) == i);
  }
  SAME (a->dims->len == b->dims->len);
  SAME (a->dims->len == 0
        || memcmp (a->dims->data, b->dims->data, a->dims->len * sizeof (int64_t)) == 0);
  SAME (a->inputs->len == b->inputs->len);
  SAME (a->inputs->len == 0
        || memcmp (a->inputs->data, b->inputs->data, a->inputs->len * sizeof (SgNodeId)) == 0);
  SAME (a->tuple_metas->len == b->tuple_metas->len);
  for (guint i = 0; i < a->tuple_metas->len; i++)
    assert_same_meta (&g_array_index (a->tuple_metas, SgMeta, i),
                      &g_array_index (b->tuple_metas, SgMeta, i));
  SAME (a->args->len == b->args->len);
  for (guint i = 0; i < a->args->len; i++)
    assert_same_arg (&g_array_index (a->args, SgArg, i), &g_array_index (b->args, SgArg, i));
  SAME (strcmp (a->cluster_json ? a->cluster_json : "-", b->cluster_json ? b->cluster_json : "-")
        == 0);
  SAME (strcmp (a->description ? a->description : "-", b->description ? b->description : "-") == 0);
}

/* The sequential reader's graph, or NULL with its error in *@error. */
static SgGraph *
sequential (const char *text, size_t len, GError **error)
{
  return sg_load_buffer (text, len, "t.json", NULL, SG_LOAD_SEQUENTIAL, error);
}

/* The parallel reader alone on @text with every pool and chunk size:
 * NULL every time (it declined), or each time the graph @want. Returns
 * whether it read the text. */
static bool
fast_agrees (const Pools *pools, const char *text, size_t len, const SgGraph *want)
{
  int read = 0, tries = 0;
  for (size_t t = 0; t < N_POOLS; t++) {
    SgPool *pool = pools->p[t];
    for (int small = 0; small < 2; small++, tries++) {
      GError *error = NULL;
      SgGraph *g = sg_load_buffer (text, len, "t.json", pool,
                                   small ? SG_LOAD_FAST_SMALL : SG_LOAD_FAST_ONLY, &error);
      if (g) {
        ck_assert_msg (want != NULL, "the parallel reader takes what the sequential refuses");
        assert_same_graph (g, want);
        read++;
      }
      /* a decline is no error; a header error is the sequential one */
      g_clear_error (&error);
      sg_graph_free (g);
    }
  }
  ck_assert_msg (read == 0 || read == tries, "read %d times of %d", read, tries);
  return read > 0;
}

START_TEST (parallel_reader_gives_the_sequential_graph_on_the_samples)
{
  g_auto (Pools) pools;
  pools_init (&pools);
  static const char *const samples[] = {
    "dev_fsdp2_tp4_L2_h1024.json", "dev_fsdp8_L2_h1024.json",  "w2_fsdp2_L2_h1024.json",
    "w2_tiny_fsdp2_L2_h256.json",  "w2_tiny_tp2_L2_h256.json", "w2_tp2_L2_h1024.json",
  };
  for (size_t i = 0; i < G_N_ELEMENTS (samples); i++) {
    g_autofree char *path = g_build_filename (SG_TEST_DATA, samples[i], NULL);
    g_autofree char *text = NULL;
    gsize len;
    ck_assert (g_file_get_contents (path, &text, &len, NULL));
    GError *error = NULL;
    SgGraph *want = sequential (text, len, &error);
    ck_assert_msg (want, "%s", error ? error->message : "?");
    ck_assert_msg (fast_agrees (&pools, text, len, want), "declined %s", samples[i]);
    sg_graph_free (want);
  }
}
END_TEST

/* --- generated graphs ---------------------------------------------------------- */

typedef enum {
  BREAK_NONE,
  BREAK_DUPLICATE_NAME,
  BREAK_FORWARD_REF,
  BREAK_SELF_REF,
  BREAK_DANGLING_REF,
  BREAK_BAD_DTYPE,
  BREAK_OUTPUT_EARLY,
  BREAK_TWO_OUTPUTS,
  BREAK_NO_OUTPUT,
  BREAK_BAD_GROUP_SIZE,
  BREAK_READS_COALESCED,
  BREAK_DEEP_ARGS,
  BREAK_BAD_REF_OBJECT,
  BREAK_BAD_SHAPE,
  BREAK_COST,
  BREAK_WAIT_ON_PLAIN,
  BREAK_GETITEM_RANGE,
  BREAK_N
} Break;

typedef struct {
  GRand *r;
  GString *s;
  int n;           /* nodes so far */
  GPtrArray *refs; /* how each node may be referenced (a JSON string) */
  GArray *plain;   /* per node: may be read by any node (not a coalesced collective) */
  const char *sep; /* between members */
  Break brk;
  int brk_at;
} Gen;

static int
pick (Gen *g, int n)
{
  return g_rand_int_range (g->r, 0, n);
}

/* A reference to a node before the one being written (g->n - 1) that
 * any node may read: mostly a recent one. */
static int
earlier (Gen *g)
{
  int self = g->n - 1;
  for (;;) {
    int j = pick (g, 4) ? self - 1 - pick (g, MIN (self, 12)) : pick (g, self);
    if (g_array_index (g->plain, gboolean, j))
      return j;
  }
}

static void
ref (Gen *g, int j)
{
  g_string_append_printf (g->s, "{\"node\": %s}", (const char *)g_ptr_array_index (g->refs, j));
}

static void
value (Gen *g, int depth)
{
  static const char *const scalars[] = {
    "0",
    "-1",
    "7",
    "-0",
    "123456789012",
    "123456789012345",
    "-123456789012345",
    "1234567890123456",
    "9007199254740993",
    "12345678901234567890",
    "0.5",
    "1e-3",
    "-2.25E10",
    "3.0",
    "1e300",
    "true",
    "false",
    "null",
    "\"abc\"",
    "\"torch.float32\"",
    "\"caf\xc3\xa9\"",
    "\"esc\\n\\t\\\"\"",
    "\"\\u4e2d\\uD83D\\uDE00\"",
    "\"cuda:0\"",
    "\"\"",
  };
  int k = depth > 3 ? pick (g, 2) : pick (g, 6);
  if (k == 0 && g->n > 1) {
    ref (g, earlier (g));
  } else if (k <= 2) {
    g_string_append (g->s, scalars[pick (g, G_N_ELEMENTS (scalars))]);
  } else if (k == 3 || k == 4) {
    g_string_append_c (g->s, '[');
    for (int i = 0, n = pick (g, 4); i < n; i++) {
      g_string_append (g->s, i ? ", " : "");
      value (g, depth + 1);
    }
    g_string_append_c (g->s, ']');
  } else {
    /* a key "name" after a dict makes a likely element start inside args */
    static const char *const keys[] = { "a", "name", "b", "a", "\\u0063" };
    g_string_append_c (g->s, '{');
    for (int i = 0, n = pick (g, 3); i < n; i++) {
      g_string_append_printf (g->s, "%s\"%s\": ", i ? ", " : "",
                              keys[pick (g, G_N_ELEMENTS (keys))]);
      value (g, depth + 1);
    }
    g_string_append_c (g->s, '}');
  }
}

static void
meta (Gen *g, bool tensor)
{
  static const char *const metas[] = {
    "{\"shape\": [2, 8], \"stride\": [8, 1], \"dtype\": \"bfloat16\"}",
    "{\"shape\": [4], \"dtype\": \"float32\"}",
    "{\"dtype\": \"torch.float16\", \"shape\": [3, 0, 5], \"stride\": null}",
    "{\"shape\": [], \"dtype\": \"int64\", \"extra\": [1, {\"b\": null}]}",
    "{\"shape\": [2, 3], \"stride\": [1, 2], \"dtype\": \"float32\", \"shape\": [9]}",
    "null",
    "{}",
    "{\"tuple\": [{\"shape\": [2], \"dtype\": \"float32\"}, null, {\"shape\": [1, 1], \"dtype\": "
    "\"bfloat16\"}]}",
    "{\"tuple\": []}",
    "{\"tuple\": [{}], \"shape\": [5], \"dtype\": \"float32\"}",
    /* extents past the small-integer path: the same values through strtod */
    "{\"shape\": [1e1, 2.0, -0], \"stride\": [1E0, 0, 123456789012345], \"dtype\": \"int8\"}",
    "{\"shape\": [1234567890123456, 123], \"dtype\": \"int8\"}",
  };
  g_string_append_printf (g->s, "%s\"meta\": %s", g->sep,
                          metas[tensor ? 0 : pick (g, G_N_ELEMENTS (metas))]);
}

/* A name for node @i: plain, with escapes, raw UTF-8 or long. Defined and
 * referenced by two spellings of the same text. */
static void
name (Gen *g, int i, char **def, char **use)
{
  switch (pick (g, 8)) {
  case 0:
    *def = g_strdup_printf ("\"n\\u00e9%d\"", i);
    *use = g_strdup_printf ("\"n\xc3\xa9%d\"", i);
    break;
  case 1:
    *def = g_strdup_printf ("\"q\\\"%d\\/x\"", i);
    *use = g_strdup_printf ("\"q\\u0022%d/x\"", i);
    break;
  case 2:
    *def = g_strdup_printf ("\"a_rather_long_node_name_for_words_%d_end\"", i);
    *use = g_strdup (*def);
    break;
  case 3:
    *def = g_strdup_printf ("\"}, {\\\"name\\\": %d\"", i);
    *use = g_strdup (*def);
    break;
  default:
    *def = g_strdup_printf ("\"n%d\"", i);
    *use = g_strdup_printf (pick (g, 4) ? "\"n%d\"" : "\"\\u006e%d\"", i);
    break;
  }
}

/* Starts node @i: name, op, target. */
static void
node_start (Gen *g, const char *op, const char *target, bool plain)
{
  char *def, *use;
  name (g, g->n, &def, &use);
  if (g->brk == BREAK_DUPLICATE_NAME && g->n == g->brk_at) {
    g_free (def);
    def = g_strdup (g_ptr_array_index (g->refs, g->n / 2));
  }
  g->sep = pick (g, 3) == 0 ? ",\n    " : pick (g, 2) ? ", " : ",";
  g_string_append_printf (g->s, "%s{\"name\": %s%s\"op\": \"%s\"%s\"target\": \"%s\"",
                          g->n ? ",\n" : "", def, g->sep, op, g->sep, target);
  g_ptr_array_add (g->refs, use);
  gboolean readable = plain;
  g_array_append_val (g->plain, readable);
  g_free (def);
  g->n++;
}

static void
node_end (Gen *g)
{
  if (pick (g, 6) == 0)
    g_string_append_printf (g->s, "%s\"cost_us\": %s", g->sep, pick (g, 2) ? "12.5" : "0");
  if (pick (g, 8) == 0)
    g_string_append_printf (g->s, "%s\"x-note\": {\"k\": [1, \"v\"]}", g->sep);
  g_string_append_c (g->s, '}');
}

/* A call whose args read earlier nodes, any target that sg_node_finish
 * does not check. */
static void
plain_node (Gen *g)
{
  static const char *const targets[] = { "aten.foo.default",  "aten.mul.Tensor", "aten.t.default",
                                         "aten.view.default", "aten.mm.default", "custom.\\u0041" };
  int i = g->n;
  node_start (g, "call_function", targets[pick (g, G_N_ELEMENTS (targets))], true);
  g_string_append_printf (g->s, "%s\"args\": [", g->sep);
  for (int a = 0, n = pick (g, 5); a < n; a++) {
    g_string_append (g->s, a ? ", " : "");
    value (g, 1);
  }
  if (g->brk == BREAK_FORWARD_REF && i == g->brk_at)
    g_string_append_printf (g->s, ", {\"node\": \"n%d\"}", i + 3);
  if (g->brk == BREAK_SELF_REF && i == g->brk_at)
    g_string_append_printf (g->s, ", [{\"node\": %s}]",
                            (const char *)g_ptr_array_index (g->refs, i));
  if (g->brk == BREAK_DANGLING_REF && i == g->brk_at)
    g_string_append (g->s, ", {\"node\": \"nobody\"}");
  if (g->brk == BREAK_DEEP_ARGS && i == g->brk_at) {
    for (int d = 0; d < SG_MAX_ARG_DEPTH + 2; d++)
      g_string_append_c (g->s, '[');
    for (int d = 0; d < SG_MAX_ARG_DEPTH + 2; d++)
      g_string_append_c (g->s, ']');
  }
  if (g->brk == BREAK_BAD_REF_OBJECT && i == g->brk_at)
    g_string_append (g->s, ", {\"node\": \"n0\", \"also\": 1}");
  if (g->brk == BREAK_READS_COALESCED && i == g->brk_at)
    for (int j = i - 1; j >= 0; j--)
      if (!g_array_index (g->plain, gboolean, j)) {
        g_string_append_printf (g->s, ", {\"node\": %s}",
                                (const char *)g_ptr_array_index (g->refs, j));
        break;
      }
  g_string_append_c (g->s, ']');
  if (pick (g, 3) == 0) {
    static const char *const kwargs[] = {
      "\"dtype\": \"torch.bfloat16\"",
      "\"dtype\": \"float32\"",
      "\"dtype\": \"bogus\"",
      "\"device\": \"cuda:1\"",
      "\"device\": \"cpu\"",
      "\"layout\": \"torch.strided\"",
      "\"memory_format\": \"torch.contiguous_format\"",
      "\"pin_memory\": false",
    };
    g_string_append_printf (g->s, "%s\"kwargs\": {", g->sep);
    int n = pick (g, 4);
    for (int k = 0; k < n; k++)
      g_string_append_printf (g->s, "%s%s", k ? ", " : "", kwargs[pick (g, G_N_ELEMENTS (kwargs))]);
    if (pick (g, 3) == 0) {
      g_string_append (g->s, n ? ", \"x\": " : "\"x\": ");
      value (g, 1);
    }
    g_string_append_c (g->s, '}');
  } else if (pick (g, 2)) {
    g_string_append_printf (g->s, "%s\"kwargs\": {}", g->sep);
  }
  if (g->brk == BREAK_BAD_DTYPE && i == g->brk_at)
    g_string_append_printf (g->s, "%s\"meta\": {\"shape\": [2], \"dtype\": \"float7\"}", g->sep);
  else if (g->brk == BREAK_BAD_SHAPE && i == g->brk_at)
    g_string_append_printf (g->s, "%s\"meta\": {\"shape\": [2, -1], \"dtype\": \"float32\"}",
                            g->sep);
  else if (pick (g, 5))
    meta (g, false);
  if (g->brk == BREAK_COST && i == g->brk_at)
    g_string_append_printf (g->s, "%s\"cost_us\": -1", g->sep);
  node_end (g);
}

/* x, an all_gather of it over "g" (4 ranks) and its wait; or two inputs, a
 * coalesced all_gather, its getitems and their waits. */
static void
collectives (Gen *g, int coalesced)
{
  for (int k = 0; k < 2; k++) {
    node_start (g, "call_function", "aten.foo.default", true);
    meta (g, true);
    node_end (g);
  }
  int x = g->n - 1;
  int size = g->brk == BREAK_BAD_GROUP_SIZE && g->n >= g->brk_at ? 3 : 4;
  const char *x_ref = g_ptr_array_index (g->refs, x);
  if (coalesced < 0 ? pick (g, 2) : !coalesced) {
    int ag = g->n;
    node_start (g, "call_function", "_c10d_functional.all_gather_into_tensor.default", true);
    g_string_append_printf (g->s,
                            "%s\"args\": [{\"node\": %s}, %d, \"g\"]%s\"meta\": {\"shape\": "
                            "[8, 8], \"dtype\": \"bfloat16\"}",
                            g->sep, x_ref, size, g->sep);
    node_end (g);
    node_start (g, "call_function", "_c10d_functional.wait_tensor.default", true);
    g_string_append_printf (g->s, "%s\"args\": [{\"node\": %s}]", g->sep,
                            (const char *)g_ptr_array_index (g->refs, ag));
    meta (g, true);
    node_end (g);
    return;
  }
  int agc = g->n;
  node_start (g, "call_function", "_c10d_functional.all_gather_into_tensor_coalesced.default",
              false);
  g_string_append_printf (g->s,
                          "%s\"args\": [[{\"node\": %s}, {\"node\": %s}], %d, \"g\"]%s"
                          "\"meta\": {\"tuple\": [{\"shape\": [8, 8], \"dtype\": \"bfloat16\"}, "
                          "{\"shape\": [8, 8], \"dtype\": \"bfloat16\"}]}",
                          g->sep, x_ref, (const char *)g_ptr_array_index (g->refs, x - 1), size,
                          g->sep);
  node_end (g);
  for (int e = 0; e < 2; e++) {
    node_start (g, "call_function", "<built-in function getitem>", true);
    g_string_append_printf (g->s, "%s\"args\": [{\"node\": %s}, %d]", g->sep,
                            (const char *)g_ptr_array_index (g->refs, agc), e);
    meta (g, true);
    node_end (g);
  }
  for (int e = 0; e < 2; e++) {
    node_start (g, "call_function", "_c10d_functional.wait_tensor.default", true);
    g_string_append_printf (g->s, "%s\"args\": [{\"node\": %s}]", g->sep,
                            (const char *)g_ptr_array_index (g->refs, agc + 1 + e));
    meta (g, true);
    node_end (g);
  }
}

static void
output_node (Gen *g)
{
  node_start (g, "output", "output", true);
  g_string_append_printf (g->s, "%s\"args\": [[", g->sep);
  for (int j = 0, n = MIN (g->n - 1, 40); j < n; j++)
    if (g_array_index (g->plain, gboolean, g->n - 2 - j)) {
      g_string_append (g->s, j ? ", " : "");
      ref (g, g->n - 2 - j);
    }
  g_string_append (g->s, "]]");
  node_end (g);
}

/* (transfer full) A graph of about @n nodes (seed @seed), broken as @brk
 * says near node @at. */
static GString *
generate (guint32 seed, int n, Break brk, int at)
{
  Gen g = { g_rand_new_with_seed (seed),
            g_string_new (NULL),
            0,
            g_ptr_array_new_with_free_func (g_free),
            g_array_new (FALSE, FALSE, sizeof (gboolean)),
            ", ",
            brk,
            at };
  g_string_append (g.s,
                   "{\"format\": \"schedgraph.graph\", \"version\": 1, \"world_size\": 4, "
                   "\"rank\": 0, \"groups\": {\"g\": {\"ranks\": [0, 1, 2, 3]}}, \"nodes\": [\n");
  for (int i = 0; i < 4; i++) {
    node_start (&g, "placeholder", "p", true);
    meta (&g, true);
    node_end (&g);
  }
  collectives (&g, 1); /* a coalesced one early: BREAK_READS_COALESCED reads it */
  bool broken = false;
  while (g.n < n) {
    if (!broken && g.n >= at
        && (brk == BREAK_OUTPUT_EARLY || brk == BREAK_BAD_GROUP_SIZE || brk == BREAK_WAIT_ON_PLAIN
            || brk == BREAK_GETITEM_RANGE)) {
      broken = true;
      if (brk == BREAK_OUTPUT_EARLY) {
        output_node (&g);
      } else if (brk == BREAK_BAD_GROUP_SIZE) {
        collectives (&g, -1);
      } else {
        /* a wait on a plain node; a getitem past the coalesced tuple (node 6) */
        bool wait = brk == BREAK_WAIT_ON_PLAIN;
        node_start (&g,
                    "call_function",
                    wait ? "_c10d_functional.wait_tensor.default" : "<built-in function getitem>",
                    true);
        g_string_append_printf (g.s, "%s\"args\": [{\"node\": %s}%s]", g.sep,
                                (const char *)g_ptr_array_index (g.refs, wait ? 0 : 6),
                                wait ? "" : ", 2");
        node_end (&g);
      }
    } else if (pick (&g, 40) == 0) {
      collectives (&g, -1);
    } else {
      plain_node (&g);
    }
  }
  if (brk == BREAK_TWO_OUTPUTS)
    output_node (&g);
  if (brk != BREAK_NO_OUTPUT)
    output_node (&g);
  g_string_append (g.s, "\n], \"description\": \"generated\"}\n");
  g_rand_free (g.r);
  g_ptr_array_unref (g.refs);
  g_array_unref (g.plain);
  return g.s;
}

START_TEST (parallel_reader_gives_the_sequential_graph_on_generated_graphs)
{
  g_auto (Pools) pools;
  pools_init (&pools);
  for (guint32 seed = 1; seed <= 12; seed++) {
    GString *s = generate (seed, seed % 3 == 0 ? 3000 : 400, BREAK_NONE, 0);
    GError *error = NULL;
    SgGraph *want = sequential (s->str, s->len, &error);
    ck_assert_msg (want, "seed %u: %s", seed, error ? error->message : "?");
    ck_assert_msg (fast_agrees (&pools, s->str, s->len, want), "seed %u declined", seed);
    sg_graph_free (want);
    g_string_free (s, TRUE);
  }
}
END_TEST

/* Whatever the sequential reader refuses, the parallel one declines: the
 * loader then gives the sequential message, with any pool. */
START_TEST (parallel_reader_declines_every_graph_the_sequential_one_refuses)
{
  g_auto (Pools) pools;
  pools_init (&pools);
  for (int brk = BREAK_DUPLICATE_NAME; brk < BREAK_N; brk++)
    for (guint32 seed = 1; seed <= 3; seed++) {
      GString *s = generate (seed * 31 + (guint32)brk, 600, (Break)brk, 150 + 120 * (int)seed);
      GError *want = NULL;
      SgGraph *g = sequential (s->str, s->len, &want);
      ck_assert_msg (!g, "break %d seed %u: accepted", brk, seed);
      ck_assert (!fast_agrees (&pools, s->str, s->len, NULL));
      for (size_t t = 0; t < N_POOLS; t++) {
        GError *error = NULL;
        ck_assert (!sg_load_buffer (s->str, s->len, "t.json", pools.p[t], SG_LOAD_FAST, &error));
        ck_assert (error && error->code == want->code);
        ck_assert_str_eq (error->message, want->message);
        g_error_free (error);
      }
      g_error_free (want);
      g_string_free (s, TRUE);
    }
}
END_TEST

/* Bytes changed at random in a generated graph: the parallel reader takes
 * a text only where the sequential one does, with the same graph. */
START_TEST (parallel_reader_agrees_on_damaged_texts)
{
  g_auto (Pools) pools;
  pools_init (&pools);
  static const char bytes[] = ",:{}[]\" 0a\\-e.";
  GRand *r = g_rand_new_with_seed (5);
  GString *base = generate (77, 300, BREAK_NONE, 0);
  int taken = 0;
  for (int i = 0; i < 300; i++) {
    GString *s = g_string_new_len (base->str, (gssize)base->len);
    for (int k = 0, n = g_rand_int_range (r, 1, 3); k < n; k++) {
      gsize at = (gsize)g_rand_int_range (r, 200, (gint32)s->len - 10);
      switch (g_rand_int_range (r, 0, 3)) {
      case 0:
        g_string_erase (s, (gssize)at, 1);
        break;
      case 1:
        g_string_insert_c (s, (gssize)at, bytes[g_rand_int_range (r, 0, sizeof bytes - 1)]);
        break;
      default:
        s->str[at] = bytes[g_rand_int_range (r, 0, sizeof bytes - 1)];
        break;
      }
    }
    GError *error = NULL;
    SgGraph *want = sequential (s->str, s->len, &error);
    g_clear_error (&error);
    taken += fast_agrees (&pools, s->str, s->len, want);
    sg_graph_free (want);
    g_string_free (s, TRUE);
  }
  ck_assert_int_gt (taken, 10);
  g_string_free (base, TRUE);
  g_rand_free (r);
}
END_TEST

/* The encoding is checked in pieces on the pool's threads, cut at
 * character starts: multibyte characters across the cuts pass, a bad byte
 * anywhere gives the sequential check's message. */
START_TEST (encoding_check_in_pieces_agrees_with_the_sequential_one)
{
  g_auto (Pools) pools;
  pools_init (&pools);
  GString *base = generate (9, 200, BREAK_NONE, 0);
  /* a description of about 3 MB of 2-, 3- and 4-byte characters */
  static const char *const chars[] = { "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "a" };
  GString *d = g_string_new (NULL);
  for (int i = 0; d->len < (3u << 20); i++)
    g_string_append (d, chars[i % 4 == 3 ? 3 : (i * 7) % 3]);
  g_string_truncate (base, base->len - strlen ("\"generated\"}\n"));
  g_string_append_printf (base, "\"%s\"}\n", d->str);
  GRand *r = g_rand_new_with_seed (3);
  for (int round = 0; round < 6; round++) {
    GString *s = g_string_new_len (base->str, (gssize)base->len);
    if (round > 0) /* a byte that breaks a character, or a NUL */
      s->str[g_rand_int_range (r, 100, (gint32)s->len - 10)] = round % 2 ? '\xff' : '\0';
    GError *want = NULL;
    SgGraph *w = sequential (s->str, s->len, &want);
    ck_assert (round == 0 ? w != NULL : w == NULL);
    for (size_t t = 0; t < N_POOLS; t++) {
      GError *error = NULL;
      SgGraph *g = sg_load_buffer (s->str, s->len, "t.json", pools.p[t], SG_LOAD_FAST, &error);
      ck_assert ((g == NULL) == (w == NULL));
      if (want)
        ck_assert_str_eq (error->message, want->message);
      g_clear_error (&error);
      sg_graph_free (g);
    }
    g_clear_error (&want);
    sg_graph_free (w);
    g_string_free (s, TRUE);
  }
  g_rand_free (r);
  g_string_free (d, TRUE);
  g_string_free (base, TRUE);
}
END_TEST

/* --- the validator -------------------------------------------------------------- */

/* sg_graph_validate_with on every pool: one verdict and one message. */
static void
assert_same_verdict (const Pools *pools, const SgGraph *g, const char *want)
{
  for (size_t t = 0; t < N_POOLS; t++) {
    SgPool *pool = pools->p[t];
    GError *error = NULL;
    bool ok = sg_graph_validate_with (g, pool, &error);
    if (want)
      ck_assert_msg (!ok && strstr (error->message, want), "%d threads: %s, want %s", threads[t],
                     ok ? "valid" : error->message, want);
    else
      ck_assert_msg (ok, "%d threads: %s", threads[t], error ? error->message : "");
    g_clear_error (&error);
  }
}

/* Builds a valid graph: w, @n pairs of all_gather and wait, relu, output. */
static SgGraph *
many_collectives (int n)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "w", "float32", 2, (int64_t)2, (int64_t)8);
  for (int i = 0; i < n; i++) {
    char ag[32], w[32];
    g_snprintf (ag, sizeof ag, "ag%d", i);
    g_snprintf (w, sizeof w, "ag%d_w", i);
    tb_all_gather (g, ag, "w", "0");
    tb_wait (g, w, ag);
  }
  tb_pointwise (g, "relu", "aten.relu.default", "ag0_w", NULL);
  tb_output (g, 1, "relu");
  return g;
}

/* Two broken nodes far apart (other blocks, whatever the thread count):
 * the earlier one is named. */
START_TEST (parallel_validator_reports_the_first_failing_node_in_id_order)
{
  g_auto (Pools) pools;
  pools_init (&pools);
  g_autoptr (SgGraph) g = many_collectives (6000);
  assert_same_verdict (&pools, g, NULL);
  g->nodes[9001].sm_count = 5;
  assert_same_verdict (&pools, g, "node 'ag4500': sm_count");
  g->nodes[301].sm_count = 5;
  assert_same_verdict (&pools, g, "node 'ag150': sm_count");
  g->nodes[300].getitem_index = 1;
  assert_same_verdict (&pools, g, "node 'ag149_w': getitem index set");
}
END_TEST

/* A second wait on a collective names the first, which may lie in another
 * block; a later failing node does not hide it, an earlier one does. */
START_TEST (parallel_validator_names_the_first_wait_of_a_collective)
{
  g_auto (Pools) pools;
  pools_init (&pools);
  g_autoptr (SgGraph) g = many_collectives (6000);
  /* the wait of ag5000 (node 2 * 5000 + 2) waits on ag10 (node 21) */
  SgNodeId late = 2 * 5000 + 2;
  g_array_index (g->inputs, SgNodeId, g->nodes[late].in_first) = 21;
  const char *want = "node 'ag5000_w': args[0]: collective 'ag10' is already waited on by "
                     "'ag10_w'";
  assert_same_verdict (&pools, g, want);
  g->nodes[late + 2000].sm_count = 5;
  assert_same_verdict (&pools, g, want);
  g->nodes[late - 3000].sm_count = 5;
  assert_same_verdict (&pools, g, "node 'ag3500_w': sm_count");
}
END_TEST

/* The running total of tensor bytes fails at the node where it passes
 * 2^62, in whichever block that node lies. */
START_TEST (parallel_validator_sums_tensor_bytes_in_id_order)
{
  g_auto (Pools) pools;
  pools_init (&pools);
  g_autoptr (SgGraph) g = tb_new (1);
  tb_group (g, "0", 1, 0);
  for (int i = 0; i < 3000; i++) {
    char name[32];
    g_snprintf (name, sizeof name, "x%d", i);
    tb_input (g, name, "float32", 1, (int64_t)1 << 49); /* 2^51 bytes: 2^11 fit */
  }
  tb_output (g, 1, "x0");
  assert_same_verdict (&pools, g,
                       "node 'x2048': meta: the graph's tensors up to here total more than "
                       "2^62 bytes");
  g->nodes[1000].sm_count = 1;
  assert_same_verdict (&pools, g, "node 'x1000': sm_count");
}
END_TEST

/* Names are checked distinct without g->by_name, and validating builds
 * none; with one built, it is checked as before. */
START_TEST (parallel_validator_finds_duplicate_names_without_a_table)
{
  g_auto (Pools) pools;
  pools_init (&pools);
  g_autoptr (SgGraph) g = many_collectives (3000);
  sg_graph_names_drop (g);
  assert_same_verdict (&pools, g, NULL);
  ck_assert_ptr_null (g->by_name);
  g->nodes[4000].name = g->nodes[17].name;
  g_autofree char *want
      = g_strdup_printf ("nodes: %d names for %d nodes", g->n_nodes - 1, g->n_nodes);
  assert_same_verdict (&pools, g, want);
  ck_assert_ptr_null (g->by_name);
  /* the table built from the nodes says the same */
  (void)sg_graph_names (g);
  assert_same_verdict (&pools, g, want);
}
END_TEST

/* The parallel reader hands its table of names to the graph, and the
 * validator counts distinct names through it; the drop every move of the
 * nodes makes takes it away, so a stale table never vouches for names it
 * no longer describes. */
START_TEST (loaded_name_table_serves_the_validator_until_the_nodes_move)
{
  g_auto (Pools) pools;
  pools_init (&pools);
  g_autoptr (SgGraph) built = many_collectives (3000);
  cJSON *j = sg_graph_to_json (built);
  g_autofree char *text = cJSON_PrintUnformatted (j);
  cJSON_Delete (j);
  g_autoptr (SgGraph) g
      = sg_load_buffer (text, strlen (text), "t.json", pools.p[2], SG_LOAD_FAST_ONLY, NULL);
  ck_assert_ptr_nonnull (g);
  ck_assert_ptr_nonnull (g->name_table);
  assert_same_verdict (&pools, g, NULL);
  ck_assert_ptr_null (g->by_name);
  /* a rename the table does not know of, then the drop a change makes */
  g->nodes[2000].name = g->nodes[17].name;
  sg_graph_names_drop (g);
  ck_assert_ptr_null (g->name_table);
  g_autofree char *want
      = g_strdup_printf ("nodes: %d names for %d nodes", g->n_nodes - 1, g->n_nodes);
  assert_same_verdict (&pools, g, want);
}
END_TEST

static Suite *
suite (void)
{
  Suite *s = suite_create ("load-fast");
  TCase *tc = tcase_create ("load-fast");
  tcase_set_timeout (tc, 300);
  tcase_add_test (tc, parallel_reader_gives_the_sequential_graph_on_the_samples);
  tcase_add_test (tc, parallel_reader_gives_the_sequential_graph_on_generated_graphs);
  tcase_add_test (tc, parallel_reader_declines_every_graph_the_sequential_one_refuses);
  tcase_add_test (tc, parallel_reader_agrees_on_damaged_texts);
  tcase_add_test (tc, encoding_check_in_pieces_agrees_with_the_sequential_one);
  tcase_add_test (tc, parallel_validator_reports_the_first_failing_node_in_id_order);
  tcase_add_test (tc, parallel_validator_names_the_first_wait_of_a_collective);
  tcase_add_test (tc, parallel_validator_sums_tensor_bytes_in_id_order);
  tcase_add_test (tc, parallel_validator_finds_duplicate_names_without_a_table);
  tcase_add_test (tc, loaded_name_table_serves_the_validator_until_the_nodes_move);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  return run_suite (suite ());
}

/* randgraph.c: random small training-step graphs (randgraph.h). */
#include "randgraph.h"

#include <math.h>
#include <stdbool.h>

const char *
rg_cluster_name (RgCluster c)
{
  static const char *const names[] = { "plain", "contention", "start-wait", "both" };
  return c < RG_N_CLUSTERS ? names[c] : "?";
}

/* The cluster object: h200-sxm's measured rates (docs/cost-model.md). */
static const char *
cluster_json (RgCluster c)
{
  switch (c) {
  case RG_PLAIN:
    return "{\"comm_start_wait\": 0, \"comm_slowdown\": 1, \"compute_slowdown\": 1, "
           "\"reduce_slowdown\": 1}";
  case RG_CONTENTION:
    return "{\"comm_start_wait\": 0, \"comm_slowdown\": 1.05, \"compute_slowdown\": 1.22, "
           "\"reduce_slowdown\": 1.3}";
  case RG_START_WAIT:
    return "{\"comm_start_wait\": 1, \"comm_slowdown\": 1, \"compute_slowdown\": 1, "
           "\"reduce_slowdown\": 1}";
  default:
    return "{\"comm_start_wait\": 1, \"comm_slowdown\": 1.05, \"compute_slowdown\": 1.22, "
           "\"reduce_slowdown\": 1.3}";
  }
}

static const char *const group_names[] = { "a", "b", "c" };
static const char *const group_ranks[] = { "[0, 1]", "[0, 2, 4, 6]", "[0, 1, 2, 3]" };
static const int group_size[] = { 2, 4, 4 };

typedef struct {
  GString *s;
  GRand *rng;
  GPtrArray *pool; /* names of [64, 64] values compute may read */
  GHashTable *used; /* values read by someone (the pool's strings) */
  GPtrArray *sinks; /* values only the output reads */
  int n_nodes, n_groups;
} Gen;

/* Log-uniform in [lo, hi], rounded to 0.1 us. */
static double
cost_in (GRand *rng, double lo, double hi)
{
  double v = exp (g_rand_double_range (rng, log (lo), log (hi)));
  return round (v * 10.0) / 10.0;
}

static void
node (Gen *G, const char *name, const char *op, const char *target, const char *args,
      const char *meta, double cost)
{
  g_string_append_printf (G->s, "%s\n    {\"name\": \"%s\", \"op\": \"%s\", \"target\": \"%s\", "
                                "\"args\": %s",
                          G->n_nodes ? "," : "", name, op, target, args);
  if (meta)
    g_string_append_printf (G->s, ", \"meta\": %s", meta);
  if (cost >= 0.0)
    g_string_append_printf (G->s, ", \"cost_us\": %.1f", cost);
  g_string_append (G->s, "}");
  G->n_nodes++;
}

static char *
meta (int rows)
{
  return g_strdup_printf ("{\"shape\": [%d, 64], \"dtype\": \"bfloat16\"}", rows);
}

/* A recent value of the pool (chains), now and then any. */
static const char *
pick (Gen *G)
{
  int n = (int)G->pool->len;
  int lo = g_rand_int_range (G->rng, 0, 4) == 0 ? 0 : MAX (0, n - 3);
  const char *v = g_ptr_array_index (G->pool, g_rand_int_range (G->rng, lo, n));
  g_hash_table_add (G->used, (gpointer)v);
  return v;
}

static void
add_value (Gen *G, const char *name)
{
  g_ptr_array_add (G->pool, g_strdup (name));
}

static void
compute (Gen *G, int i)
{
  g_autofree char *name = g_strdup_printf ("c%d", i);
  g_autofree char *m = meta (64);
  const char *a = pick (G);
  int kind = g_rand_int_range (G->rng, 0, 10);
  if (kind < 4) {
    const char *b = pick (G);
    g_autofree char *args = g_strdup_printf ("[{\"node\": \"%s\"}, {\"node\": \"%s\"}]", a, b);
    node (G, name, "call_function", "aten.mm.default", args, m, cost_in (G->rng, 5, 100));
  } else if (kind < 7) {
    const char *b = pick (G);
    g_autofree char *args = g_strdup_printf ("[{\"node\": \"%s\"}, {\"node\": \"%s\"}]", a, b);
    node (G, name, "call_function", "aten.add.Tensor", args, m, cost_in (G->rng, 1, 60));
  } else {
    g_autofree char *args = g_strdup_printf ("[{\"node\": \"%s\"}]", a);
    node (G, name, "call_function", "aten.relu.default", args, m, cost_in (G->rng, 1, 60));
  }
  if (g_rand_int_range (G->rng, 0, 6) == 0) { /* a view of it */
    g_autofree char *vname = g_strdup_printf ("v%d", i);
    g_autofree char *args = g_strdup_printf ("[{\"node\": \"%s\"}]", name);
    node (G, vname, "call_function", "aten.t.default", args,
          "{\"shape\": [64, 64], \"stride\": [1, 64], \"dtype\": \"bfloat16\"}", -1.0);
    add_value (G, vname);
  } else {
    add_value (G, name);
  }
}

/* Collective @i on group @grp; returns the number of collectives added. */
static int
collective (Gen *G, int i, int grp, int left)
{
  g_autofree char *c = g_strdup_printf ("k%d", i);
  g_autofree char *w = g_strdup_printf ("kw%d", i);
  g_autofree char *wait_args = g_strdup_printf ("[{\"node\": \"%s\"}]", c);
  int gs = group_size[grp];
  int kind = g_rand_int_range (G->rng, 0, 3);
  double cost = cost_in (G->rng, 5, 80);
  if (kind == 0) { /* all_gather of a weight shard: feeds compute */
    g_autofree char *shard = g_strdup_printf ("p%d", i);
    g_autofree char *sm = meta (64 / gs);
    g_autofree char *m = meta (64);
    node (G, shard, "placeholder", shard, "[]", sm, -1.0);
    g_autofree char *args = g_strdup_printf ("[{\"node\": \"%s\"}, %d, \"%s\"]", shard, gs,
                                             group_names[grp]);
    node (G, c, "call_function", "_c10d_functional.all_gather_into_tensor.default", args, m, cost);
    node (G, w, "call_function", "_c10d_functional.wait_tensor.default", wait_args, m, -1.0);
    add_value (G, w);
    return 1;
  }
  const char *a = pick (G);
  if (kind == 1) { /* all_reduce of an activation: may feed compute */
    g_autofree char *m = meta (64);
    g_autofree char *args = g_strdup_printf ("[{\"node\": \"%s\"}, \"sum\", \"%s\"]", a,
                                             group_names[grp]);
    node (G, c, "call_function", "_c10d_functional.all_reduce.default", args, m, cost);
    node (G, w, "call_function", "_c10d_functional.wait_tensor.default", wait_args, m, -1.0);
    add_value (G, w);
    return 1;
  }
  /* reduce_scatter of a gradient, maybe all_reduced on another group */
  g_autofree char *m = meta (64 / gs);
  g_autofree char *args = g_strdup_printf ("[{\"node\": \"%s\"}, \"sum\", %d, \"%s\"]", a, gs,
                                           group_names[grp]);
  node (G, c, "call_function", "_c10d_functional.reduce_scatter_tensor.default", args, m, cost);
  node (G, w, "call_function", "_c10d_functional.wait_tensor.default", wait_args, m, -1.0);
  if (left > 1 && g_rand_int_range (G->rng, 0, 3) == 0) {
    g_autofree char *c2 = g_strdup_printf ("k%db", i);
    g_autofree char *w2 = g_strdup_printf ("kw%db", i);
    g_autofree char *args2 = g_strdup_printf ("[{\"node\": \"%s\"}, \"sum\", \"%s\"]", w,
                                              group_names[(grp + 1) % G->n_groups]);
    g_autofree char *wa2 = g_strdup_printf ("[{\"node\": \"%s\"}]", c2);
    node (G, c2, "call_function", "_c10d_functional.all_reduce.default", args2, m,
          cost_in (G->rng, 5, 40));
    node (G, w2, "call_function", "_c10d_functional.wait_tensor.default", wa2, m, -1.0);
    g_ptr_array_add (G->sinks, g_strdup (w2));
    return 2;
  }
  g_ptr_array_add (G->sinks, g_strdup (w));
  return 1;
}

char *
rg_graph_json (guint32 seed, int n_compute, int n_coll, int n_groups, RgCluster cluster)
{
  Gen G = { g_string_new (NULL), g_rand_new_with_seed (seed),
            g_ptr_array_new_with_free_func (g_free),
            g_hash_table_new (g_str_hash, g_str_equal),
            g_ptr_array_new_with_free_func (g_free), 0, CLAMP (n_groups, 1, 3) };
  n_groups = G.n_groups;
  g_string_append_printf (G.s,
                          "{\"format\": \"schedgraph.graph\", \"version\": 1, \"world_size\": 8, "
                          "\"rank\": 0,\n  \"description\": \"randgraph seed %u, %d compute, "
                          "%d collectives, %d groups, %s\",\n  \"cluster\": %s,\n  \"groups\": {",
                          seed, n_compute, n_coll, n_groups, rg_cluster_name (cluster),
                          cluster_json (cluster));
  for (int k = 0; k < n_groups; k++)
    g_string_append_printf (G.s, "%s\"%s\": {\"ranks\": %s}", k ? ", " : "", group_names[k],
                            group_ranks[k]);
  g_string_append (G.s, "},\n  \"nodes\": [");
  g_autofree char *m = meta (64);
  node (&G, "x", "placeholder", "x", "[]", m, -1.0);
  add_value (&G, "x");
  /* interleave: collectives land at random points of the compute chain */
  int done_c = 0, done_k = 0, idx = 0;
  while (done_c < n_compute || done_k < n_coll) {
    bool coll = done_k < n_coll
                && (done_c >= n_compute
                    || g_rand_int_range (G.rng, 0, n_compute + n_coll) < n_coll);
    if (coll)
      done_k += collective (&G, idx, g_rand_int_range (G.rng, 0, n_groups), n_coll - done_k);
    else
      compute (&G, done_c++);
    idx++;
  }
  /* the output reads every value nobody reads, and the gradients */
  GString *out = g_string_new ("[[");
  int n_out = 0;
  for (guint i = 0; i < G.pool->len; i++) {
    const char *v = g_ptr_array_index (G.pool, i);
    if (g_hash_table_contains (G.used, v) && i + 1 < G.pool->len)
      continue;
    g_string_append_printf (out, "%s{\"node\": \"%s\"}", n_out++ ? ", " : "", v);
  }
  for (guint i = 0; i < G.sinks->len; i++)
    g_string_append_printf (out, "%s{\"node\": \"%s\"}", n_out++ ? ", " : "",
                            (const char *)g_ptr_array_index (G.sinks, i));
  g_string_append (out, "]]");
  node (&G, "output", "output", "output", out->str, NULL, -1.0);
  g_string_free (out, TRUE);
  g_string_append (G.s, "\n  ]\n}\n");
  g_rand_free (G.rng);
  g_ptr_array_unref (G.pool);
  g_hash_table_unref (G.used);
  g_ptr_array_unref (G.sinks);
  return g_string_free (G.s, FALSE);
}

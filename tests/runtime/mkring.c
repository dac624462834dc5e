/* mkring.c: test helper: writes the graphs of the ring-decomposition
 * exactness test (issue 13, docs/ops.md "Ring decompositions"):
 *
 *   mkring DIR WORLD TP DTYPE
 *
 * over a tensor-parallel group "tp" of TP ranks (WORLD / TP instances):
 *   ag_ref.json   out = all_gather(x) @ w
 *   ag_ring.json  the same with TP - 1 collective_permute ring steps
 *                 ({i -> i+1}, transport ce), one mm per chunk, cat, and a
 *                 rank_roll that puts every chunk's rows in rank order
 *   rs_ref.json   out = reduce_scatter(a @ w2)
 *   rs_ring.json  the same as a ring reduce-scatter: rank_roll of a, one mm
 *                 per row block (static slices), TP - 1 permutes ({i -> i+1},
 *                 nccl) each followed by an add
 *   rs_direct.json the same with each partial sent straight to its rank:
 *                 permute s ({i -> i+s}, ce) carries the partial of block
 *                 r + s; the adds sum what arrived
 *   part.json     a partial permutation (one pair: the others get zeros)
 *                 and a reverse ring, the permute's semantics alone
 * ag_ring must equal ag_ref bitwise (each output row is one row's dot
 * products whatever the chunking); rs_ring adds the partial sums in ring
 * order, rounding after each add, where reduce_scatter sums in group-rank
 * order in double and rounds once: the rs graphs are float32 whatever
 * DTYPE (within 1e-5; in bf16 the TP - 1 roundings differ by up to
 * (TP - 1) x 2^-8 relative).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <glib.h>

typedef struct {
  GString *s;
  const char *dt;
  int n;
} W;

static void
node (W *w, const char *name, const char *op, const char *target, const char *args,
      const char *kwargs, int64_t d0, int64_t d1)
{
  g_string_append_printf (w->s, "%s\n{\"name\":\"%s\",\"op\":\"%s\",\"target\":\"%s\",\"args\":%s,"
                                "\"kwargs\":%s,\"meta\":{\"shape\":[%" G_GINT64_FORMAT
                                ",%" G_GINT64_FORMAT "],\"dtype\":\"%s\"}}",
                          w->n++ ? "," : "", name, op, target, args, kwargs ? kwargs : "{}", d0,
                          d1, w->dt);
}

static void
input (W *w, const char *name, int64_t d0, int64_t d1)
{
  node (w, name, "placeholder", name, "[]", NULL, d0, d1);
}

static void
call (W *w, const char *name, const char *target, const char *args, int64_t d0, int64_t d1)
{
  node (w, name, "call_function", target, args, NULL, d0, d1);
}

static char *
ring_pairs (int k, int dir)
{
  GString *p = g_string_new ("[");
  for (int i = 0; i < k; i++)
    g_string_append_printf (p, "%s[%d,%d]", i ? "," : "", i, ((i + dir) % k + k) % k);
  g_string_append_c (p, ']');
  return g_string_free (p, FALSE);
}

static void
permute (W *w, const char *name, const char *in, const char *pairs, const char *transport,
         int64_t d0, int64_t d1)
{
  g_autofree char *args = g_strdup_printf ("[{\"node\":\"%s\"},%s,\"tp\"]", in, pairs);
  g_autofree char *kw = g_strdup_printf ("{\"transport\":\"%s\"}", transport);
  node (w, name, "call_function", "schedgraph.collective_permute", args, kw, d0, d1);
  g_autofree char *wname = g_strdup_printf ("%s_w", name);
  g_autofree char *wargs = g_strdup_printf ("[{\"node\":\"%s\"}]", name);
  call (w, wname, "_c10d_functional.wait_tensor.default", wargs, d0, d1);
}

/* @name = slice(@src, 0, @start, @start + @rows) of a @cols-column
 * tensor (its strides) and @mm = mm(@name, w2). */
static void
block_mm (W *w, const char *name, const char *mm, const char *src, int64_t start, int64_t rows,
          int64_t cols, int64_t n)
{
  g_autofree char *sl = g_strdup_printf ("[{\"node\":\"%s\"},0,%" G_GINT64_FORMAT
                                         ",%" G_GINT64_FORMAT "]", src, start, start + rows);
  g_string_append_printf (w->s, ",\n{\"name\":\"%s\",\"op\":\"call_function\",\"target\":"
                                "\"aten.slice.Tensor\",\"args\":%s,\"kwargs\":{},\"meta\":"
                                "{\"shape\":[%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT "],"
                                "\"stride\":[%" G_GINT64_FORMAT ",1],\"dtype\":\"%s\"}}",
                          name, sl, rows, cols, cols, w->dt);
  w->n++;
  g_autofree char *mmargs = g_strdup_printf ("[{\"node\":\"%s\"},{\"node\":\"w2\"}]", name);
  call (w, mm, "aten.mm.default", mmargs, rows, n);
}

static bool
finish (W *w, const char *dir, const char *file, int world, int tp, const char *outputs)
{
  g_string_append_printf (w->s, ",\n{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\","
                                "\"args\":[[%s]],\"kwargs\":{}}\n]}\n",
                          outputs);
  GString *ranks = g_string_new ("");
  for (int r = 0; r < tp; r++)
    g_string_append_printf (ranks, "%s%d", r ? "," : "", r);
  g_autofree char *head = g_strdup_printf (
    "{\"format\":\"schedgraph.graph\",\"version\":1,\"world_size\":%d,\"rank\":0,"
    "\"description\":\"mkring %s\",\"groups\":{\"tp\":{\"ranks\":[%s]}},\"nodes\":[",
    world, file, ranks->str);
  g_string_free (ranks, TRUE);
  g_string_prepend (w->s, head);
  g_autofree char *path = g_build_filename (dir, file, NULL);
  GError *e = NULL;
  bool ok = g_file_set_contents (path, w->s->str, (gssize)w->s->len, &e);
  if (!ok) {
    fprintf (stderr, "mkring: %s\n", e->message);
    g_error_free (e);
  }
  g_string_truncate (w->s, 0);
  w->n = 0;
  return ok;
}

int
main (int argc, char **argv)
{
  if (argc != 5) {
    fprintf (stderr, "usage: mkring DIR WORLD TP DTYPE\n");
    return 2;
  }
  const char *dir = argv[1];
  const int world = atoi (argv[2]), k = atoi (argv[3]);
  if (k < 2 || world < k || world % k) {
    fprintf (stderr, "mkring: TP must be >= 2 and divide WORLD\n");
    return 2;
  }
  W w = { g_string_new (""), argv[4], 0 };
  const int64_t m = 3, kd = 8, n = 5, mb = 2, k2 = 6, n2 = 4;
  g_autofree char *fwd = ring_pairs (k, 1), *rev = ring_pairs (k, -1);
  bool ok = true;

  /* all_gather -> mm */
  input (&w, "x", m, kd);
  input (&w, "w", kd, n);
  g_autofree char *agargs = g_strdup_printf ("[{\"node\":\"x\"},%d,\"tp\"]", k);
  call (&w, "ag", "_c10d_functional.all_gather_into_tensor.default", agargs, k * m, kd);
  call (&w, "ag_w", "_c10d_functional.wait_tensor.default", "[{\"node\":\"ag\"}]", k * m, kd);
  call (&w, "out", "aten.mm.default", "[{\"node\":\"ag_w\"},{\"node\":\"w\"}]", k * m, n);
  ok = ok && finish (&w, dir, "ag_ref.json", world, k, "{\"node\":\"out\"}");

  input (&w, "x", m, kd);
  input (&w, "w", kd, n);
  GString *cat = g_string_new ("[[");
  for (int s = 0; s < k; s++) {
    g_autofree char *c = s ? g_strdup_printf ("p%d_w", s) : g_strdup ("x");
    if (s) {
      g_autofree char *p = g_strdup_printf ("p%d", s);
      g_autofree char *prev = s > 1 ? g_strdup_printf ("p%d_w", s - 1) : g_strdup ("x");
      permute (&w, p, prev, fwd, "ce", m, kd); /* rank r now holds x of rank r - s */
    }
    g_autofree char *mm = g_strdup_printf ("m%d", s);
    g_autofree char *args = g_strdup_printf ("[{\"node\":\"%s\"},{\"node\":\"w\"}]", c);
    call (&w, mm, "aten.mm.default", args, m, n);
  }
  /* y's block t is m_{-t mod k} = (x of rank r + t) @ w */
  for (int t = 0; t < k; t++)
    g_string_append_printf (cat, "%s{\"node\":\"m%d\"}", t ? "," : "", (k - t) % k);
  g_string_append (cat, "],0]");
  call (&w, "y", "aten.cat.default", cat->str, k * m, n);
  g_string_free (cat, TRUE);
  call (&w, "out", "schedgraph.rank_roll", "[{\"node\":\"y\"},0,-1,\"tp\"]", k * m, n);
  ok = ok && finish (&w, dir, "ag_ring.json", world, k, "{\"node\":\"out\"}");

  /* mm -> reduce_scatter, in float32 (above) */
  w.dt = "float32";
  input (&w, "a", k * mb, k2);
  input (&w, "w2", k2, n2);
  call (&w, "full", "aten.mm.default", "[{\"node\":\"a\"},{\"node\":\"w2\"}]", k * mb, n2);
  g_autofree char *rsargs = g_strdup_printf ("[{\"node\":\"full\"},\"sum\",%d,\"tp\"]", k);
  call (&w, "rs", "_c10d_functional.reduce_scatter_tensor.default", rsargs, mb, n2);
  call (&w, "rs_w", "_c10d_functional.wait_tensor.default", "[{\"node\":\"rs\"}]", mb, n2);
  ok = ok && finish (&w, dir, "rs_ref.json", world, k, "{\"node\":\"rs_w\"}");

  input (&w, "a", k * mb, k2);
  input (&w, "w2", k2, n2);
  /* R's block t is a's block (t - 1 + r): step s needs block r - s - 1 */
  call (&w, "r", "schedgraph.rank_roll", "[{\"node\":\"a\"},-1,1,\"tp\"]", k * mb, k2);
  for (int s = 0; s < k; s++) {
    const int64_t t = (k - s) % k;
    g_autofree char *v = g_strdup_printf ("v%d", s), *pn = g_strdup_printf ("q%d", s);
    block_mm (&w, v, pn, "r", t * mb, mb, k2, n2);
    if (s) {
      g_autofree char *prev = s > 1 ? g_strdup_printf ("acc%d", s - 1) : g_strdup ("q0");
      g_autofree char *p = g_strdup_printf ("s%d", s), *acc = g_strdup_printf ("acc%d", s);
      permute (&w, p, prev, fwd, "nccl", mb, n2);
      g_autofree char *addargs = g_strdup_printf ("[{\"node\":\"s%d_w\"},{\"node\":\"%s\"}]", s,
                                                  pn);
      call (&w, acc, "aten.add.Tensor", addargs, mb, n2);
    }
  }
  g_autofree char *last = g_strdup_printf ("{\"node\":\"acc%d\"}", k - 1);
  ok = ok && finish (&w, dir, "rs_ring.json", world, k, last);

  /* the same with each partial sent straight to its rank: R = rank_roll(a,
   * 0, 1), block s (a's block r + s) multiplied and sent with shift s;
   * rank r sums its own block and what arrived, in arrival order */
  input (&w, "a", k * mb, k2);
  input (&w, "w2", k2, n2);
  call (&w, "r", "schedgraph.rank_roll", "[{\"node\":\"a\"},0,1,\"tp\"]", k * mb, k2);
  for (int s = 0; s < k; s++) {
    g_autofree char *v = g_strdup_printf ("v%d", s), *pn = g_strdup_printf ("q%d", s);
    block_mm (&w, v, pn, "r", s * mb, mb, k2, n2);
    if (s) {
      g_autofree char *p = g_strdup_printf ("s%d", s), *shift = ring_pairs (k, s);
      permute (&w, p, pn, shift, "ce", mb, n2);
    }
  }
  for (int s = 1; s < k; s++) {
    g_autofree char *acc = g_strdup_printf ("acc%d", s);
    g_autofree char *prev = s > 1 ? g_strdup_printf ("acc%d", s - 1) : g_strdup ("q0");
    g_autofree char *addargs = g_strdup_printf ("[{\"node\":\"%s\"},{\"node\":\"s%d_w\"}]",
                                                prev, s);
    call (&w, acc, "aten.add.Tensor", addargs, mb, n2);
  }
  ok = ok && finish (&w, dir, "rs_direct.json", world, k, last);

  /* a partial permutation and a reverse ring */
  input (&w, "x", m, kd);
  g_autofree char *one = g_strdup_printf ("[[%d,0]]", k - 1);
  permute (&w, "one", "x", one, "nccl", m, kd);
  permute (&w, "back", "x", rev, "ce", m, kd);
  ok = ok && finish (&w, dir, "part.json", world, k, "{\"node\":\"one_w\"},{\"node\":\"back_w\"}");
  g_string_free (w.s, TRUE);
  return ok ? 0 : 1;
}

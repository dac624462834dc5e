/* emit.c: the streaming node writer of graphgen.
 *
 * Writes one graph-format node per line in the byte layout Python's
 * json.dump gives the PyTorch exporter (python/schedgraph/exporter.py: ", " and
 * ": " separators), so generated nodes compare equal to exported ones.
 * Names follow torch.fx's namespace: base name, then base_1, base_2 ...;
 * bases that are Python builtins (pow, sum) start at _1.
 * Requires: GgGen sizes filled (graphgen.c). Invalidates: nothing.
 */
#include "graphgen-private.h"

#include <stdarg.h>
#include <string.h>

static const char *const base_names[B_N] = {
  [B_ARG] = "arg",
  [B_POW] = "pow",
  [B_MEAN] = "mean",
  [B_ADD] = "add",
  [B_RSQRT] = "rsqrt",
  [B_MUL] = "mul",
  [B_DETACH] = "detach",
  [B_AG] = "all_gather_into_tensor",
  [B_RS] = "reduce_scatter_tensor",
  [B_AR] = "all_reduce",
  [B_WAIT] = "wait_tensor",
  [B_T] = "t",
  [B_MM] = "mm",
  [B_VIEW] = "view",
  [B_TRANSPOSE] = "transpose",
  [B_SDPA] = "_scaled_dot_product_cudnn_attention",
  [B_SDPA_BWD] = "_scaled_dot_product_cudnn_attention_backward",
  [B_GETITEM] = "getitem",
  [B_SILU] = "silu",
  [B_SILU_BWD] = "silu_backward",
  [B_TO_COPY] = "_to_copy",
  [B_ONES_LIKE] = "ones_like",
  [B_EXPAND] = "expand",
  [B_DIV] = "div",
  [B_SUM] = "sum",
};

static void
flush (GgGen *g)
{
  if (g->len > 0 && !g->failed && fwrite (g->buf, 1, g->len, g->out) != g->len)
    g->failed = true;
  g->len = 0;
}

static void
w_bytes (GgGen *g, const char *s, size_t n)
{
  if (g->len + n > g->cap) {
    flush (g);
    if (n > g->cap) {
      if (!g->failed && fwrite (s, 1, n, g->out) != n)
        g->failed = true;
      return;
    }
  }
  memcpy (g->buf + g->len, s, n);
  g->len += n;
}

void
gg_w (GgGen *g, const char *s)
{
  w_bytes (g, s, strlen (s));
}

void
gg_w_i64 (GgGen *g, int64_t v)
{
  char tmp[24];
  int n = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[sizeof tmp - 1 - n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0)
    tmp[sizeof tmp - 1 - n++] = '-';
  w_bytes (g, tmp + sizeof tmp - n, (size_t)n);
}

static void
w_name (GgGen *g, GgRef r)
{
  gg_w (g, base_names[r.base]);
  if (r.base == B_ARG) {
    gg_w_i64 (g, r.idx);
    gg_w (g, "_1");
  } else if (r.idx > 0) {
    gg_w (g, "_");
    gg_w_i64 (g, r.idx);
  }
}

void
gg_w_ref (GgGen *g, GgRef r)
{
  gg_w (g, "{\"node\": \"");
  w_name (g, r);
  gg_w (g, "\"}");
}

static void
w_list (GgGen *g, int n, const int64_t *v)
{
  gg_w (g, "[");
  for (int i = 0; i < n; i++) {
    if (i)
      gg_w (g, ", ");
    gg_w_i64 (g, v[i]);
  }
  gg_w (g, "]");
}

static void
w_tmeta (GgGen *g, const GgMeta *m)
{
  if (m->nd < 0) {
    gg_w (g, "null");
    return;
  }
  gg_w (g, "{\"shape\": ");
  w_list (g, m->nd, m->sh);
  gg_w (g, ", \"stride\": ");
  w_list (g, m->nd, m->st);
  gg_w (g, ", \"dtype\": \"");
  gg_w (g, m->dt);
  gg_w (g, "\"}");
}

static GgRef
new_ref (GgGen *g, GgBase base)
{
  GgRef r = { (int32_t)base, g->counter[base]++ };
  g->stats.nodes++;
  return r;
}

static void
node_open (GgGen *g, GgRef r, const char *op, const char *target)
{
  gg_w (g, g->first_node ? "\n" : ",\n");
  g->first_node = false;
  gg_w (g, "{\"name\": \"");
  w_name (g, r);
  gg_w (g, "\", \"op\": \"");
  gg_w (g, op);
  gg_w (g, "\", \"target\": \"");
  if (target)
    gg_w (g, target);
  else
    w_name (g, r);
  gg_w (g, "\", \"args\": [");
}

static void
node_close (GgGen *g, const char *kwargs, const GgMeta *m, int n_tuple)
{
  gg_w (g, "], \"kwargs\": ");
  gg_w (g, kwargs ? kwargs : "{}");
  if (m && (n_tuple > 0 || m->nd >= 0)) {
    gg_w (g, ", \"meta\": ");
    if (n_tuple > 0) {
      gg_w (g, "{\"tuple\": [");
      for (int i = 0; i < n_tuple; i++) {
        if (i)
          gg_w (g, ", ");
        w_tmeta (g, &m[i]);
      }
      gg_w (g, "]}");
    } else {
      w_tmeta (g, m);
    }
  }
  gg_w (g, "}");
}

GgRef
gg_node (GgGen *g, GgBase base, const char *target, const GgMeta *m, int n_tuple,
         const char *kwargs, const char *fmt, ...)
{
  GgRef r = new_ref (g, base);
  if (!g->out)
    return r;
  node_open (g, r, "call_function", target);
  va_list ap;
  va_start (ap, fmt);
  for (const char *f = fmt; *f; f++) {
    if (f != fmt)
      gg_w (g, ", ");
    switch (*f) {
    case 'r':
      gg_w_ref (g, va_arg (ap, GgRef));
      break;
    case 'i':
      gg_w_i64 (g, va_arg (ap, int64_t));
      break;
    case 'l':
      gg_w (g, va_arg (ap, const char *));
      break;
    case 'q':
      gg_w (g, "\"");
      gg_w (g, va_arg (ap, const char *));
      gg_w (g, "\"");
      break;
    case 'L': {
      int n = va_arg (ap, int);
      const int64_t *v = va_arg (ap, const int64_t *);
      w_list (g, n, v);
      break;
    }
    default:
      g_assert_not_reached ();
    }
  }
  va_end (ap);
  node_close (g, kwargs, m, n_tuple);
  return r;
}

GgRef
gg_placeholder (GgGen *g, int32_t index, const GgMeta *m)
{
  GgRef r = new_ref (g, B_ARG);
  r.idx = index;
  g->stats.placeholders++;
  if (!g->out)
    return r;
  node_open (g, r, "placeholder", NULL);
  node_close (g, NULL, m, 0);
  return r;
}

GgMeta
gg_meta_contig (int32_t nd, const int64_t *sh, const char *dt)
{
  GgMeta m = { .nd = nd, .dt = dt };
  int64_t s = 1;
  for (int32_t i = nd - 1; i >= 0; i--) {
    m.sh[i] = sh[i];
    m.st[i] = s;
    s *= sh[i];
  }
  return m;
}

GgMeta
gg_meta2 (int64_t a, int64_t b, const char *dt)
{
  return (GgMeta){ .nd = 2, .sh = { a, b }, .st = { b, 1 }, .dt = dt };
}

GgMeta
gg_meta2t (int64_t a, int64_t b, int64_t sb, const char *dt)
{
  return (GgMeta){ .nd = 2, .sh = { a, b }, .st = { 1, sb }, .dt = dt };
}

GgMeta
gg_meta_swap (const GgMeta *m)
{
  g_assert (m->nd == 2);
  return (GgMeta){
    .nd = 2, .sh = { m->sh[1], m->sh[0] }, .st = { m->st[1], m->st[0] }, .dt = m->dt
  };
}

static void
dim_group (const GgGen *g, GgDim dim, int64_t *size, const char **name)
{
  switch (dim) {
  case GG_DIM_TP:
    *size = g->tp, *name = g->g_tp;
    break;
  case GG_DIM_DP:
    *size = g->dp, *name = g->g_dp;
    break;
  default:
    *size = g->rep, *name = g->g_rep;
    break;
  }
  g_assert (*name != NULL && *size > 1);
}

static GgRef
wait (GgGen *g, GgRef c, const GgMeta *out)
{
  return gg_node (g, B_WAIT, "_c10d_functional.wait_tensor.default", out, 0, NULL, "r", c);
}

GgRef
gg_all_gather (GgGen *g, GgRef x, GgDim dim, const GgMeta *out)
{
  int64_t n;
  const char *name;
  dim_group (g, dim, &n, &name);
  g->stats.collectives[GG_COLL_AG][dim]++;
  GgRef c = gg_node (g, B_AG, "_c10d_functional.all_gather_into_tensor.default", out, 0, NULL,
                     "riq", x, n, name);
  return wait (g, c, out);
}

GgRef
gg_reduce_scatter (GgGen *g, GgRef x, GgDim dim, const GgMeta *out)
{
  int64_t n;
  const char *name;
  dim_group (g, dim, &n, &name);
  g->stats.collectives[GG_COLL_RS][dim]++;
  GgRef c = gg_node (g, B_RS, "_c10d_functional.reduce_scatter_tensor.default", out, 0, NULL,
                     "rqiq", x, "sum", n, name);
  return wait (g, c, out);
}

GgRef
gg_all_reduce (GgGen *g, GgRef x, GgDim dim, const GgMeta *out)
{
  int64_t n;
  const char *name;
  dim_group (g, dim, &n, &name);
  g->stats.collectives[GG_COLL_AR][dim]++;
  GgRef c = gg_node (g, B_AR, "_c10d_functional.all_reduce.default", out, 0, NULL, "rqq", x,
                     "sum", name);
  return wait (g, c, out);
}

GgRef
gg_sp_gather (GgGen *g, GgRef x)
{
  if (!g->sp)
    return x;
  GgMeta m = gg_meta2 (g->S, g->H, g->dt);
  return gg_all_gather (g, x, GG_DIM_TP, &m);
}

GgRef
gg_tp_reduce (GgGen *g, GgRef x)
{
  if (g->sp) {
    GgMeta m = gg_meta2 (g->Sl, g->H, g->dt);
    return gg_reduce_scatter (g, x, GG_DIM_TP, &m);
  }
  if (g->ar) {
    GgMeta m = gg_meta2 (g->S, g->H, g->dt);
    return gg_all_reduce (g, x, GG_DIM_TP, &m);
  }
  return x;
}

/* [S, Hl] -> view [1, S, nhl, hd] -> transpose(1, 2). */
GgRef
gg_heads (GgGen *g, GgRef x)
{
  const int64_t sh[4] = { 1, g->S, g->nhl, g->hd };
  GgMeta vm = gg_meta_contig (4, sh, g->dt);
  GgRef v = gg_node (g, B_VIEW, "aten.view.default", &vm, 0, NULL, "rL", x, 4, sh);
  GgMeta tm = { .nd = 4,
                .sh = { 1, g->nhl, g->S, g->hd },
                .st = { g->S * g->Hl, g->hd, g->Hl, 1 },
                .dt = g->dt };
  return gg_node (g, B_TRANSPOSE, "aten.transpose.int", &tm, 0, NULL, "rii", v, (int64_t)1,
                  (int64_t)2);
}


/* forward.c: one llama-like block and the loss, as make_fx traces
 * python/schedgraph/testing.py's Step:
 *
 *   a = sp_in(rmsnorm(h, gather_w(wn1)))
 *   o = sdpa_cudnn(view(a @ gather_w(wq).t()), ..., is_causal) @ gather_w(wo).t()
 *   h = h + tp_out(o)
 *   m = sp_in(rmsnorm(h, gather_w(wn2)))
 *   h = h + tp_out((silu(m @ gather_w(w1).t()) * (m @ gather_w(w3).t())) @ gather_w(w2).t())
 *   loss = h.float().pow(2).mean()
 *
 * gather_w: FSDP all_gather of the dim-0 weight shard (dp > 1); sp_in: all_gather
 * of the sequence shard (tp > 1, sp); tp_out: reduce_scatter (sp) or all_reduce
 * (tp > 1 without sp). Node order, args layout and metadata are the traced
 * ones (the samples in tests/data). Requires: placeholders emitted (graphgen.c).
 */
#include "graphgen-private.h"

#define MM "aten.mm.default"
#define T "aten.t.default"
#define MUL "aten.mul.Tensor"

static GgRef
param (int64_t layer, int j)
{
  return (GgRef){ B_ARG, (int32_t)(1 + 9 * layer + j) };
}

static GgRef
gather_w (GgGen *g, GgRef shard, const GgMeta *full)
{
  if (g->dp == 1)
    return shard;
  return gg_all_gather (g, shard, GG_DIM_DP, full);
}

/* x * rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w; the rsqrt is
 * detached (saved for backward) only when x needs a gradient. */
static GgRef
rmsnorm (GgGen *g, GgRef x, GgRef w, bool need_grad, GgRef *rs, GgRef *det, GgRef *n0)
{
  GgMeta full = gg_meta2 (g->Sl, g->H, g->dt);
  GgMeta col = gg_meta2 (g->Sl, 1, g->dt);
  static const int64_t last[] = { -1 };
  GgRef p = gg_node (g, B_POW, "aten.pow.Tensor_Scalar", &full, 0, NULL, "ri", x, (int64_t)2);
  GgRef mean = gg_node (g, B_MEAN, "aten.mean.dim", &col, 0, NULL, "rLl", p, 1, last, "true");
  GgRef add = gg_node (g, B_ADD, "aten.add.Tensor", &col, 0, NULL, "rl", mean, "1e-06");
  *rs = gg_node (g, B_RSQRT, "aten.rsqrt.default", &col, 0, NULL, "r", add);
  if (need_grad)
    *det = gg_node (g, B_DETACH, "aten.detach.default", &col, 0, NULL, "r", *rs);
  *n0 = gg_node (g, B_MUL, MUL, &full, 0, NULL, "rr", x, *rs);
  return gg_node (g, B_MUL, MUL, &full, 0, NULL, "rr", *n0, w);
}

/* x @ gather_w(w).t() for a weight of tp-local shape [out, in]. */
static GgRef
linear (GgGen *g, GgRef x, GgRef shard, int64_t out, int64_t in, GgRef *t)
{
  GgMeta wm = gg_meta2 (out, in, g->dt);
  GgRef w = gather_w (g, shard, &wm);
  GgMeta tm = gg_meta2t (in, out, in, g->dt);
  *t = gg_node (g, B_T, T, &tm, 0, NULL, "r", w);
  GgMeta om = gg_meta2 (g->S, out, g->dt);
  return gg_node (g, B_MM, MM, &om, 0, NULL, "rr", x, *t);
}

static GgRef
attention (GgGen *g, GgLayerSaved *sv)
{
  GgMeta tup[9];
  for (int i = 0; i < 9; i++)
    tup[i] = (GgMeta){ .nd = -1 };
  tup[0] = (GgMeta){ .nd = 4,
                     .sh = { 1, g->nhl, g->S, g->hd },
                     .st = { g->S * g->Hl, g->hd, g->Hl, 1 },
                     .dt = g->dt };
  const int64_t lse_sh[4] = { 1, g->nhl, g->S, 1 };
  tup[1] = gg_meta_contig (4, lse_sh, "float32");
  tup[6] = tup[7] = (GgMeta){ .nd = 0, .dt = "int64" };
  GgRef s = gg_node (g, B_SDPA, "aten._scaled_dot_product_cudnn_attention.default", tup, 9, NULL,
                     "rrrllll", sv->q4, sv->k4, sv->v4, "null", "true", "0.0", "true");
  GgRef gi[9];
  for (int i = 0; i < 9; i++)
    gi[i] = gg_node (g, B_GETITEM, "<built-in function getitem>", &tup[i], 0, NULL, "ri", s,
                     (int64_t)i);
  sv->lse = gi[1];
  sv->seed = gi[6];
  sv->offset = gi[7];
  sv->det_o = gg_node (g, B_DETACH, "aten.detach.default", &tup[0], 0, NULL, "r", gi[0]);
  GgMeta tm = { .nd = 4,
                .sh = { 1, g->S, g->nhl, g->hd },
                .st = { g->S * g->Hl, g->Hl, g->hd, 1 },
                .dt = g->dt };
  GgRef tr = gg_node (g, B_TRANSPOSE, "aten.transpose.int", &tm, 0, NULL, "rii", gi[0],
                      (int64_t)1, (int64_t)2);
  const int64_t osh[2] = { g->S, g->Hl };
  GgMeta om = gg_meta2 (g->S, g->Hl, g->dt);
  return gg_node (g, B_VIEW, "aten.view.default", &om, 0, NULL, "rL", tr, 2, osh);
}

GgRef
gg_forward_layer (GgGen *g, int64_t layer, GgRef h, GgLayerSaved *sv)
{
  GgMeta hm = gg_meta2 (g->Sl, g->H, g->dt);
  GgMeta nm = { .nd = 1, .sh = { g->H }, .st = { 1 }, .dt = g->dt };

  sv->h = h;
  sv->wn1g = gather_w (g, param (layer, 0), &nm);
  GgRef n = rmsnorm (g, h, sv->wn1g, layer > 0, &sv->rs1, &sv->det1, &sv->n0a);
  sv->a = gg_sp_gather (g, n);
  GgRef q = linear (g, sv->a, param (layer, 1), g->Hl, g->H, &sv->tq);
  GgRef k = linear (g, sv->a, param (layer, 2), g->Hl, g->H, &sv->tk);
  GgRef v = linear (g, sv->a, param (layer, 3), g->Hl, g->H, &sv->tv);
  sv->q4 = gg_heads (g, q);
  sv->k4 = gg_heads (g, k);
  sv->v4 = gg_heads (g, v);
  sv->o = attention (g, sv);
  GgRef o = linear (g, sv->o, param (layer, 4), g->H, g->Hl, &sv->two);
  GgRef r = gg_tp_reduce (g, o);
  sv->h1 = gg_node (g, B_ADD, "aten.add.Tensor", &hm, 0, NULL, "rr", h, r);

  sv->wn2g = gather_w (g, param (layer, 5), &nm);
  n = rmsnorm (g, sv->h1, sv->wn2g, true, &sv->rs2, &sv->det2, &sv->n0b);
  sv->m = gg_sp_gather (g, n);
  GgMeta fm = gg_meta2 (g->S, g->Fl, g->dt);
  sv->m1 = linear (g, sv->m, param (layer, 6), g->Fl, g->H, &sv->t1);
  sv->si = gg_node (g, B_SILU, "aten.silu.default", &fm, 0, NULL, "r", sv->m1);
  sv->m3 = linear (g, sv->m, param (layer, 7), g->Fl, g->H, &sv->t3);
  sv->gm = gg_node (g, B_MUL, MUL, &fm, 0, NULL, "rr", sv->si, sv->m3);
  GgRef m2 = linear (g, sv->gm, param (layer, 8), g->H, g->Fl, &sv->t2);
  r = gg_tp_reduce (g, m2);
  return gg_node (g, B_ADD, "aten.add.Tensor", &hm, 0, NULL, "rr", sv->h1, r);
}

GgRef
gg_loss (GgGen *g, GgRef h, GgRef *grad)
{
  GgMeta fm = gg_meta2 (g->Sl, g->H, "float32");
  GgMeta scalar = { .nd = 0, .dt = "float32" };
  GgRef x = h;
  if (!g->f32)
    x = gg_node (g, B_TO_COPY, "aten._to_copy.default", &fm, 0, "{\"dtype\": \"float32\"}", "r",
                 h);
  GgRef p = gg_node (g, B_POW, "aten.pow.Tensor_Scalar", &fm, 0, NULL, "ri", x, (int64_t)2);
  GgRef loss = gg_node (g, B_MEAN, "aten.mean.default", &scalar, 0, NULL, "r", p);
  GgRef ones = gg_node (g, B_ONES_LIKE, "aten.ones_like.default", &scalar, 0,
                        "{\"pin_memory\": false, \"memory_format\": \"torch.preserve_format\"}",
                        "r", loss);
  const int64_t sh[2] = { g->Sl, g->H };
  GgMeta em = { .nd = 2, .sh = { g->Sl, g->H }, .st = { 0, 0 }, .dt = "float32" };
  GgRef e = gg_node (g, B_EXPAND, "aten.expand.default", &em, 0, NULL, "rL", ones, 2, sh);
  GgRef d = gg_node (g, B_DIV, "aten.div.Scalar", &fm, 0, NULL, "ri", e, g->Sl * g->H);
  GgRef p1 = gg_node (g, B_POW, "aten.pow.Tensor_Scalar", &fm, 0, NULL, "rl", x, "1.0");
  GgRef m = gg_node (g, B_MUL, "aten.mul.Scalar", &fm, 0, NULL, "rl", p1, "2.0");
  GgRef gr = gg_node (g, B_MUL, MUL, &fm, 0, NULL, "rr", d, m);
  if (!g->f32) {
    char kw[128];
    g_snprintf (kw, sizeof kw,
                "{\"dtype\": \"%s\", \"layout\": \"torch.strided\", \"device\": \"cuda:0\"}",
                g->dt);
    GgMeta bm = gg_meta2 (g->Sl, g->H, g->dt);
    gr = gg_node (g, B_TO_COPY, "aten._to_copy.default", &bm, 0, kw, "r", gr);
  }
  *grad = gr;
  return loss;
}

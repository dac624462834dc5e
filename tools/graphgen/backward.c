/* backward.c: the autograd backward of one block (forward.c), as make_fx
 * records it after loss.backward() for python/schedgraph/testing.py's Step.
 *
 * Per linear y = x @ w.t(): dW = (dy.t() @ x).t().t() (aten's t/mm/t/t
 * chain), dx = dy @ w.t().t(); the weight gradient is reduce_scattered over
 * dp (FSDP; the dual of the forward all_gather) and all_reduced over
 * replicas. Under sp the gradient entering a row-parallel mm is all_gathered
 * and the input gradient of the column-parallel mm's reduce_scattered; under
 * tp all_reduce the input gradient is all_reduced. RMSnorm backward is
 * aten's decomposition (sum over rows for dw, the rsqrt^3 term for dx), with
 * no dx for the first layer's input (the tokens need no gradient).
 * Requires: the layer's GgLayerSaved from gg_forward_layer().
 */
#include "graphgen-private.h"

#define MM "aten.mm.default"
#define T "aten.t.default"
#define MUL "aten.mul.Tensor"

static GgRef
t_of (GgGen *g, GgRef x, const GgMeta *xm, GgMeta *out)
{
  *out = gg_meta_swap (xm);
  return gg_node (g, B_T, T, out, 0, NULL, "r", x);
}

static GgRef
mm (GgGen *g, GgRef a, GgRef b, int64_t m, int64_t n)
{
  GgMeta om = gg_meta2 (m, n, g->dt);
  return gg_node (g, B_MM, MM, &om, 0, NULL, "rr", a, b);
}

/* Weight gradient @grad (tp-local [rows, cols]) synchronised over the mesh:
 * reduce_scatter over dp, then all_reduce over replicas. */
static GgRef
sync_grad (GgGen *g, GgRef grad, const GgMeta *full)
{
  GgMeta shard = *full;
  if (g->dp > 1) {
    shard.sh[0] /= g->dp;
    grad = gg_reduce_scatter (g, grad, GG_DIM_DP, &shard);
  }
  if (g->rep > 1)
    grad = gg_all_reduce (g, grad, GG_DIM_REP, &shard);
  return grad;
}

/* Norm-weight gradient: the copies on the tp ranks of an sp mesh each saw
 * one sequence shard; --sp-norm-allreduce sums them (after the dp
 * reduce_scatter, on the shard). */
static GgRef
sync_norm_grad (GgGen *g, GgRef grad, const GgMeta *full)
{
  grad = sync_grad (g, grad, full);
  if (g->sp && g->cfg->sp_norm_allreduce) {
    GgMeta shard = *full;
    shard.sh[0] /= g->dp;
    grad = gg_all_reduce (g, grad, GG_DIM_TP, &shard);
  }
  return grad;
}

/* A linear's backward up to dx; the weight gradient's last t() comes
 * later (finish_dw) because aten emits the input-gradient accumulation in
 * between. */
typedef struct {
  GgRef pt;   /* (dy.t() @ x).t(): [in, out], strides [1, in] */
  GgMeta dwm; /* dW: [out, in] contiguous */
} GgLinBwd;

/* Backward of y = x @ t where t = w.t() ([in, out], strides [1, in]),
 * x [S, in], dy [S, out]. Emits t(dy), mm, t, t(t), mm; returns dx [S, in]. */
static GgRef
linear_bwd (GgGen *g, GgRef dy, GgRef x, GgRef t, int64_t in, int64_t out, GgLinBwd *lb)
{
  GgMeta m1, m2, m3;
  GgMeta dym = gg_meta2 (g->S, out, g->dt);
  GgRef dyt = t_of (g, dy, &dym, &m1);
  GgRef p = mm (g, dyt, x, out, in);
  GgMeta pm = gg_meta2 (out, in, g->dt);
  lb->pt = t_of (g, p, &pm, &m2);
  lb->dwm = gg_meta_swap (&m2);
  GgMeta tm = gg_meta2t (in, out, in, g->dt);
  GgRef tt = t_of (g, t, &tm, &m3);
  return mm (g, dy, tt, g->S, in);
}

static GgRef
finish_dw (GgGen *g, const GgLinBwd *lb)
{
  GgRef dw = gg_node (g, B_T, T, &lb->dwm, 0, NULL, "r", lb->pt);
  return sync_grad (g, dw, &lb->dwm);
}

/* RMSnorm backward. @dy: gradient of the norm's output [Sl, H]; @resid: the
 * gradient already accumulated for x; @x, @rs, @n0 = x * rs, @w: gathered
 * weight, @det: the forward's detached rsqrt. Returns dW ([H], unsynced) and
 * through @dx the new residual gradient (when @need_dx). */
static GgRef
rmsnorm_bwd (GgGen *g, GgRef dy, GgRef resid, GgRef x, GgRef rs, GgRef n0, GgRef w, GgRef det,
             bool need_dx, GgRef *dx)
{
  GgMeta full = gg_meta2 (g->Sl, g->H, g->dt);
  GgMeta row = gg_meta2 (1, g->H, g->dt);
  GgMeta col = gg_meta2 (g->Sl, 1, g->dt);
  GgMeta vec = { .nd = 1, .sh = { g->H }, .st = { 1 }, .dt = g->dt };
  static const int64_t d0[] = { 0 }, d1[] = { 1 };
  const int64_t hsh[1] = { g->H };

  GgRef a = gg_node (g, B_MUL, MUL, &full, 0, NULL, "rr", dy, n0);
  GgRef b = { 0, 0 };
  if (need_dx)
    b = gg_node (g, B_MUL, MUL, &full, 0, NULL, "rr", dy, w);
  GgRef s0 = gg_node (g, B_SUM, "aten.sum.dim_IntList", &row, 0, NULL, "rLl", a, 1, d0, "true");
  GgRef dw = gg_node (g, B_VIEW, "aten.view.default", &vec, 0, NULL, "rL", s0, 1, hsh);
  if (!need_dx)
    return dw;
  GgRef c = gg_node (g, B_MUL, MUL, &full, 0, NULL, "rr", b, x);
  GgRef d = gg_node (g, B_MUL, MUL, &full, 0, NULL, "rr", b, rs);
  GgRef s1 = gg_node (g, B_SUM, "aten.sum.dim_IntList", &col, 0, NULL, "rLl", c, 1, d1, "true");
  GgRef r = gg_node (g, B_ADD, "aten.add.Tensor", &full, 0, NULL, "rr", resid, d);
  GgRef dd = gg_node (g, B_DETACH, "aten.detach.default", &col, 0, NULL, "r", det);
  GgRef p3 = gg_node (g, B_POW, "aten.pow.Tensor_Scalar", &col, 0, NULL, "ri", dd, (int64_t)3);
  GgRef h = gg_node (g, B_MUL, "aten.mul.Scalar", &col, 0, NULL, "rl", s1, "-0.5");
  GgRef e = gg_node (g, B_MUL, MUL, &col, 0, NULL, "rr", h, p3);
  const int64_t sh[2] = { g->Sl, g->H };
  GgMeta em = { .nd = 2, .sh = { g->Sl, g->H }, .st = { 1, 0 }, .dt = g->dt };
  GgRef ex = gg_node (g, B_EXPAND, "aten.expand.default", &em, 0, NULL, "rL", e, 2, sh);
  GgRef dv = gg_node (g, B_DIV, "aten.div.Scalar", &full, 0, NULL, "ri", ex, g->H);
  GgRef p1 = gg_node (g, B_POW, "aten.pow.Tensor_Scalar", &full, 0, NULL, "rl", x, "1.0");
  GgRef m2 = gg_node (g, B_MUL, "aten.mul.Scalar", &full, 0, NULL, "rl", p1, "2.0");
  GgRef f = gg_node (g, B_MUL, MUL, &full, 0, NULL, "rr", dv, m2);
  *dx = gg_node (g, B_ADD, "aten.add.Tensor", &full, 0, NULL, "rr", r, f);
  return dw;
}

/* [1, nhl, S, hd] head-major gradient -> transpose(1, 2) -> view [S, Hl]. */
static GgRef
unheads (GgGen *g, GgRef x)
{
  GgMeta tm = { .nd = 4,
                .sh = { 1, g->S, g->nhl, g->hd },
                .st = { g->S * g->Hl, g->Hl, g->hd, 1 },
                .dt = g->dt };
  GgRef tr = gg_node (g, B_TRANSPOSE, "aten.transpose.int", &tm, 0, NULL, "rii", x, (int64_t)1,
                      (int64_t)2);
  const int64_t sh[2] = { g->S, g->Hl };
  GgMeta vm = gg_meta2 (g->S, g->Hl, g->dt);
  return gg_node (g, B_VIEW, "aten.view.default", &vm, 0, NULL, "rL", tr, 2, sh);
}

GgRef
gg_backward_layer (GgGen *g, int64_t layer, const GgLayerSaved *sv, GgRef grad,
                   GgLayerGrads *out)
{
  GgMeta fm = gg_meta2 (g->S, g->Fl, g->dt);
  GgMeta hm = gg_meta2 (g->S, g->H, g->dt);
  GgMeta nm = { .nd = 1, .sh = { g->H }, .st = { 1 }, .dt = g->dt };
  GgLinBwd lb;
  GgRef dx, dx2;

  /* MLP: h2 = h1 + tp(((silu(m @ t1) * (m @ t3)) @ t2) */
  GgRef gf = gg_sp_gather (g, grad);
  GgRef dgm = linear_bwd (g, gf, sv->gm, sv->t2, g->Fl, g->H, &lb);
  out->g[8] = finish_dw (g, &lb);
  GgRef d3 = gg_node (g, B_MUL, MUL, &fm, 0, NULL, "rr", dgm, sv->si);
  GgRef dsi = gg_node (g, B_MUL, MUL, &fm, 0, NULL, "rr", dgm, sv->m3);
  dx = linear_bwd (g, d3, sv->m, sv->t3, g->H, g->Fl, &lb);
  out->g[7] = finish_dw (g, &lb);
  GgRef d1 = gg_node (g, B_SILU_BWD, "aten.silu_backward.default", &fm, 0, NULL, "rr", dsi,
                      sv->m1);
  dx2 = linear_bwd (g, d1, sv->m, sv->t1, g->H, g->Fl, &lb);
  GgRef dm = gg_node (g, B_ADD, "aten.add.Tensor", &hm, 0, NULL, "rr", dx, dx2);
  out->g[6] = finish_dw (g, &lb);
  GgRef dn = gg_tp_reduce (g, dm);
  GgRef g1;
  GgRef dw = rmsnorm_bwd (g, dn, grad, sv->h1, sv->rs2, sv->n0b, sv->wn2g, sv->det2, true, &g1);
  out->g[5] = sync_norm_grad (g, dw, &nm);

  /* attention: h1 = h + tp(sdpa(heads(a @ tq), ...) @ two) */
  gf = gg_sp_gather (g, g1);
  GgRef dov = linear_bwd (g, gf, sv->o, sv->two, g->Hl, g->H, &lb);
  out->g[4] = finish_dw (g, &lb);
  GgRef do4 = gg_heads (g, dov);
  GgMeta om = { .nd = 4,
                .sh = { 1, g->nhl, g->S, g->hd },
                .st = { g->S * g->Hl, g->hd, g->Hl, 1 },
                .dt = g->dt };
  GgRef det = gg_node (g, B_DETACH, "aten.detach.default", &om, 0, NULL, "r", sv->det_o);
  GgMeta tup[3] = { om, om, om };
  GgRef sb = gg_node (g, B_SDPA_BWD, "aten._scaled_dot_product_cudnn_attention_backward.default",
                      tup, 3, NULL, "rrrrrrrrllliill", do4, sv->q4, sv->k4, sv->v4, det, sv->lse,
                      sv->seed, sv->offset, "null", "null", "null", g->S, g->S, "0.0", "true");
  GgRef gi[3];
  for (int i = 0; i < 3; i++)
    gi[i] = gg_node (g, B_GETITEM, "<built-in function getitem>", &om, 0, NULL, "ri", sb,
                     (int64_t)i);
  GgRef dv = unheads (g, gi[2]);
  GgRef dk = unheads (g, gi[1]);
  GgRef dq = unheads (g, gi[0]);
  dx = linear_bwd (g, dv, sv->a, sv->tv, g->H, g->Hl, &lb);
  out->g[3] = finish_dw (g, &lb);
  dx2 = linear_bwd (g, dk, sv->a, sv->tk, g->H, g->Hl, &lb);
  GgRef da = gg_node (g, B_ADD, "aten.add.Tensor", &hm, 0, NULL, "rr", dx, dx2);
  out->g[2] = finish_dw (g, &lb);
  dx = linear_bwd (g, dq, sv->a, sv->tq, g->H, g->Hl, &lb);
  da = gg_node (g, B_ADD, "aten.add.Tensor", &hm, 0, NULL, "rr", da, dx);
  out->g[1] = finish_dw (g, &lb);
  dn = gg_tp_reduce (g, da);
  GgRef g0 = { 0, 0 };
  dw = rmsnorm_bwd (g, dn, g1, sv->h, sv->rs1, sv->n0a, sv->wn1g, sv->det1, layer > 0, &g0);
  out->g[0] = sync_norm_grad (g, dw, &nm);
  return g0;
}

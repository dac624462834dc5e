/* test_graphgen_numeric.c: graphgen's graphs compute the gradients they
 * claim. A float64 interpreter runs a generated graph on every rank of the
 * world in lockstep (collectives combine the ranks of each group instance),
 * reading and writing every tensor through the node's own shape and strides,
 * so wrong metadata or a wrong backward gives wrong numbers. Each parameter
 * kind of the first and last block is then checked against a central finite
 * difference of J = sum of the ranks' losses (divided by tp in all_reduce
 * mode, where every tp rank computes the same loss).
 *
 * Parameters hold one global weight cut by the mesh (tp slices, dp shards,
 * identical replicas), so perturbing rank r's copy means: r's element on every
 * replica (their gradients are all_reduced), and in all_reduce mode or with
 * --sp-norm-allreduce the tp-replicated norm weights on every tp rank too
 * (their gradient is the tied one).
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "graphgen.h"

typedef struct {
  double *d;
  int nd; /* -1: no tensor */
  int64_t sh[4], st[4];
} Ten;

typedef struct {
  Ten t;
  Ten tup[9];
} Val;

typedef struct {
  double scalar; /* first number among the args (not node refs) */
  int64_t list[4];
  int n_list; /* first list of numbers among the args */
} Prep;

typedef struct {
  const GgConfig *cfg;
  int W;
  SgGraph **g; /* per rank (the groups differ, the nodes do not) */
  Val *v;      /* [rank * n + id] */
  Prep *prep;
  int n;
  GPtrArray *allocs;
  /* perturbation of one placeholder element */
  int pert_arg;
  int64_t pert_elem;
  double pert_delta;
  const bool *pert_rank;
} Exec;

static int64_t
numel (const Ten *t)
{
  int64_t n = 1;
  for (int i = 0; i < t->nd; i++)
    n *= t->sh[i];
  return n;
}

/* storage offset of the @lin-th element in row-major order of @t's shape */
static int64_t
off (const Ten *t, int64_t lin)
{
  int64_t o = 0;
  for (int i = t->nd - 1; i >= 0; i--) {
    o += (lin % t->sh[i]) * t->st[i];
    lin /= t->sh[i];
  }
  return o;
}

/* element of @in read at output index @lin of shape @out (broadcasting) */
static double
bget (const Ten *in, const Ten *out, int64_t lin)
{
  int64_t o = 0;
  for (int i = out->nd - 1; i >= 0; i--) {
    int64_t idx = lin % out->sh[i];
    lin /= out->sh[i];
    int k = i - (out->nd - in->nd);
    if (k >= 0 && in->sh[k] != 1)
      o += idx * in->st[k];
  }
  return in->d[o];
}

static Ten
ten_of_meta (Exec *x, const SgGraph *g, const SgMeta *m, double *storage)
{
  Ten t = { .nd = m->ndim };
  if (m->ndim < 0)
    return t;
  int64_t size = 1;
  for (int i = 0; i < m->ndim; i++) {
    t.sh[i] = sg_meta_shape (g, m)[i];
    t.st[i] = sg_meta_stride (g, m)[i];
    size += (t.sh[i] - 1) * t.st[i];
  }
  if (storage) {
    t.d = storage;
  } else {
    t.d = g_new0 (double, (size_t)size);
    g_ptr_array_add (x->allocs, t.d);
  }
  return t;
}

static uint64_t
mix (uint64_t z)
{
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static double
uniform (uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
  uint64_t h = mix (mix (mix (mix (a) ^ b) ^ c) ^ d);
  return (double)(h >> 11) / 9007199254740992.0 - 0.5;
}

/* The global element a placeholder element holds on rank r. */
static double
input_value (const Exec *x, int r, int arg, int64_t i, int64_t c)
{
  const GgConfig *k = x->cfg;
  int64_t tp = k->tp, dp = k->dp, t = r % tp, d = (r / tp) % dp, rep = r / (tp * dp);
  int64_t H = k->hidden, Hl = H / tp, Fl = k->ffn / tp;
  bool sp = tp > 1 && k->tp_mode == GG_TP_SP;
  if (arg == 0) /* tokens: per (replica, dp rank), sequence-sharded under sp */
    return 2.0 * uniform (1000 + (uint64_t)rep, (uint64_t)d,
                          (uint64_t)((sp ? t * (k->seq / tp) : 0) + i), (uint64_t)c);
  int j = (arg - 1) % 9, layer = (arg - 1) / 9;
  int64_t row, col = c, in;
  switch (j) {
  case 0:
  case 5: /* norm weights [H], dp-sharded, tp-replicated */
    return 1.0 + 0.4 * uniform ((uint64_t)layer, (uint64_t)j, (uint64_t)(d * (H / dp) + i), 0);
  case 4: /* wo [H, H]: tp slices columns, dp shards rows */
  case 8: /* w2 [H, F] */
    row = d * (H / dp) + i;
    col = t * (j == 4 ? Hl : Fl) + c;
    in = j == 4 ? H : k->ffn;
    break;
  default: { /* wq wk wv [H, H], w1 w3 [F, H]: tp slices rows, dp shards them */
    int64_t out_l = (j == 6 || j == 7) ? Fl : Hl;
    row = t * out_l + d * (out_l / dp) + i;
    in = H;
  }
  }
  return 2.0 / sqrt ((double)in) *
         uniform ((uint64_t)layer, (uint64_t)j, (uint64_t)row, (uint64_t)col);
}

static void
prep_args (Exec *x)
{
  const SgGraph *g = x->g[0];
  x->prep = g_new0 (Prep, (size_t)x->n);
  for (int id = 0; id < x->n; id++) {
    Prep *p = &x->prep[id];
    p->scalar = NAN;
    for (uint32_t i = 0; i < g->nodes[id].n_args; i++) {
      const SgArg *e = sg_node_arg (g, id, i);
      double d;
      if (sg_arg_float (e, &d) && isnan (p->scalar))
        p->scalar = d;
      uint32_t n;
      const SgArg *items = e->type == SG_ARG_LIST ? sg_arg_items (g, e, &n) : NULL;
      if (items && p->n_list == 0 && n <= 4 && sg_arg_float (&items[0], &d))
        for (uint32_t k = 0; k < n; k++)
          p->list[p->n_list++] = sg_arg_float (&items[k], &d) ? (int64_t)d : 0;
    }
  }
}

#define IN(k) (&x->v[(size_t)r * (size_t)x->n + (size_t)in[k]].t)

static void
sdpa (const Ten *q, const Ten *k, const Ten *v, Ten *o, Ten *lse)
{
  int64_t nh = q->sh[1], S = q->sh[2], hd = q->sh[3];
  double scale = 1.0 / sqrt ((double)hd), *s = g_new (double, (size_t)S);
#define AT(T, h, i, c) (T)->d[(h) * (T)->st[1] + (i) * (T)->st[2] + (c) * (T)->st[3]]
  for (int64_t h = 0; h < nh; h++)
    for (int64_t i = 0; i < S; i++) {
      double m = -INFINITY, z = 0;
      for (int64_t j = 0; j <= i; j++) {
        s[j] = 0;
        for (int64_t c = 0; c < hd; c++)
          s[j] += AT (q, h, i, c) * AT (k, h, j, c);
        s[j] *= scale;
        m = fmax (m, s[j]);
      }
      for (int64_t j = 0; j <= i; j++)
        z += exp (s[j] - m);
      double l = m + log (z);
      AT (lse, h, i, 0) = l;
      for (int64_t c = 0; c < hd; c++) {
        double acc = 0;
        for (int64_t j = 0; j <= i; j++)
          acc += exp (s[j] - l) * AT (v, h, j, c);
        AT (o, h, i, c) = acc;
      }
    }
  g_free (s);
}

static void
sdpa_bwd (const Ten *dout, const Ten *q, const Ten *k, const Ten *v, const Ten *o, const Ten *lse,
          Ten *dq, Ten *dk, Ten *dv)
{
  int64_t nh = q->sh[1], S = q->sh[2], hd = q->sh[3];
  double scale = 1.0 / sqrt ((double)hd);
  for (int64_t h = 0; h < nh; h++)
    for (int64_t i = 0; i < S; i++) {
      double D = 0;
      for (int64_t c = 0; c < hd; c++)
        D += AT (dout, h, i, c) * AT (o, h, i, c);
      for (int64_t j = 0; j <= i; j++) {
        double sc = 0, dp = 0;
        for (int64_t c = 0; c < hd; c++) {
          sc += AT (q, h, i, c) * AT (k, h, j, c);
          dp += AT (dout, h, i, c) * AT (v, h, j, c);
        }
        double P = exp (sc * scale - AT (lse, h, i, 0)), dS = P * (dp - D);
        for (int64_t c = 0; c < hd; c++) {
          AT (dv, h, j, c) += P * AT (dout, h, i, c);
          AT (dq, h, i, c) += scale * dS * AT (k, h, j, c);
          AT (dk, h, j, c) += scale * dS * AT (q, h, i, c);
        }
      }
    }
#undef AT
}

/* Collectives: every rank of the instance at once (lockstep). */
static void
collective (Exec *x, int id)
{
  SgNodeId src = sg_node_inputs (x->g[0], id, &(uint32_t){ 0 })[0];
  for (int r = 0; r < x->W; r++) {
    const SgNode *nd = &x->g[r]->nodes[id];
    const SgGroup *grp = &x->g[r]->groups[nd->group];
    Ten *out = &x->v[(size_t)r * (size_t)x->n + (size_t)id].t;
    *out = ten_of_meta (x, x->g[r], &nd->meta, NULL);
    int pos = 0;
    for (int k = 0; k < grp->n_ranks; k++)
      pos = grp->ranks[k] == r ? k : pos;
    int64_t on = numel (out);
    for (int k = 0; k < grp->n_ranks; k++) {
      const Ten *in = &x->v[(size_t)grp->ranks[k] * (size_t)x->n + (size_t)src].t;
      int64_t inn = numel (in);
      if (nd->kind == SG_OP_ALL_GATHER) /* rank k's rows after rank k-1's */
        for (int64_t e = 0; e < inn; e++)
          out->d[off (out, k * inn + e)] = in->d[off (in, e)];
      else if (nd->kind == SG_OP_REDUCE_SCATTER) /* sum, keep our rows */
        for (int64_t e = 0; e < on; e++)
          out->d[off (out, e)] += in->d[off (in, pos * on + e)];
      else
        for (int64_t e = 0; e < on; e++)
          out->d[off (out, e)] += in->d[off (in, e)];
    }
  }
}

static void
run_node (Exec *x, int r, int id)
{
  const SgGraph *g = x->g[r];
  const SgNode *nd = &g->nodes[id];
  uint32_t n_in;
  const SgNodeId *in = sg_node_inputs (g, id, &n_in);
  Val *val = &x->v[(size_t)r * (size_t)x->n + (size_t)id];
  const Prep *p = &x->prep[id];
  Ten *o = &val->t;
  switch (nd->kind) {
  case SG_OP_OUTPUT:
    return;
  case SG_OP_PLACEHOLDER: {
    *o = ten_of_meta (x, g, &nd->meta, NULL);
    int arg = atoi (nd->name + 3);
    int64_t cols = o->nd == 2 ? o->sh[1] : 1;
    for (int64_t e = 0; e < numel (o); e++) {
      o->d[off (o, e)] = input_value (x, r, arg, e / cols, e % cols);
      if (arg == x->pert_arg && e == x->pert_elem && x->pert_rank[r])
        o->d[off (o, e)] += x->pert_delta;
    }
    return;
  }
  case SG_OP_VIEW:
    /* a view reinterprets storage: only valid on a contiguous input */
    for (int i = IN (0)->nd - 1, s = 1; i >= 0; s *= (int)IN (0)->sh[i], i--)
      ck_assert_msg (IN (0)->sh[i] == 1 || IN (0)->st[i] == s, "node %s: view of a "
                     "non-contiguous %s", nd->name, g->nodes[in[0]].name);
    *o = ten_of_meta (x, g, &nd->meta, IN (0)->d);
    return;
  case SG_OP_T:
  case SG_OP_TRANSPOSE:
  case SG_OP_EXPAND:
  case SG_OP_DETACH:
  case SG_OP_WAIT:
    *o = ten_of_meta (x, g, &nd->meta, IN (0)->d);
    return;
  case SG_OP_GETITEM: {
    const Ten *e = &x->v[(size_t)r * (size_t)x->n + (size_t)in[0]].tup[nd->getitem_index];
    *o = ten_of_meta (x, g, &nd->meta, e->d);
    return;
  }
  case SG_OP_SDPA_CUDNN:
  case SG_OP_SDPA_CUDNN_BWD:
    for (uint32_t k = 0; k < nd->n_tuple; k++)
      val->tup[k] = ten_of_meta (x, g, sg_node_tuple_meta (g, id, k), NULL);
    if (nd->kind == SG_OP_SDPA_CUDNN)
      sdpa (IN (0), IN (1), IN (2), &val->tup[0], &val->tup[1]);
    else
      sdpa_bwd (IN (0), IN (1), IN (2), IN (3), IN (4), IN (5), &val->tup[0], &val->tup[1],
                &val->tup[2]);
    return;
  default:
    break;
  }
  *o = ten_of_meta (x, g, &nd->meta, NULL);
  int64_t n = numel (o);
  switch (nd->kind) {
  case SG_OP_MM: {
    const Ten *a = IN (0), *b = IN (1);
    for (int64_t i = 0; i < o->sh[0]; i++)
      for (int64_t j = 0; j < o->sh[1]; j++) {
        double acc = 0;
        for (int64_t k = 0; k < a->sh[1]; k++)
          acc += a->d[i * a->st[0] + k * a->st[1]] * b->d[k * b->st[0] + j * b->st[1]];
        o->d[i * o->st[0] + j * o->st[1]] = acc;
      }
    return;
  }
  case SG_OP_MEAN_DIM:
  case SG_OP_SUM_DIM:
  case SG_OP_MEAN: {
    const Ten *a = IN (0);
    int64_t an = numel (a);
    for (int64_t e = 0; e < an; e++) {
      /* the output index: the input's with reduced dims dropped to 0 */
      int64_t lin = e, oo = 0;
      for (int i = a->nd - 1; i >= 0; i--) {
        int64_t idx = lin % a->sh[i];
        lin /= a->sh[i];
        if (o->nd == a->nd && o->sh[i] == a->sh[i])
          oo += idx * o->st[i];
      }
      o->d[oo] += a->d[off (a, e)];
    }
    if (nd->kind != SG_OP_SUM_DIM)
      for (int64_t e = 0; e < n; e++)
        o->d[off (o, e)] /= (double)(an / n);
    return;
  }
  default:
    break;
  }
  for (int64_t e = 0; e < n; e++) {
    double a = n_in > 0 ? bget (IN (0), o, e) : 0, res;
    switch (nd->kind) {
    case SG_OP_ADD_TENSOR:
      res = a + (n_in > 1 ? bget (IN (1), o, e) : p->scalar);
      break;
    case SG_OP_MUL_TENSOR:
      res = a * bget (IN (1), o, e);
      break;
    case SG_OP_MUL_SCALAR:
      res = a * p->scalar;
      break;
    case SG_OP_DIV_SCALAR:
      res = a / p->scalar;
      break;
    case SG_OP_POW_TENSOR_SCALAR:
      res = pow (a, p->scalar);
      break;
    case SG_OP_RSQRT:
      res = 1.0 / sqrt (a);
      break;
    case SG_OP_SILU:
      res = a / (1.0 + exp (-a));
      break;
    case SG_OP_SILU_BACKWARD: {
      double xx = bget (IN (1), o, e), s = 1.0 / (1.0 + exp (-xx));
      res = a * s * (1.0 + xx * (1.0 - s));
      break;
    }
    case SG_OP_TO_COPY:
      res = a;
      break;
    case SG_OP_ONES_LIKE:
      res = 1.0;
      break;
    default:
      ck_abort_msg ("node %s: no interpreter rule for %s", nd->name, nd->target);
      return;
    }
    o->d[off (o, e)] = res;
  }
}

/* Runs the graph on every rank; returns J. */
static double
execute (Exec *x)
{
  memset (x->v, 0, sizeof (Val) * (size_t)x->W * (size_t)x->n);
  for (int id = 0; id < x->n; id++) {
    if (sg_op_is_collective (x->g[0]->nodes[id].kind))
      collective (x, id);
    else
      for (int r = 0; r < x->W; r++)
        run_node (x, r, id);
  }
  uint32_t n_out;
  const SgNodeId *outs = sg_node_inputs (x->g[0], x->g[0]->output, &n_out);
  double J = 0;
  for (int r = 0; r < x->W; r++)
    J += x->v[(size_t)r * (size_t)x->n + (size_t)outs[0]].t.d[0];
  bool ar = x->cfg->tp > 1 && x->cfg->tp_mode == GG_TP_ALLREDUCE;
  return J / (ar ? (double)x->cfg->tp : 1.0);
}

static void
free_run (Exec *x)
{
  g_ptr_array_set_size (x->allocs, 0);
}

static SgGraph *
load_rank (GgConfig c, int64_t rank)
{
  c.rank = rank;
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream (&buf, &n);
  GError *error = NULL;
  if (!gg_write (&c, f, NULL, &error))
    ck_abort_msg ("gg_write: %s", error->message);
  fclose (f);
  SgGraph *g = sg_graph_load_data (buf, n, "<graphgen>", &error);
  if (!g)
    ck_abort_msg ("load: %s", error->message);
  free (buf);
  return g;
}

/* Checks every parameter kind of the first and last block on varying ranks
 * and elements against central differences of J. */
static void
check_gradients (const GgConfig *cfg)
{
  Exec x = { .cfg = cfg, .pert_arg = -1 };
  x.W = (int)(cfg->world ? cfg->world : cfg->dp * cfg->tp);
  x.g = g_new0 (SgGraph *, (size_t)x.W);
  for (int r = 0; r < x.W; r++)
    x.g[r] = load_rank (*cfg, r);
  x.n = x.g[0]->n_nodes;
  x.v = g_new0 (Val, (size_t)x.W * (size_t)x.n);
  x.allocs = g_ptr_array_new_with_free_func (g_free);
  prep_args (&x);
  bool *pert = g_new0 (bool, (size_t)x.W);
  x.pert_rank = pert;

  uint32_t n_out;
  const SgNodeId *outs = sg_node_inputs (x.g[0], x.g[0]->output, &n_out);
  int64_t L = cfg->layers, tp = cfg->tp, dp = cfg->dp;
  bool ar = tp > 1 && cfg->tp_mode == GG_TP_ALLREDUCE;
  int checked = 0, nonzero = 0;
  for (int64_t layer = 0; layer < L; layer += L - 1 > 0 ? L - 1 : 1)
    for (int j = 0; j < 9; j++) {
      int arg = (int)(1 + 9 * layer + j);
      int r = (int)((layer * 9 + j) % x.W);
      const SgMeta *pm = &x.g[0]->nodes[arg].meta;
      int64_t pn = (int64_t)sg_meta_numel (x.g[0], pm);
      int64_t elem = (int64_t)(mix ((uint64_t)arg * 31 + (uint64_t)r) % (uint64_t)pn);
      /* the gradient the graph gives on rank r */
      execute (&x);
      const Ten *gt = &x.v[(size_t)r * (size_t)x.n + (size_t)outs[arg]].t;
      double grad = gt->d[off (gt, elem)];
      free_run (&x);
      /* r's copy on every replica; norm weights on every tp rank under all_reduce */
      for (int q = 0; q < x.W; q++) {
        bool tied = ar || cfg->sp_norm_allreduce;
        bool same_t = q % tp == r % tp || (tied && (j == 0 || j == 5));
        pert[q] = same_t && (q / tp) % dp == (r / tp) % dp;
      }
      const double eps = 1e-5;
      x.pert_arg = arg, x.pert_elem = elem, x.pert_delta = eps;
      double jp = execute (&x);
      free_run (&x);
      x.pert_delta = -eps;
      double jm = execute (&x);
      free_run (&x);
      x.pert_arg = -1;
      double fd = (jp - jm) / (2 * eps);
      ck_assert_msg (fabs (fd - grad) <= 1e-6 * (fabs (fd) + fabs (grad)) + 1e-9,
                     "dp %d tp %d world %d %s: %s (layer %d param %d) rank %d elem %d: "
                     "graph %.12g, finite difference %.12g",
                     (int)dp, (int)tp, x.W, ar ? "allreduce" : "sp", x.g[0]->nodes[arg].name,
                     (int)layer, j, r, (int)elem, grad, fd);
      checked++;
      nonzero += fabs (grad) > 1e-7;
    }
  ck_assert_int_eq (checked, L > 1 ? 18 : 9);
  ck_assert_int_ge (nonzero, checked - 2); /* a test of zeros proves nothing */
  for (int r = 0; r < x.W; r++)
    sg_graph_free (x.g[r]);
  g_ptr_array_free (x.allocs, true);
  g_free (x.g);
  g_free (x.v);
  g_free (x.prep);
  g_free (pert);
}

static void
small (GgConfig *c, int64_t dp, int64_t tp, int64_t world, GgTpMode mode)
{
  gg_config_init (c);
  c->layers = 2, c->hidden = 16, c->ffn = 32, c->heads = 4, c->seq = 8;
  c->dp = dp, c->tp = tp, c->world = world, c->tp_mode = mode;
}

START_TEST (single_rank_gradients_are_exact)
{
  GgConfig c;
  small (&c, 1, 1, 0, GG_TP_SP);
  check_gradients (&c);
  c.dtype = "float32";
  check_gradients (&c);
}
END_TEST

START_TEST (fsdp_gradients_are_exact)
{
  GgConfig c;
  small (&c, 2, 1, 0, GG_TP_SP);
  check_gradients (&c);
}
END_TEST

START_TEST (tp_sequence_parallel_gradients_are_exact)
{
  GgConfig c;
  small (&c, 1, 2, 0, GG_TP_SP);
  check_gradients (&c);
}
END_TEST

START_TEST (tp_allreduce_gradients_are_exact)
{
  GgConfig c;
  small (&c, 1, 2, 0, GG_TP_ALLREDUCE);
  check_gradients (&c);
}
END_TEST

START_TEST (fsdp_x_tp_gradients_are_exact)
{
  GgConfig c;
  small (&c, 2, 2, 0, GG_TP_SP);
  check_gradients (&c);
  small (&c, 2, 2, 0, GG_TP_ALLREDUCE);
  check_gradients (&c);
}
END_TEST

START_TEST (sp_norm_allreduce_gives_the_tied_norm_gradient)
{
  GgConfig c;
  small (&c, 2, 2, 0, GG_TP_SP);
  c.sp_norm_allreduce = true;
  check_gradients (&c);
}
END_TEST

START_TEST (replica_gradients_are_all_reduced)
{
  GgConfig c;
  small (&c, 2, 1, 4, GG_TP_SP);
  check_gradients (&c);
  small (&c, 1, 2, 4, GG_TP_SP);
  check_gradients (&c);
}
END_TEST

static Suite *
numeric_suite (void)
{
  Suite *s = suite_create ("graphgen-numeric");
  TCase *tc = tcase_create ("gradients");
  tcase_set_timeout (tc, 300);
  tcase_add_test (tc, single_rank_gradients_are_exact);
  tcase_add_test (tc, fsdp_gradients_are_exact);
  tcase_add_test (tc, tp_sequence_parallel_gradients_are_exact);
  tcase_add_test (tc, tp_allreduce_gradients_are_exact);
  tcase_add_test (tc, fsdp_x_tp_gradients_are_exact);
  tcase_add_test (tc, replica_gradients_are_all_reduced);
  tcase_add_test (tc, sp_norm_allreduce_gives_the_tied_norm_gradient);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (numeric_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}

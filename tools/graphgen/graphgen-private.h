/* graphgen-private.h: the node emitter shared by emit.c, forward.c and
 * backward.c.
 *
 * A node is referred to by its fx name, kept as (base, index): fx names a
 * node after its target ("mm", "mm_1", ...; "pow_1" first because `pow` is a
 * Python builtin), so a name is a counter, not a string, and per-layer
 * records stay a few hundred bytes.
 */
#pragma once

#include "graphgen.h"

typedef enum {
  B_ARG, /* placeholders: arg<N>_1 */
  B_POW,
  B_MEAN,
  B_ADD,
  B_RSQRT,
  B_MUL,
  B_DETACH,
  B_AG,
  B_RS,
  B_AR,
  B_WAIT,
  B_T,
  B_MM,
  B_VIEW,
  B_TRANSPOSE,
  B_SDPA,
  B_SDPA_BWD,
  B_GETITEM,
  B_SILU,
  B_SILU_BWD,
  B_TO_COPY,
  B_ONES_LIKE,
  B_EXPAND,
  B_DIV,
  B_SUM,
  B_N
} GgBase;

typedef struct {
  int32_t base;
  int32_t idx;
} GgRef;

/* Tensor metadata; nd < 0 is a null (non-tensor) tuple element. */
typedef struct {
  int32_t nd;
  int64_t sh[4], st[4];
  const char *dt;
} GgMeta;

typedef struct {
  FILE *out; /* NULL: count only */
  char *buf;
  size_t len, cap;
  bool failed;
  bool first_node;
  int32_t counter[B_N];
  GgStats stats;
  const GgConfig *cfg;
  /* model sizes, per rank */
  int64_t S;  /* full sequence (after sp all_gather) */
  int64_t Sl; /* sequence held between blocks: S / tp under sp, else S */
  int64_t H, Hl, Fl, nhl, hd, dp, tp, rep;
  bool sp;  /* tp > 1 with sequence parallelism */
  bool ar;  /* tp > 1 with all_reduce */
  bool f32; /* model dtype is float32: no casts around the loss */
  const char *dt;
  const char *g_tp, *g_dp, *g_rep;
} GgGen;

/* --- emit.c --- */
void gg_w (GgGen *g, const char *s);
void gg_w_i64 (GgGen *g, int64_t v);
void gg_w_ref (GgGen *g, GgRef r);

/* Emits a call_function node. @m: NULL for no meta, else @n_tuple == 0: one
 * tensor meta, @n_tuple > 0: a tuple of that many elements. @kwargs is the
 * raw JSON object text ("{}" when NULL). @fmt lists the args, one letter
 * each: r GgRef, i int64_t, l raw JSON literal (const char *), q string to
 * quote (const char *), L int list (int n, const int64_t *v). */
GgRef gg_node (GgGen *g, GgBase base, const char *target, const GgMeta *m, int n_tuple,
               const char *kwargs, const char *fmt, ...);
GgRef gg_placeholder (GgGen *g, int32_t index, const GgMeta *m);

/* Contiguous metadata of @nd dims (shape in @sh) in dtype @dt. */
GgMeta gg_meta_contig (int32_t nd, const int64_t *sh, const char *dt);
GgMeta gg_meta2 (int64_t a, int64_t b, const char *dt);
/* The transpose (aten.t) of a [b, a] tensor of strides [sb, 1]: [a, b], [1, sb]. */
GgMeta gg_meta2t (int64_t a, int64_t b, int64_t sb, const char *dt);
/* @m transposed (2-D): shape and strides swapped. */
GgMeta gg_meta_swap (const GgMeta *m);

/* Collective + wait; returns the wait. @out is the collective's value. */
GgRef gg_all_gather (GgGen *g, GgRef x, GgDim dim, const GgMeta *out);
GgRef gg_reduce_scatter (GgGen *g, GgRef x, GgDim dim, const GgMeta *out);
GgRef gg_all_reduce (GgGen *g, GgRef x, GgDim dim, const GgMeta *out);

/* sp: all_gather of the [Sl, H] sequence shard to [S, H]; else @x. */
GgRef gg_sp_gather (GgGen *g, GgRef x);
/* The tp reduction of [S, H] partial sums: reduce_scatter to [Sl, H] (sp),
 * all_reduce (tp all_reduce mode), else @x. Forward after row-parallel mm's,
 * backward on the input gradient of column-parallel mm's. */
GgRef gg_tp_reduce (GgGen *g, GgRef x);
/* [S, Hl] -> view [1, S, nhl, hd] -> transpose(1, 2). */
GgRef gg_heads (GgGen *g, GgRef x);

/* --- forward.c / backward.c --- */

/* What the backward reads of one layer's forward. */
typedef struct {
  GgRef h, wn1g, rs1, det1, n0a;           /* attention rmsnorm; det1: layers > 0 */
  GgRef a, tq, tk, tv, q4, k4, v4;         /* attention input, t(w), sdpa inputs */
  GgRef lse, seed, offset, det_o, o, two;  /* sdpa saved values, [S, Hl] output, t(wo) */
  GgRef h1, wn2g, rs2, det2, n0b;          /* mlp rmsnorm */
  GgRef m, t1, m1, si, t3, m3, gm, t2;     /* mlp */
} GgLayerSaved;

/* Gradients of one layer's nine parameters, in parameter order. */
typedef struct {
  GgRef g[9];
} GgLayerGrads;

GgRef gg_forward_layer (GgGen *g, int64_t layer, GgRef h, GgLayerSaved *sv);
/* The loss and the seed gradient of the last hidden state. */
GgRef gg_loss (GgGen *g, GgRef h, GgRef *grad);
GgRef gg_backward_layer (GgGen *g, int64_t layer, const GgLayerSaved *sv, GgRef grad,
                         GgLayerGrads *out);

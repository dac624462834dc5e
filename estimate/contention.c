/* contention.c: contention per pair (a collective beside a kernel class).
 *
 * A profile's `contention` section (docs/profile-format.md, version 2) holds
 * in-place measurements: a collective beside a chain of one kernel, issued
 * with the chain or while its first kernel runs, with the time of every rep
 * of the chain. sg_contention_derive() reads the pair's rates from one such
 * run (docs/cost-model.md "Deriving a pair"); the table merges the two
 * orders, interpolates in the collective's bytes, picks the measured kernel
 * nearest in time within a node's class, and falls back (docs/cost-model.md
 * "Missing pairs") to a sibling collective kind, then to the cluster's
 * global factors, which are the whole model without a profile.
 * Mirrors: the paired solo/overlapped runs of tests/estimate/measure/
 * (interference), read as rates the way schedule/'s simulator integrates
 * them.
 * Requires: a cluster, optionally a profile. Invalidates: nothing.
 */
#include "estimate-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const class_names[SG_KERNEL_N_CLASSES] = {
  "gemm", "attention", "attention_backward", "map", "reduction", "gemm_sm",
};

SgKernelClass
sg_kernel_class (SgOpKind kind)
{
  switch (sg_op_class (kind)) {
  case SG_CLASS_MATMUL:
    return SG_KERNEL_GEMM;
  case SG_CLASS_ATTENTION:
    return kind == SG_OP_SDPA_FLASH_BWD || kind == SG_OP_SDPA_EFFICIENT_BWD
               || kind == SG_OP_SDPA_CUDNN_BWD
             ? SG_KERNEL_ATTENTION_BACKWARD
             : SG_KERNEL_ATTENTION;
  case SG_CLASS_REDUCTION:
    return SG_KERNEL_REDUCTION;
  default:
    return SG_KERNEL_MAP;
  }
}

SgKernelClass
sg_node_kernel_class (const SgNode *n)
{
  const SgKernelClass k = sg_kernel_class (n->kind);
  return k == SG_KERNEL_GEMM && !sg_node_holds_sms (n) ? SG_KERNEL_GEMM_SM : k;
}

const char *
sg_kernel_class_name (SgKernelClass k)
{
  g_return_val_if_fail (k >= 0 && k < SG_KERNEL_N_CLASSES, "?");
  return class_names[k];
}

bool
sg_kernel_class_from_name (const char *name, SgKernelClass *out)
{
  for (int i = 0; i < SG_KERNEL_N_CLASSES; i++)
    if (g_strcmp0 (name, class_names[i]) == 0) {
      *out = (SgKernelClass)i;
      return true;
    }
  return false;
}

void
sg_contention_sample_clear (SgContentionSample *s)
{
  g_free (s->kernel_key);
  g_free (s->reps_us);
  memset (s, 0, sizeof *s);
}

static bool
reduces (SgOpKind kind)
{
  kind = sg_op_member_kind (kind);
  return kind == SG_OP_REDUCE_SCATTER || kind == SG_OP_ALL_REDUCE;
}

void
sg_contention_global_rates (const SgContention *c, double start_wait, SgOpKind coll,
                            SgKernelClass k, SgPairRates *out)
{
  const double ms = c && c->comm_slowdown >= 1.0 ? c->comm_slowdown : 1.0;
  out->comm_x = reduces (coll) ? (c && c->reduce_slowdown >= 1.0 ? c->reduce_slowdown : ms) : ms;
  out->kernel_x = c && c->compute_slowdown >= 1.0 ? c->compute_slowdown : 1.0;
  const double sw = isfinite (start_wait) ? CLAMP (start_wait, 0.0, 1.0) : 0.0;
  const bool holds = k == SG_KERNEL_GEMM || k == SG_KERNEL_ATTENTION
                     || k == SG_KERNEL_ATTENTION_BACKWARD;
  out->wait_before = out->wait_during = holds ? sw : 0.0;
}

/* --- deriving a pair from one run ------------------------------------------ */

static int double_cmp (const void *x, const void *y);

/* A rep counts as slowed when it took this much longer than alone. */
#define SLOW_REL 0.03
#define SLOW_ABS_US 1.0
#define MAX_X 100.0
#define MAX_REPS 1024

/* The kernel's own time in this run: the median of the reps that ran wholly
 * after the collective ended (nothing beside them), else its solo time. A
 * solo time taken in another run may differ by a few percent (clocks), which
 * read against a long chain would count as the collective's slowdown. */
static double
baseline_rep (const SgContentionRun *run, const double *a, double end)
{
  double u[MAX_REPS];
  int32_t k = 0;
  for (int32_t i = 0; i < run->n_reps; i++)
    if (a[i] >= end && run->reps_us[i] > 0.0)
      u[k++] = run->reps_us[i];
  if (k == 0)
    return run->rep_solo_us;
  qsort (u, (size_t)k, sizeof *u, double_cmp);
  return k % 2 ? u[k / 2] : 0.5 * (u[k / 2 - 1] + u[k / 2]);
}

bool
sg_contention_derive (const SgContentionRun *run, SgPairRates *out)
{
  out->comm_x = out->kernel_x = out->wait_before = out->wait_during = NAN;
  const double tc = run->comm_solo_us;
  const int32_t n = run->n_reps;
  if (!(tc > 0.0 && run->rep_solo_us > 0.0 && run->comm_us > 0.0 && n >= 1 && n <= MAX_REPS)
      || !isfinite (run->lag_us))
    return false;
  const double lag = MAX (run->lag_us, 0.0), end = lag + run->comm_us;
  double a[MAX_REPS], b[MAX_REPS], at = 0.0;
  for (int32_t i = 0; i < n; i++) {
    a[i] = at;
    at += MAX (run->reps_us[i], 0.0);
    b[i] = at;
  }
  const double chain_end = at, t = baseline_rep (run, a, end);
  /* the first rep the collective slowed: after it became startable, before it ended */
  int32_t j = -1;
  for (int32_t i = 0; i < n && j < 0; i++)
    if (b[i] > lag && a[i] < end && run->reps_us[i] > t * (1.0 + SLOW_REL) + SLOW_ABS_US)
      j = i;
  double start;
  bool resolved = true;
  if (j < 0) {
    /* Nothing slowed: the collective did not disturb the kernel, so it ran
     * undisturbed, at its solo speed, until it ended (beside the chain,
     * after it, or after waiting for the kernel that ran when it became
     * startable: kernels dispatch a waiting collective at their end). */
    start = MAX (end - tc, lag);
  } else {
    /* The rate of a rep the collective covered whole gives the kernel's
     * slowdown, which places the start inside rep j. */
    const double lo = MAX (a[j], lag);
    double kx = 0.0;
    if (j + 1 < n && b[j + 1] <= end)
      kx = run->reps_us[j + 1] / t;
    if (kx > 1.0 + SLOW_REL) {
      start = CLAMP (b[j] - (run->reps_us[j] - t) / (1.0 - 1.0 / kx), lo, b[j]);
    } else {
      resolved = false;
      start = lo;
      if (isfinite (run->comm_x_hint) && run->comm_x_hint >= 1.0 && end <= chain_end)
        start = CLAMP (end - run->comm_x_hint * tc, lo, b[j]);
    }
  }
  const double overlap = MAX (0.0, MIN (end, chain_end) - start);
  const double alone = MAX (0.0, end - MAX (start, chain_end)); /* after the chain, solo speed */
  const double work = tc - alone;                               /* done beside the chain */
  if (overlap > 0.0 && work > 0.05 * tc)
    out->comm_x = CLAMP (overlap / work, 1.0, MAX_X);
  if (overlap > 0.0 && j < 0) {
    out->kernel_x = 1.0;
  } else if (overlap > 0.0) {
    /* the extra time of the reps the collective ran beside */
    double extra = 0.0;
    for (int32_t i = 0; i < n; i++)
      if (a[i] < end && b[i] > start)
        extra += run->reps_us[i] - t;
    out->kernel_x = extra <= 0.0                   ? 1.0
                    : overlap - extra > overlap / MAX_X ? CLAMP (overlap / (overlap - extra), 1.0, MAX_X)
                                                    : MAX_X;
  }
  /* The wait, as a fraction of the work the kernel that held the collective
   * had left when it became startable (reps run alone until the start). */
  double w = NAN;
  if (lag < chain_end) {
    int32_t i0 = 0;
    while (i0 + 1 < n && b[i0] <= lag)
      i0++;
    /* a rep is runs_per_rep runs of the kernel: the one running at lag */
    const double k = t / (double)MAX (run->runs_per_rep, 1);
    const double into = lag - a[i0];
    const double left = MAX (k - (into - floor (into / k) * k), 1e-9);
    w = CLAMP ((start - lag) / left, 0.0, 1.0);
  }
  if (!run->kernel_first)
    out->wait_before = w;
  else
    out->wait_during = w;
  return resolved;
}

/* --- the table ------------------------------------------------------------- */

typedef struct {
  SgKernelClass klass;
  double us;       /* one run of the measured kernel alone; 0: a class's default slot */
  const char *key; /* the profile's kernel key (borrowed from the profile); NULL: default */
} Slot;

typedef struct {
  double logb;   /* log(bytes) */
  SgPairRates r; /* both orders merged, NaN fields filled from the global factors */
} Point;

typedef struct {
  SgTransport transport;
  SgOpKind kind;
  int32_t group_size, nodes;
  GArray **points; /* per slot: Point sorted by bytes, or NULL */
} Fam;

struct SgContentionTable {
  Slot *slots;
  int32_t n_slots;
  int32_t first[SG_KERNEL_N_CLASSES], count[SG_KERNEL_N_CLASSES]; /* slots by class */
  GPtrArray *fams; /* Fam *, first appearance in the profile */
  int32_t n_pairs;
  bool measured_wait; /* a measured pair has a wait > 0 */
  SgContention global;
  double start_wait;
  double scale_comm, scale_kernel, scale_wait;
};

static void
fam_free (gpointer p)
{
  Fam *f = p;
  g_free (f->points); /* the arrays are freed by table_free (n_slots known there) */
  g_free (f);
}

void
sg_contention_table_free (SgContentionTable *t)
{
  if (!t)
    return;
  for (guint i = 0; i < t->fams->len; i++) {
    Fam *f = t->fams->pdata[i];
    for (int32_t s = 0; s < t->n_slots; s++)
      if (f->points[s])
        g_array_unref (f->points[s]);
  }
  g_ptr_array_unref (t->fams);
  g_free (t->slots);
  g_free (t);
}

static int
slot_cmp (const void *x, const void *y)
{
  const Slot *a = x, *b = y;
  if (a->klass != b->klass)
    return a->klass < b->klass ? -1 : 1;
  if (a->us != b->us)
    return a->us < b->us ? -1 : 1;
  return g_strcmp0 (a->key, b->key);
}

static int
double_cmp (const void *x, const void *y)
{
  const double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* Slots: the distinct measured kernels (class, key), each at the median of
 * its runs' solo time, then a default slot for every class not measured. */
static void
build_slots (SgContentionTable *t, const SgContentionSample *s, size_t n)
{
  GArray *slots = g_array_new (FALSE, FALSE, sizeof (Slot));
  GArray *us = g_array_new (FALSE, FALSE, sizeof (double));
  for (size_t i = 0; i < n; i++) {
    bool seen = false;
    for (size_t k = 0; k < i && !seen; k++)
      seen = s[k].klass == s[i].klass && strcmp (s[k].kernel_key, s[i].kernel_key) == 0;
    if (seen)
      continue;
    g_array_set_size (us, 0);
    for (size_t k = i; k < n; k++)
      if (s[k].klass == s[i].klass && strcmp (s[k].kernel_key, s[i].kernel_key) == 0) {
        double u = s[k].rep_solo_us / MAX (s[k].runs_per_rep, 1);
        g_array_append_val (us, u);
      }
    g_array_sort (us, double_cmp);
    const double *u = (const double *)(void *)us->data;
    Slot sl = { s[i].klass, us->len % 2 ? u[us->len / 2] : 0.5 * (u[us->len / 2 - 1] + u[us->len / 2]),
                s[i].kernel_key };
    g_array_append_val (slots, sl);
  }
  for (int k = 0; k < SG_KERNEL_N_CLASSES; k++) {
    bool has = false;
    for (guint i = 0; i < slots->len && !has; i++)
      has = g_array_index (slots, Slot, i).klass == (SgKernelClass)k;
    if (!has) {
      Slot sl = { (SgKernelClass)k, 0.0, NULL };
      g_array_append_val (slots, sl);
    }
  }
  g_array_sort (slots, slot_cmp);
  t->n_slots = (int32_t)slots->len;
  t->slots = (Slot *)(void *)g_array_free (slots, FALSE);
  g_array_unref (us);
  for (int32_t i = t->n_slots - 1; i >= 0; i--) {
    t->first[t->slots[i].klass] = i;
    t->count[t->slots[i].klass]++;
  }
}

static int32_t
slot_of_key (const SgContentionTable *t, SgKernelClass k, const char *key)
{
  for (int32_t i = t->first[k]; i < t->first[k] + t->count[k]; i++)
    if (g_strcmp0 (t->slots[i].key, key) == 0)
      return i;
  g_assert_not_reached ();
}

static Fam *
fam_get (SgContentionTable *t, SgTransport tr, SgOpKind kind, int32_t gs, int32_t nodes,
         bool create)
{
  for (guint i = 0; i < t->fams->len; i++) {
    Fam *f = t->fams->pdata[i];
    if (f->transport == tr && f->kind == kind && f->group_size == gs && f->nodes == nodes)
      return f;
  }
  if (!create)
    return NULL;
  Fam *f = g_new0 (Fam, 1);
  *f = (Fam){ tr, kind, gs, nodes, g_new0 (GArray *, (size_t)t->n_slots) };
  g_ptr_array_add (t->fams, f);
  return f;
}

/* Geometric mean of the finite values among @a and @b; NaN when none. */
static double
merge2 (double a, double b)
{
  if (isfinite (a) && isfinite (b))
    return sqrt (a * b);
  return isfinite (a) ? a : b;
}

static double
or_else (double v, double fallback)
{
  return isfinite (v) ? v : fallback;
}

static int
point_cmp (const void *x, const void *y)
{
  const Point *a = x, *b = y;
  return (a->logb > b->logb) - (a->logb < b->logb);
}

/* Adds the pair of samples @s[i] (and its other order, if any, among the
 * later samples) to its family's slot. */
static void
add_pair (SgContentionTable *t, const SgContentionSample *s, size_t n, size_t i, uint8_t *done)
{
  SgPairRates r[2]; /* [kernel_first] */
  SgContentionRun run[2];
  bool have[2] = { false, false }, ok[2] = { false, false };
  for (size_t k = i; k < n; k++) {
    const SgContentionSample *x = &s[k];
    if (done[k] || x->transport != s[i].transport || x->kind != s[i].kind
        || x->group_size != s[i].group_size || x->nodes != s[i].nodes || x->bytes != s[i].bytes
        || x->klass != s[i].klass || strcmp (x->kernel_key, s[i].kernel_key) != 0)
      continue;
    done[k] = 1;
    run[x->kernel_first] = (SgContentionRun){ x->comm_solo_us, x->rep_solo_us, x->lag_us,
                                              x->comm_us, x->reps_us, x->n_reps,
                                              x->runs_per_rep, x->kernel_first, NAN };
    ok[x->kernel_first] = sg_contention_derive (&run[x->kernel_first], &r[x->kernel_first]);
    have[x->kernel_first] = true;
  }
  /* a run that could not place the start takes the other order's comm_x */
  for (int o = 0; o < 2; o++)
    if (have[o] && !ok[o] && have[!o] && ok[!o] && isfinite (r[!o].comm_x)) {
      run[o].comm_x_hint = r[!o].comm_x;
      sg_contention_derive (&run[o], &r[o]);
    }
  SgPairRates g;
  sg_contention_global_rates (&t->global, t->start_wait, s[i].kind, s[i].klass, &g);
  const SgPairRates *cf = have[0] ? &r[0] : NULL, *kf = have[1] ? &r[1] : NULL;
  Point p = { log ((double)s[i].bytes), g };
  p.r.comm_x = or_else (merge2 (cf ? cf->comm_x : NAN, kf ? kf->comm_x : NAN), g.comm_x);
  p.r.kernel_x = or_else (merge2 (cf ? cf->kernel_x : NAN, kf ? kf->kernel_x : NAN), g.kernel_x);
  p.r.wait_before = or_else (cf ? cf->wait_before : NAN, g.wait_before);
  p.r.wait_during = or_else (kf ? kf->wait_during : NAN, g.wait_during);
  Fam *f = fam_get (t, s[i].transport, s[i].kind, s[i].group_size, s[i].nodes, true);
  const int32_t slot = slot_of_key (t, s[i].klass, s[i].kernel_key);
  if (!f->points[slot])
    f->points[slot] = g_array_new (FALSE, FALSE, sizeof (Point));
  g_array_append_val (f->points[slot], p);
  t->n_pairs++;
}

SgContentionTable *
sg_contention_table_new (const SgProfile *p, const SgCluster *c)
{
  SgContentionTable *t = g_new0 (SgContentionTable, 1);
  t->global = c->contention;
  t->start_wait = c->comm_start_wait;
  t->scale_comm = c->contention_comm_scale;
  t->scale_kernel = c->contention_compute_scale;
  t->scale_wait = c->contention_wait_scale;
  t->fams = g_ptr_array_new_with_free_func (fam_free);
  size_t n = 0;
  const SgContentionSample *s = p ? sg_profile_contention (p, &n) : NULL;
  build_slots (t, s, n);
  g_autofree uint8_t *done = g_new0 (uint8_t, MAX (n, 1));
  for (size_t i = 0; i < n; i++)
    if (!done[i])
      add_pair (t, s, n, i, done);
  for (guint i = 0; i < t->fams->len; i++) {
    Fam *f = t->fams->pdata[i];
    for (int32_t k = 0; k < t->n_slots; k++) {
      if (!f->points[k])
        continue;
      g_array_sort (f->points[k], point_cmp);
      for (guint j = 0; j < f->points[k]->len; j++) {
        const Point *q = &g_array_index (f->points[k], Point, j);
        t->measured_wait |= q->r.wait_before > 0.0 || q->r.wait_during > 0.0;
      }
    }
  }
  return t;
}

/* --- lookup ----------------------------------------------------------------- */

int32_t
sg_cost_contention_slots (const SgCostModel *cm)
{
  return cm && cm->contention ? cm->contention->n_slots : SG_KERNEL_N_CLASSES;
}

SgKernelClass
sg_cost_contention_slot_class (const SgCostModel *cm, int32_t slot)
{
  if (!cm || !cm->contention)
    return (SgKernelClass)CLAMP (slot, 0, SG_KERNEL_N_CLASSES - 1);
  g_return_val_if_fail (slot >= 0 && slot < cm->contention->n_slots, SG_KERNEL_MAP);
  return cm->contention->slots[slot].klass;
}

int32_t
sg_cost_contention_slot (const SgCostModel *cm, const SgGraph *g, SgNodeId id, double work_us)
{
  const SgKernelClass k = sg_node_kernel_class (&g->nodes[id]);
  if (!cm || !cm->contention)
    return (int32_t)k;
  const SgContentionTable *t = cm->contention;
  int32_t best = t->first[k];
  if (t->count[k] > 1 && work_us > 0.0) {
    double bd = INFINITY;
    for (int32_t i = t->first[k]; i < t->first[k] + t->count[k]; i++) {
      const double d = fabs (log (work_us / t->slots[i].us));
      if (d < bd) {
        bd = d;
        best = i;
      }
    }
  }
  return best;
}

SgTransport
sg_cost_collective_transport (const SgCostModel *cm, const SgGraph *g, SgNodeId id)
{
  (void)cm;
  if (g->nodes[id].kind != SG_OP_COLLECTIVE_PERMUTE)
    return SG_TRANSPORT_NCCL;
  SgPermute p;
  const SgTransport t = sg_node_permute (g, id, &p, NULL) ? p.transport : SG_TRANSPORT_NCCL;
  sg_permute_clear (&p);
  return t;
}

static SgOpKind
sibling (SgOpKind kind)
{
  switch (sg_op_member_kind (kind)) {
  case SG_OP_REDUCE_SCATTER:
    return SG_OP_ALL_REDUCE;
  case SG_OP_ALL_REDUCE:
    return SG_OP_REDUCE_SCATTER;
  case SG_OP_ALL_GATHER:
    return SG_OP_BROADCAST;
  default:
    return SG_OP_ALL_GATHER;
  }
}

/* Linear in log(bytes) between the two measured sizes around @logb; the
 * nearest end outside them. */
static SgPairRates
interp (const GArray *pts, double logb)
{
  const Point *p = (const Point *)(const void *)pts->data;
  const guint n = pts->len;
  if (n == 1 || logb <= p[0].logb)
    return p[0].r;
  if (logb >= p[n - 1].logb)
    return p[n - 1].r;
  guint i = 1;
  while (p[i].logb < logb)
    i++;
  const double u = (logb - p[i - 1].logb) / (p[i].logb - p[i - 1].logb);
  const SgPairRates *a = &p[i - 1].r, *b = &p[i].r;
  return (SgPairRates){ a->comm_x + u * (b->comm_x - a->comm_x),
                        a->kernel_x + u * (b->kernel_x - a->kernel_x),
                        a->wait_before + u * (b->wait_before - a->wait_before),
                        a->wait_during + u * (b->wait_during - a->wait_during) };
}

/* The measured points for @slot in @f: its own, else those of the measured
 * kernel of the same class nearest in solo time; NULL when the class has none. */
static const GArray *
fam_points (const SgContentionTable *t, const Fam *f, int32_t slot)
{
  if (f->points[slot])
    return f->points[slot];
  const SgKernelClass k = t->slots[slot].klass;
  const GArray *best = NULL;
  double bd = INFINITY;
  for (int32_t i = t->first[k]; i < t->first[k] + t->count[k]; i++) {
    if (!f->points[i])
      continue;
    const double d = t->slots[slot].us > 0.0 ? fabs (log (t->slots[i].us / t->slots[slot].us)) : 0.0;
    if (d < bd) {
      bd = d;
      best = f->points[i];
    }
  }
  return best;
}

static double
scaled (double x, double s)
{
  return 1.0 + s * (x - 1.0);
}

void
sg_cost_contention_rates (const SgCostModel *cm, SgTransport tr, SgOpKind kind, uint64_t bytes,
                          int32_t group_size, int32_t n_nodes, SgPairRates *out)
{
  g_return_if_fail (cm && cm->contention && out);
  SgContentionTable *t = cm->contention;
  kind = sg_op_member_kind (kind); /* a coalesced call contends as its members do */
  const Fam *fams[2] = { fam_get (t, tr, kind, group_size, n_nodes, false),
                         fam_get (t, tr, sibling (kind), group_size, n_nodes, false) };
  const double logb = log ((double)MAX (bytes, 1));
  for (int32_t s = 0; s < t->n_slots; s++) {
    const GArray *pts = NULL;
    for (int i = 0; i < 2 && !pts; i++)
      pts = fams[i] ? fam_points (t, fams[i], s) : NULL;
    if (!pts) {
      sg_contention_global_rates (&t->global, t->start_wait, kind, t->slots[s].klass, &out[s]);
      /* the copy engine needs no SM: a kernel holding every SM does not
       * hold a copy-engine step (its HBM traffic still slows both) */
      if (tr == SG_TRANSPORT_CE)
        out[s].wait_before = out[s].wait_during = 0.0;
      continue;
    }
    const SgPairRates r = interp (pts, logb);
    out[s] = (SgPairRates){ MAX (1.0, scaled (r.comm_x, t->scale_comm)),
                            MAX (1.0, scaled (r.kernel_x, t->scale_kernel)),
                            CLAMP (r.wait_before * t->scale_wait, 0.0, 1.0),
                            CLAMP (r.wait_during * t->scale_wait, 0.0, 1.0) };
  }
}

bool
sg_cost_model_has_start_wait (const SgCostModel *cm)
{
  if (!cm || !cm->contention)
    return false;
  const SgContentionTable *t = cm->contention;
  return (isfinite (t->start_wait) && t->start_wait > 0.0)
         || (t->measured_wait && t->scale_wait > 0.0);
}

int32_t
sg_cost_contention_pairs (const SgCostModel *cm)
{
  return cm && cm->contention ? cm->contention->n_pairs : 0;
}

/* --- the table as text (--costs) ------------------------------------------- */

static void
print_rates (FILE *out, const SgPairRates *r)
{
  fprintf (out, " %8.3f %8.3f %7.3f %7.3f\n", r->comm_x, r->kernel_x, r->wait_before,
           r->wait_during);
}

void
sg_contention_print_pairs (const SgCostModel *cm, FILE *out)
{
  if (!cm || !cm->contention || cm->contention->n_pairs == 0)
    return;
  const SgContentionTable *t = cm->contention;
  fprintf (out, "# contention slots\n# %4s %-18s %10s  %s\n", "slot", "class", "solo_us", "kernel");
  for (int32_t s = 0; s < t->n_slots; s++)
    fprintf (out, "  %4d %-18s %10.1f  %s\n", s, class_names[t->slots[s].klass], t->slots[s].us,
             t->slots[s].key ? t->slots[s].key : "- (global factors)");
  fprintf (out, "# contention pairs (derived, before the cluster's scales)\n"
                "# %-9s %-14s %3s %5s %12s %4s %8s %8s %7s %7s\n",
           "transport", "collective", "gs", "nodes", "bytes", "slot", "comm_x", "kernel_x",
           "w_befor", "w_durng");
  for (guint i = 0; i < t->fams->len; i++) {
    const Fam *f = t->fams->pdata[i];
    for (int32_t s = 0; s < t->n_slots; s++) {
      if (!f->points[s])
        continue;
      for (guint j = 0; j < f->points[s]->len; j++) {
        const Point *p = &g_array_index (f->points[s], Point, j);
        fprintf (out, "  %-9s %-14s %3d %5d %12.0f %4d", sg_transport_name (f->transport),
                 sg_op_name (f->kind), f->group_size, f->nodes, exp (p->logb), s);
        print_rates (out, &p->r);
      }
    }
  }
}

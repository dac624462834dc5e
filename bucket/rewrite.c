/* rewrite.c: turns buckets of collectives into pack -> collective -> wait
 * -> unpacks in the IR (docs/ops.md, docs/bucketing.md).
 *
 * Mirrors the graph surgery of PyTorch's merge_all_gather /
 * merge_reduce_scatter (torch/_inductor/fx_passes/bucketing.py), on our
 * dense IR: new nodes are appended through sg_graph_append() (the loader's
 * checks, including the collective's element counts against its group),
 * users are rewired, and the graph renumbered without the members
 * (sg_graph_select) by a stable topological sort whose keys keep every other node
 * where it was: P and C at the earliest member's position (later only if an
 * input comes later), W and the unpacks just before the first consumer of
 * any member's wait. The checks and the layout (sg_bucket_specs_check,
 * sg_bucket_plan_make) are shared with trial.c, which builds the same graph
 * from arrays for the pass's trials; any change to the placement rules
 * here must be made there too (tests/bucket/test_trial.c compares them).
 * Requires: a topological id order; users (rebuilt here).
 * Invalidates: node ids, users; hiding edges of members (stale once they
 * merge) are dropped, their other implicit edges move to the bucket's
 * collective and wait.
 */
#include "bucket-private.h"

#include <string.h>

#define FAIL(code, ...)                                                        \
  do {                                                                         \
    g_set_error (error, SG_BUCKET_ERROR, code, __VA_ARGS__);                   \
    return false;                                                              \
  } while (0)

/* A name not yet in @g: @base, else base_1, base_2 ... */
static char *
fresh_name (const SgGraph *g, const char *prefix, const char *base)
{
  char *name = g_strconcat (prefix, base, NULL);
  for (int i = 1; sg_graph_lookup (g, name) != SG_NO_NODE; i++) {
    g_free (name);
    name = g_strdup_printf ("%s%s_%d", prefix, base, i);
  }
  return name;
}

static cJSON *
ref (const char *name)
{
  cJSON *o = cJSON_CreateObject ();
  cJSON_AddStringToObject (o, "node", name);
  return o;
}

/* meta {"shape": [...], "stride": contiguous, "dtype"} */
static cJSON *
contiguous_meta (const int64_t *shape, int32_t ndim, SgDtype dtype)
{
  cJSON *m = cJSON_CreateObject ();
  cJSON *sh = cJSON_AddArrayToObject (m, "shape");
  cJSON *st = cJSON_AddArrayToObject (m, "stride");
  int64_t strides[SG_MAX_DIMS];
  int64_t s = 1;
  for (int32_t d = ndim - 1; d >= 0; d--) {
    strides[d] = s;
    s *= shape[d] ? shape[d] : 1;
  }
  for (int32_t d = 0; d < ndim; d++) {
    cJSON_AddItemToArray (sh, cJSON_CreateNumber ((double)shape[d]));
    cJSON_AddItemToArray (st, cJSON_CreateNumber ((double)strides[d]));
  }
  cJSON_AddStringToObject (m, "dtype", sg_dtype_name (dtype));
  return m;
}

static cJSON *
flat_meta (uint64_t numel, SgDtype dtype)
{
  int64_t shape = (int64_t)numel;
  return contiguous_meta (&shape, 1, dtype);
}

static cJSON *
call_node (const char *name, const char *target, cJSON *args, cJSON *kwargs, cJSON *meta)
{
  cJSON *o = cJSON_CreateObject ();
  cJSON_AddStringToObject (o, "name", name);
  cJSON_AddStringToObject (o, "op", "call_function");
  cJSON_AddStringToObject (o, "target", target);
  cJSON_AddItemToObject (o, "args", args);
  cJSON_AddItemToObject (o, "kwargs", kwargs ? kwargs : cJSON_CreateObject ());
  cJSON_AddItemToObject (o, "meta", meta);
  return o;
}

static SgNodeId
append (SgGraph *g, cJSON *node, GError **error)
{
  /* est_src stays SG_COST_NONE: the pass costs new nodes after the rewrite. */
  SgNodeId id = sg_graph_append (g, node, error);
  cJSON_Delete (node);
  return id;
}

bool
sg_bucket_member_check (const SgGraph *g, SgNodeId c, SgNodeId *wait, GError **error)
{
  const SgNode *n = &g->nodes[c];
  if (n->kind != SG_OP_ALL_GATHER && n->kind != SG_OP_REDUCE_SCATTER
      && n->kind != SG_OP_ALL_REDUCE)
    FAIL (SG_BUCKET_ERROR_LAYOUT, "bucket: node '%s': %s cannot be bucketed", n->name,
          sg_op_name (n->kind));
  uint32_t nu, nin;
  const SgNodeId *u = sg_node_users (g, c, &nu);
  if (nu != 1 || g->nodes[u[0]].kind != SG_OP_WAIT)
    FAIL (SG_BUCKET_ERROR_LAYOUT, "bucket: node '%s': users: needs exactly one user, its "
          "wait_tensor (has %u)", n->name, nu);
  sg_node_inputs (g, c, &nin);
  if (nin != 1 || n->meta.ndim < 0 || g->nodes[sg_node_inputs (g, c, &nin)[0]].meta.ndim < 0)
    FAIL (SG_BUCKET_ERROR_LAYOUT, "bucket: node '%s': args[0]: needs one tensor input with "
          "known meta", n->name);
  *wait = u[0];
  return true;
}

bool
sg_bucket_plan_make (const SgGraph *g, const SgBucketSpec *spec, const SgNodeId *waits,
                     SgBucketPlan *p, GError **error)
{
  int32_t n = spec->n_members;
  const SgNode *m0 = &g->nodes[spec->members[0]];
  memset (p, 0, sizeof *p);
  p->n = n;
  p->kind = m0->kind;
  p->group = m0->group, p->k = m0->group_size;
  p->reduce = m0->reduce;
  p->dtype = m0->meta.dtype;
  p->in_numel = g_new (uint64_t, (size_t)n);
  p->offsets = g_new (uint64_t, (size_t)n);
  p->out_numel = g_new (uint64_t, (size_t)n);
  p->inputs = g_new (SgNodeId, (size_t)n);
  for (int32_t i = 0; i < n; i++) {
    const SgNode *m = &g->nodes[spec->members[i]];
    uint32_t nin;
    p->inputs[i] = sg_node_inputs (g, spec->members[i], &nin)[0];
    const SgMeta *im = &g->nodes[p->inputs[i]].meta;
    if (m->kind != p->kind || m->group != p->group || m->reduce != p->reduce
        || m->meta.dtype != p->dtype || im->dtype != p->dtype) {
      sg_bucket_plan_clear (p);
      FAIL (SG_BUCKET_ERROR_LAYOUT,
            "bucket: node '%s': kind, group, dtype or reduce op differs from '%s'", m->name,
            m0->name);
    }
    p->in_numel[i] = sg_meta_numel (g, im);
  }
  if (!sg_bucket_layout (p->kind, p->k, p->in_numel, n, p->offsets, p->out_numel, &p->l,
                         error)) {
    sg_bucket_plan_clear (p);
    return false;
  }
  for (int32_t i = 0; i < n; i++) {
    const SgMeta *wm = &g->nodes[waits[i]].meta;
    if (wm->ndim < 0 || sg_meta_numel (g, wm) != p->out_numel[i] * (uint64_t)p->l.unpack_k) {
      sg_bucket_plan_clear (p);
      FAIL (SG_BUCKET_ERROR_LAYOUT, "bucket: node '%s': meta.shape: its wait's element count "
            "disagrees with its input", g->nodes[spec->members[i]].name);
    }
  }
  return true;
}

void
sg_bucket_plan_clear (SgBucketPlan *p)
{
  g_clear_pointer (&p->in_numel, g_free);
  g_clear_pointer (&p->offsets, g_free);
  g_clear_pointer (&p->out_numel, g_free);
  g_clear_pointer (&p->inputs, g_free);
}

/* Appends the bucket's nodes for @spec; fills @w_out and @u (one per member). */
static bool
build_bucket (SgGraph *g, const SgBucketSpec *spec, const SgNodeId *waits, SgNodeId *c_out,
              SgNodeId *w_out, SgNodeId *u, GError **error)
{
  int32_t n = spec->n_members;
  SgBucketPlan plan;
  if (!sg_bucket_plan_make (g, spec, waits, &plan, error))
    return false;
  g_autofree uint64_t *offsets = plan.offsets, *out_numel = plan.out_numel;
  g_autofree SgNodeId *inputs = plan.inputs;
  g_free (plan.in_numel);
  const SgNode *m0 = &g->nodes[spec->members[0]];
  int32_t k = plan.k;
  SgDtype dtype = plan.dtype;
  SgBucketLayout l = plan.l;
  /* Names are taken before any append: node pointers move on append. */
  const char *first = m0->name;
  g_autofree char *pname = fresh_name (g, "bucket_pack_", first);
  g_autofree char *cname = fresh_name (g, "bucket_", first);
  g_autofree char *wname = fresh_name (g, "bucket_wait_", first);
  const char *target = m0->target;

  /* P = bucket_pack([in...], k, interleave) */
  cJSON *list = cJSON_CreateArray ();
  for (int32_t i = 0; i < n; i++)
    cJSON_AddItemToArray (list, ref (g->nodes[inputs[i]].name));
  cJSON *pargs = cJSON_CreateArray ();
  cJSON_AddItemToArray (pargs, list);
  cJSON_AddItemToArray (pargs, cJSON_CreateNumber (k));
  cJSON_AddItemToArray (pargs, cJSON_CreateBool (l.interleave));
  SgNodeId p = append (g, call_node (pname, sg_op_info (SG_OP_BUCKET_PACK)->target, pargs, NULL,
                                     flat_meta (l.pack_numel, dtype)),
                       error);
  if (p == SG_NO_NODE)
    return false;

  /* C = the member's collective on P, same remaining args */
  cJSON *cargs = cJSON_Parse (g->nodes[spec->members[0]].args_json);
  cJSON *ckw = cJSON_Parse (g->nodes[spec->members[0]].kwargs_json);
  g_assert (cJSON_IsArray (cargs) && cJSON_IsObject (ckw));
  cJSON_ReplaceItemInArray (cargs, 0, ref (pname));
  /* Members that are buckets themselves contribute their own members: the
   * list always names original collectives. */
  cJSON *names = cJSON_CreateArray ();
  for (int32_t i = 0; i < n; i++) {
    const SgNode *m = &g->nodes[spec->members[i]];
    cJSON *mkw = cJSON_Parse (m->kwargs_json);
    const cJSON *inner = cJSON_GetObjectItemCaseSensitive (mkw, SG_BUCKET_KWARG);
    if (cJSON_IsArray (inner)) {
      const cJSON *e;
      cJSON_ArrayForEach (e, inner)
      {
        cJSON_AddItemToArray (names, cJSON_Duplicate (e, false));
      }
    } else {
      cJSON_AddItemToArray (names, cJSON_CreateString (m->name));
    }
    cJSON_Delete (mkw);
  }
  cJSON_DeleteItemFromObjectCaseSensitive (ckw, SG_BUCKET_KWARG);
  cJSON_AddItemToObject (ckw, SG_BUCKET_KWARG, names);
  SgNodeId c = append (g, call_node (cname, target, cargs, ckw, flat_meta (l.out_numel, dtype)),
                       error);
  if (c == SG_NO_NODE)
    return false;

  /* W = wait_tensor(C) */
  cJSON *wargs = cJSON_CreateArray ();
  cJSON_AddItemToArray (wargs, ref (cname));
  SgNodeId w = append (g, call_node (wname, sg_op_info (SG_OP_WAIT)->target, wargs, NULL,
                                     flat_meta (l.out_numel, dtype)),
                       error);
  if (w == SG_NO_NODE)
    return false;

  /* U_i = bucket_unpack(W, k, offset_i, numel_i), shaped like member i's wait */
  for (int32_t i = 0; i < n; i++) {
    const SgMeta *wm = &g->nodes[waits[i]].meta;
    g_autofree char *uname = fresh_name (g, "bucket_unpack_", g->nodes[spec->members[i]].name);
    cJSON *uargs = cJSON_CreateArray ();
    cJSON_AddItemToArray (uargs, ref (wname));
    cJSON_AddItemToArray (uargs, cJSON_CreateNumber (l.unpack_k));
    cJSON_AddItemToArray (uargs, cJSON_CreateNumber ((double)offsets[i]));
    cJSON_AddItemToArray (uargs, cJSON_CreateNumber ((double)out_numel[i]));
    cJSON *meta = contiguous_meta (sg_meta_shape (g, wm), wm->ndim, dtype);
    u[i] = append (g, call_node (uname, sg_op_info (SG_OP_BUCKET_UNPACK)->target, uargs, NULL,
                                 meta),
                   error);
    if (u[i] == SG_NO_NODE)
      return false;
  }
  *c_out = c;
  *w_out = w;
  return true;
}

bool
sg_bucket_stable_order (SgGraph *g, const int64_t *key, const bool *keep, SgNodeId *order,
                        int32_t *n_order, GError **error)
{
  int32_t n = g->n_nodes;
  sg_graph_fill_users (g);
  /* implicit edges as CSR by source */
  guint ne = g->implicit_edges ? g->implicit_edges->len : 0;
  g_autofree SgNodeId *ifrom = g_new (SgNodeId, ne + 1), *ito = g_new (SgNodeId, ne + 1);
  g_autofree uint32_t *ifirst = g_new0 (uint32_t, (size_t)n + 1);
  g_autofree SgNodeId *iadj = g_new (SgNodeId, ne + 1);
  g_autofree int32_t *indeg = g_new0 (int32_t, (size_t)n);
  guint m = 0;
  for (guint i = 0; i < ne; i++) {
    SgImplicitEdge e = g_array_index (g->implicit_edges, SgImplicitEdge, i);
    SgNodeId a = sg_graph_lookup (g, e.from), b = sg_graph_lookup (g, e.to);
    if (a == SG_NO_NODE || b == SG_NO_NODE || a == b)
      continue;
    ifrom[m] = a, ito[m] = b, m++;
    ifirst[a + 1]++;
  }
  for (int32_t i = 0; i < n; i++)
    ifirst[i + 1] += ifirst[i];
  g_autofree uint32_t *fill = g_memdup2 (ifirst, sizeof (uint32_t) * ((size_t)n + 1));
  for (guint i = 0; i < m; i++) {
    iadj[fill[ifrom[i]]++] = ito[i];
    indeg[ito[i]]++;
  }
  int32_t n_keep = 0;
  for (int32_t i = 0; i < n; i++) {
    indeg[i] += (int32_t)g->nodes[i].n_in;
    n_keep += !keep || keep[i];
  }
  g_autofree HeapItem *heap = g_new (HeapItem, (size_t)n + 1);
  int32_t hn = 0, w = 0;
  for (int32_t i = 0; i < n; i++)
    if (indeg[i] == 0 && (!keep || keep[i]))
      heap_push (heap, &hn, (HeapItem){ key[i], i });
  /* Dropped nodes are never emitted: no kept node reads one. */
  while (hn > 0) {
    SgNodeId v = heap_pop (heap, &hn).id;
    order[w++] = v;
    uint32_t nu;
    const SgNodeId *u = sg_node_users (g, v, &nu);
    for (uint32_t j = 0; j < nu; j++)
      if (--indeg[u[j]] == 0 && (!keep || keep[u[j]]))
        heap_push (heap, &hn, (HeapItem){ key[u[j]], u[j] });
    for (uint32_t j = ifirst[v]; j < ifirst[v + 1]; j++)
      if (--indeg[iadj[j]] == 0 && (!keep || keep[iadj[j]]))
        heap_push (heap, &hn, (HeapItem){ key[iadj[j]], iadj[j] });
  }
  if (w < n_keep) {
    for (int32_t i = 0; i < n; i++)
      if (indeg[i] > 0 && (!keep || keep[i]))
        FAIL (SG_BUCKET_ERROR_CYCLE, "bucket: node '%s': the buckets close a cycle through it",
              g->nodes[i].name);
  }
  *n_order = w;
  return true;
}

typedef struct {
  SgNodeId user, old_input, new_input;
} Rewire;

static int
cmp_rewire (const void *a, const void *b)
{
  const Rewire *x = a, *y = b;
  if (x->user != y->user)
    return x->user < y->user ? -1 : 1;
  return (x->old_input > y->old_input) - (x->old_input < y->old_input);
}

/* One rewrite per user, however many members it reads (the output node
 * reads every gradient). */
static void
rewire_users (SgGraph *g, GArray *rewires)
{
  g_array_sort (rewires, cmp_rewire);
  g_autofree SgNodeId *olds = g_new (SgNodeId, rewires->len + 1);
  g_autofree SgNodeId *news = g_new (SgNodeId, rewires->len + 1);
  for (guint i = 0; i < rewires->len;) {
    SgNodeId user = g_array_index (rewires, Rewire, i).user;
    uint32_t n = 0;
    for (; i < rewires->len && g_array_index (rewires, Rewire, i).user == user; i++, n++) {
      olds[n] = g_array_index (rewires, Rewire, i).old_input;
      news[n] = g_array_index (rewires, Rewire, i).new_input;
    }
    sg_graph_replace_inputs (g, user, olds, news, n);
  }
}

/* Renames implicit-edge ends that name a removed member to its bucket. The
 * hiding edges of members (hide_start, hide_wait) describe the overlap of
 * the unbucketed order and are dropped: the bucket is hidden by whatever
 * compute overlaps it now, which the simulator judges and the pass records
 * again afterwards. */
static void
move_implicit_edges (SgGraph *g, GHashTable *rename)
{
  if (!g->implicit_edges)
    return;
  guint w = 0;
  for (guint i = 0; i < g->implicit_edges->len; i++) {
    SgImplicitEdge e = g_array_index (g->implicit_edges, SgImplicitEdge, i);
    const char *f = g_hash_table_lookup (rename, e.from), *t = g_hash_table_lookup (rename, e.to);
    if ((f || t) && (e.kind == SG_EDGE_HIDE_START || e.kind == SG_EDGE_HIDE_WAIT))
      continue;
    if (f)
      e.from = f;
    if (t)
      e.to = t;
    if (strcmp (e.from, e.to) != 0)
      g_array_index (g->implicit_edges, SgImplicitEdge, w++) = e;
  }
  g_array_set_size (g->implicit_edges, w);
}

bool
sg_bucket_specs_check (SgGraph *g, const SgBucketSpec *specs, int32_t n_specs, bool *taken,
                       SgNodeId *waits, int64_t *start_pos, int64_t *use_pos, GError **error)
{
  int32_t n0 = g->n_nodes;
  sg_graph_fill_users (g);
  for (int32_t b = 0; b < n_specs; b++)
    if (specs[b].n_members < 2)
      FAIL (SG_BUCKET_ERROR_LAYOUT, "bucket: bucket %d has %d member(s); at least 2 are needed",
            b, specs[b].n_members);
  int32_t t = 0;
  for (int32_t b = 0; b < n_specs; b++) {
    start_pos[b] = G_MAXINT64, use_pos[b] = G_MAXINT64;
    for (int32_t i = 0; i < specs[b].n_members; i++, t++) {
      SgNodeId c = specs[b].members[i];
      if (c < 0 || c >= n0)
        FAIL (SG_BUCKET_ERROR_LAYOUT, "bucket: bucket %d: member id %d out of range", b, c);
      if (taken[c])
        FAIL (SG_BUCKET_ERROR_LAYOUT, "bucket: node '%s' is in two buckets", g->nodes[c].name);
      taken[c] = true;
      if (!sg_bucket_member_check (g, c, &waits[t], error))
        return false;
      uint32_t nu;
      const SgNodeId *u = sg_node_users (g, waits[t], &nu);
      start_pos[b] = MIN (start_pos[b], (int64_t)c);
      use_pos[b] = MIN (use_pos[b], nu ? (int64_t)u[0] : (int64_t)waits[t]);
    }
  }
  return true;
}

bool
sg_bucket_apply (SgGraph *g, const SgBucketSpec *specs, int32_t n_specs, GError **error)
{
  g_return_val_if_fail (g && (specs || n_specs == 0) && n_specs >= 0, false);
  if (n_specs <= 0)
    return true;
  int32_t n0 = g->n_nodes;
  g_autofree bool *taken = g_new0 (bool, (size_t)n0);
  int32_t total = 0;
  for (int32_t b = 0; b < n_specs; b++)
    total += MAX (specs[b].n_members, 0);
  /* Per member: wait, the wait's users (copied: appends invalidate users). */
  g_autofree SgNodeId *waits = g_new (SgNodeId, (size_t)total + 1);
  g_autofree int64_t *start_pos = g_new (int64_t, (size_t)n_specs);
  g_autofree int64_t *use_pos = g_new (int64_t, (size_t)n_specs);
  if (!sg_bucket_specs_check (g, specs, n_specs, taken, waits, start_pos, use_pos, error))
    return false;
  g_autoptr (GArray) wusers = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  g_autofree uint32_t *wu_first = g_new (uint32_t, (size_t)total + 1);
  for (int32_t t = 0; t < total; t++) {
    uint32_t nu;
    const SgNodeId *u = sg_node_users (g, waits[t], &nu);
    wu_first[t] = wusers->len;
    g_array_append_vals (wusers, u, nu);
  }
  wu_first[total] = wusers->len;
  /* Keys of the stable sort: existing node at position p -> 4p + 2; a
   * bucket's P, C -> 4 * earliest member + 0, 1; W, U -> 4 * first consumer
   * + 0, 1 (ties on id keep the unpacks in member order). */
  g_autoptr (GArray) keys = g_array_sized_new (FALSE, FALSE, sizeof (int64_t), (guint)n0 + 64);
  for (int32_t i = 0; i < n0; i++) {
    int64_t k = 4 * (int64_t)i + 2;
    g_array_append_val (keys, k);
  }

  g_autoptr (GHashTable) rename = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GArray) rewires = g_array_new (FALSE, FALSE, sizeof (Rewire));
  int32_t t = 0;
  g_autofree SgNodeId *unpack_of = g_new (SgNodeId, (size_t)total + 1);
  for (int32_t b = 0; b < n_specs; b++) {
    int32_t n = specs[b].n_members;
    SgNodeId *u = &unpack_of[t];
    SgNodeId c, w;
    SgNodeId first_new = g->n_nodes;
    if (!build_bucket (g, &specs[b], &waits[t], &c, &w, u, error))
      return false;
    for (SgNodeId id = first_new; id < g->n_nodes; id++) {
      bool early = id < w; /* P and C */
      int64_t k = 4 * (early ? start_pos[b] : use_pos[b]) + (id == first_new || id == w ? 0 : 1);
      g_array_append_val (keys, k);
    }
    for (int32_t i = 0; i < n; i++, t++) {
      for (uint32_t j = wu_first[t]; j < wu_first[t + 1]; j++) {
        Rewire r = { g_array_index (wusers, SgNodeId, j), waits[t], u[i] };
        g_array_append_val (rewires, r);
      }
      g_hash_table_insert (rename, (gpointer)g->nodes[specs[b].members[i]].name,
                           (gpointer)g->nodes[c].name);
      g_hash_table_insert (rename, (gpointer)g->nodes[waits[t]].name,
                           (gpointer)g->nodes[w].name);
    }
  }
  /* A pack that reads a member's wait (a bucket of the results of another
   * bucket's members: HSDP's all_reduces of reduce_scatters) reads the
   * unpack instead; the packs were appended after those users were read. */
  sg_graph_fill_users (g);
  for (int32_t i = 0; i < total; i++) {
    uint32_t nu;
    const SgNodeId *us = sg_node_users (g, waits[i], &nu);
    for (uint32_t j = 0; j < nu; j++)
      if (us[j] >= n0 && g->nodes[us[j]].kind == SG_OP_BUCKET_PACK) {
        Rewire r = { us[j], waits[i], unpack_of[i] };
        g_array_append_val (rewires, r);
      }
  }
  rewire_users (g, rewires);
  move_implicit_edges (g, rename);

  /* Remove members and their waits, then renumber. */
  int32_t n1 = g->n_nodes;
  g_autofree bool *keep = g_new (bool, (size_t)n1);
  for (int32_t i = 0; i < n1; i++)
    keep[i] = true;
  for (int32_t i = 0; i < total; i++)
    keep[waits[i]] = false;
  for (int32_t i = 0; i < n0; i++)
    if (taken[i])
      keep[i] = false;
  g_autofree SgNodeId *order = g_new (SgNodeId, (size_t)n1 + 1);
  int32_t n_order;
  if (!sg_bucket_stable_order (g, (const int64_t *)(void *)keys->data, keep, order, &n_order,
                               error))
    return false;
  return sg_graph_select (g, order, n_order, error);
}

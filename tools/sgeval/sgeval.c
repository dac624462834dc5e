/* sgeval.c: the reference evaluator: runs a GRAPH (not a plan) for every
 * rank of its world in one process, and compares output dumps.
 *
 *   sgeval GRAPH.json [--seed S] [--rank R] [--dump-outputs DIR] [--checksums FILE]
 *   sgeval --compare DIR_A DIR_B [--rtol R] [--atol A] [--bitwise]
 *
 * What: the straightforward single-process evaluation that schedrun's
 * outputs are checked against. Nodes run in graph order, all ranks in
 * lockstep; every node gets its own storage laid out as its meta says
 * (views are copies, so no aliasing rule of codegen is trusted); kernels
 * come from the same CPU kernel library and inputs from the same
 * sg_rt_fill_named as the backends; collectives are computed in-process
 * over each group's partition, reductions in group-rank order in double and
 * rounded once, exactly as the CPU backend does; a collective_permute
 * copies each rank's source's input (zeros without one), rank_roll runs
 * with each rank's group rank.
 * Mirrors torch.fx's Interpreter (run_node per node, in order).
 * Requires: a graph that sg_graph_load accepts. Invalidates: nothing.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "kernels.h"
#include "runtime.h"
#include "sgeval.h"

typedef struct {
  SgTensor *t; /* n_t slots: 1 for a plain value, n_tuple for tuples */
  int n_t;
} NodeVal;

typedef struct {
  const SgGraph *g;
  int32_t world;
  NodeVal *vals; /* [rank * n_nodes + id] */
  int32_t cur_rank;
} Eval;

static NodeVal *
val_of (Eval *ev, int32_t rank, SgNodeId id)
{
  return &ev->vals[(size_t)rank * (size_t)ev->g->n_nodes + (size_t)id];
}

static void
alloc_meta (const SgGraph *g, const SgMeta *m, SgTensor *t)
{
  memset (t, 0, sizeof *t);
  if (m->ndim < 0)
    return;
  t->dtype = m->dtype;
  t->ndim = m->ndim;
  memcpy (t->shape, sg_meta_shape (g, m), sizeof (int64_t) * (size_t)m->ndim);
  memcpy (t->stride, sg_meta_stride (g, m), sizeof (int64_t) * (size_t)m->ndim);
  uint64_t bytes = sg_tensor_extent_bytes (t);
  t->data = g_malloc (bytes ? bytes : 1);
  memset (t->data, 0xFF, bytes); /* NaN until written */
}

static bool
resolve_node (const cJSON *ref, SgTensor *out, void *ud, GError **error)
{
  Eval *ev = ud;
  const cJSON *n = cJSON_GetObjectItemCaseSensitive (ref, "node");
  SgNodeId id = cJSON_IsString (n) ? sg_graph_lookup (ev->g, n->valuestring) : SG_NO_NODE;
  if (id == SG_NO_NODE) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_KERNEL, "reference to an unknown node");
    return false;
  }
  NodeVal *v = val_of (ev, ev->cur_rank, id);
  if (v->n_t != 1 || v->t[0].data == NULL) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_KERNEL, "node '%s' has no tensor value",
                 ev->g->nodes[id].name);
    return false;
  }
  *out = v->t[0];
  return true;
}

/* The first node referenced by args[0] (collective input, wait, getitem). */
static SgNodeId
arg0_node (const SgGraph *g, SgNodeId id)
{
  uint32_t n;
  const SgNodeId *in = sg_node_inputs (g, id, &n);
  return n > 0 ? in[0] : SG_NO_NODE;
}

/* all_to_all_single's split lists: null or all equal. SPMD graphs list
 * rank 0's splits only, so uneven ones cannot be evaluated. */
static bool
equal_splits (const SgGraph *g, SgNodeId id)
{
  static const SgParam lists[] = { SG_PARAM_OUTPUT_SPLIT_SIZES, SG_PARAM_INPUT_SPLIT_SIZES };
  for (size_t a = 0; a < G_N_ELEMENTS (lists); a++) {
    const SgArg *l = sg_node_param (g, id, lists[a]);
    if (!l || l->type != SG_ARG_LIST)
      continue;
    uint32_t n;
    const SgArg *e = sg_arg_items (g, l, &n);
    double first, v;
    for (uint32_t i = 0; i < n; i++)
      if (!sg_arg_float (&e[i], &v) || !sg_arg_float (&e[0], &first) || v != first)
        return false;
  }
  return true;
}

/* Member @m of collective @id (a coalesced collective has several, each
 * of its own kind's semantics; its result is tuple element @m). */
static bool
eval_member (Eval *ev, SgNodeId id, uint32_t m, GError **error)
{
  const SgGraph *g = ev->g;
  const SgNode *nd = &g->nodes[id];
  const SgGroup *grp = &g->groups[nd->group];
  const SgOpKind kind = sg_op_member_kind (nd->kind);
  SgNodeId src = sg_node_coll_input (g, id, m);
  int k = grp->n_ranks;
  for (int32_t row = 0; row < grp->n_instances; row++) {
    const int32_t *ranks = &grp->partition[row * k];
    SgTensor out0 = val_of (ev, ranks[0], id)->t[m];
    SgTensor in0 = val_of (ev, ranks[0], src)->t[0];
    size_t es = sg_dtype_size (in0.dtype);
    uint64_t n_in = sg_tensor_numel (&in0), n_out = sg_tensor_numel (&out0);
    /* flat[q]: rank ranks[q]'s input, row-major */
    char *flat = g_malloc (n_in * (uint64_t)k * es + 1);
    for (int q = 0; q < k; q++)
      sg_tensor_pack (&val_of (ev, ranks[q], src)->t[0], flat + (uint64_t)q * n_in * es);
    for (int p = 0; p < k; p++) {
      SgTensor out = val_of (ev, ranks[p], id)->t[m];
      switch (kind) {
      case SG_OP_ALL_GATHER:
        if (n_out != n_in * (uint64_t)k)
          goto bad;
        sg_tensor_unpack (&out, flat);
        break;
      case SG_OP_REDUCE_SCATTER: case SG_OP_ALL_REDUCE: {
        bool rs = kind == SG_OP_REDUCE_SCATTER;
        if (rs ? n_in != n_out * (uint64_t)k : n_in != n_out)
          goto bad;
        uint64_t base = rs ? (uint64_t)p * n_out : 0;
        for (uint64_t j = 0; j < n_out; j++) {
          double a = sg_tensor_load (in0.dtype, flat, (int64_t)(base + j));
          for (int q = 1; q < k; q++) {
            double b = sg_tensor_load (in0.dtype, flat, (int64_t)((uint64_t)q * n_in + base + j));
            switch (nd->reduce) {
            case SG_REDUCE_MAX: a = b > a ? b : a; break;
            case SG_REDUCE_MIN: a = b < a ? b : a; break;
            case SG_REDUCE_PRODUCT: a *= b; break;
            default: a += b; break;
            }
          }
          if (nd->reduce == SG_REDUCE_AVG)
            a /= k;
          sg_tensor_store (out.dtype, out.data, sg_tensor_offset_of (&out, j), a);
        }
        break;
      }
      case SG_OP_ALL_TO_ALL: {
        if (n_in != n_out || n_in % (uint64_t)k || !equal_splits (g, id))
          goto bad;
        uint64_t c = n_in / (uint64_t)k;
        char *tmp = g_malloc (n_out * es + 1);
        for (int q = 0; q < k; q++)
          memcpy (tmp + (uint64_t)q * c * es, flat + ((uint64_t)q * n_in + (uint64_t)p * c) * es,
                  c * es);
        sg_tensor_unpack (&out, tmp);
        g_free (tmp);
        break;
      }
      case SG_OP_COLLECTIVE_PERMUTE: {
        SgPermute perm = { 0 };
        bool ok = n_in == n_out && sg_node_permute (g, id, &perm, NULL);
        const int q = ok ? perm.source[p] : -1;
        char *zero = ok && q < 0 ? g_malloc0 (n_out * es + 1) : NULL;
        if (ok)
          sg_tensor_unpack (&out, zero ? zero : flat + (uint64_t)q * n_in * es);
        g_free (zero);
        sg_permute_clear (&perm);
        if (!ok)
          goto bad;
        break;
      }
      case SG_OP_BROADCAST: {
        double src;
        bool has_src = sg_arg_float (sg_node_param (g, id, SG_PARAM_SRC), &src);
        int root = 0;
        for (int q = 0; q < k && has_src; q++)
          if (ranks[q] == (int32_t)src)
            root = q;
        if (n_in != n_out)
          goto bad;
        sg_tensor_unpack (&out, flat + (uint64_t)root * n_in * es);
        break;
      }
      default:
        goto bad;
      }
    }
    g_free (flat);
    continue;
  bad:
    g_free (flat);
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED,
                 "node '%s': collective %s with these sizes is not evaluated", nd->name,
                 sg_op_name (nd->kind));
    return false;
  }
  return true;
}

static bool
eval_collective (Eval *ev, SgNodeId id, GError **error)
{
  for (uint32_t m = 0; m < sg_node_coll_members (ev->g, id); m++)
    if (!eval_member (ev, id, m, error))
      return false;
  return true;
}

static bool
eval_node (Eval *ev, SgNodeId id, uint64_t seed, GError **error)
{
  const SgGraph *g = ev->g;
  const SgNode *nd = &g->nodes[id];
  if (nd->op == SG_NODE_OUTPUT)
    return true;
  for (int32_t r = 0; r < ev->world; r++) {
    NodeVal *v = val_of (ev, r, id);
    v->n_t = nd->n_tuple > 0 ? (int)nd->n_tuple : 1;
    v->t = g_new0 (SgTensor, v->n_t);
    if (nd->n_tuple > 0)
      for (uint32_t i = 0; i < nd->n_tuple; i++)
        alloc_meta (g, sg_node_tuple_meta (g, id, i), &v->t[i]);
    else
      alloc_meta (g, &nd->meta, &v->t[0]);
  }
  if (nd->op == SG_NODE_PLACEHOLDER || nd->op == SG_NODE_GET_ATTR) {
    for (int32_t r = 0; r < ev->world; r++) {
      SgTensor *t = &val_of (ev, r, id)->t[0];
      if (t->data == NULL)
        continue;
      void *tmp = g_malloc (sg_tensor_numel (t) * sg_dtype_size (t->dtype) + 1);
      sg_rt_fill_named (nd->name, t->dtype, sg_tensor_numel (t), r, seed, tmp);
      sg_tensor_unpack (t, tmp);
      g_free (tmp);
    }
    return true;
  }
  if (sg_op_is_collective (nd->kind))
    return eval_collective (ev, id, error);
  if (nd->kind == SG_OP_WAIT || nd->kind == SG_OP_GETITEM) {
    SgNodeId src = arg0_node (g, id);
    for (int32_t r = 0; r < ev->world; r++) {
      NodeVal *sv = val_of (ev, r, src);
      int slot = nd->kind == SG_OP_GETITEM ? nd->getitem_index : 0;
      SgTensor *out = &val_of (ev, r, id)->t[0];
      if (out->data == NULL)
        continue;
      if (slot < 0 || slot >= sv->n_t || sv->t[slot].data == NULL ||
          sg_tensor_numel (&sv->t[slot]) != sg_tensor_numel (out)) {
        g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_KERNEL,
                     "node '%s': its source has no tensor of its meta's size", nd->name);
        return false;
      }
      sg_tensor_copy_convert (out, &sv->t[slot]);
    }
    return true;
  }
  cJSON *args = sg_node_args_json (g, id, false, NULL, NULL);
  cJSON *kwargs = sg_node_args_json (g, id, true, NULL, NULL);
  bool ok = true;
  for (int32_t r = 0; r < ev->world && ok; r++) {
    NodeVal *v = val_of (ev, r, id);
    ev->cur_rank = r;
    if (v->t[0].data == NULL && nd->n_tuple == 0)
      continue; /* no tensor value: nothing to compute */
    GError *e = NULL;
    SgRankRoll rr;
    if (nd->kind == SG_OP_RANK_ROLL && sg_node_rank_roll (g, id, &rr, &e)) {
      const SgGroup *grp = &g->groups[rr.group];
      int32_t q = 0; /* r's position in its instance of the group */
      for (int32_t k = 0; k < grp->n_ranks * grp->n_instances; k++)
        if (grp->partition[k] == r)
          q = k % grp->n_ranks;
      ok = sg_cpu_rank_roll (nd->name, args, resolve_node, ev, q, grp->n_ranks, &v->t[0], &e);
    } else {
      ok = e == NULL &&
           sg_cpu_kernel (nd->kind, nd->name, args, kwargs, resolve_node, ev, v->t, v->n_t, &e);
    }
    if (!ok) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_KERNEL, "rank %d: %s (target %s)", r,
                   e->message, nd->target);
      g_error_free (e);
    }
  }
  cJSON_Delete (args);
  cJSON_Delete (kwargs);
  return ok;
}

static bool
write_outputs (Eval *ev, int32_t rank, const char *dir, cJSON *sums, GError **error)
{
  const SgGraph *g = ev->g;
  uint32_t n;
  /* The output node's list (args[0]), or its args when that is no list. */
  const SgArg *first = sg_node_arg (g, g->output, 0), *list;
  if (first && first->type == SG_ARG_LIST)
    list = sg_arg_items (g, first, &n);
  else
    list = sg_node_arg (g, g->output, 0), n = g->nodes[g->output].n_args;
  cJSON *meta = cJSON_CreateArray ();
  bool ok = true;
  if (dir != NULL && g_mkdir_with_parents (dir, 0755) != 0) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_IO, "cannot create %s", dir);
    ok = false;
  }
  int i = 0;
  for (uint32_t e = 0; e < n && ok; e++) {
    cJSON *m = cJSON_CreateObject ();
    cJSON_AddNumberToObject (m, "index", i);
    cJSON_AddItemToArray (meta, m);
    SgNodeId id = sg_arg_node (g, g->output, &list[e]);
    if (id == SG_NO_NODE || val_of (ev, rank, id)->t[0].data == NULL ||
        g->nodes[id].n_tuple > 0) {
      cJSON_AddNullToObject (m, "name");
      i++;
      continue;
    }
    cJSON *fnv = NULL;
    if (sums != NULL) {
      cJSON *row = cJSON_CreateObject ();
      cJSON_AddNumberToObject (row, "index", i);
      cJSON_AddStringToObject (row, "name", g->nodes[id].name);
      fnv = cJSON_AddArrayToObject (row, "fnv1a64_by_rank");
      cJSON_AddItemToArray (sums, row);
    }
    for (int32_t r = 0; r < ev->world; r++) {
      const SgTensor *t = &val_of (ev, r, id)->t[0];
      size_t bytes = sg_tensor_numel (t) * sg_dtype_size (t->dtype);
      void *host = g_malloc (bytes + 1);
      sg_tensor_pack (t, host);
      if (fnv != NULL) {
        char h[17];
        g_snprintf (h, sizeof h, "%016" PRIx64, sg_rt_fnv1a64 (host, bytes));
        cJSON_AddItemToArray (fnv, cJSON_CreateString (h));
      }
      if (r == rank) {
        cJSON_AddStringToObject (m, "name", g->nodes[id].name);
        cJSON *shape = cJSON_AddArrayToObject (m, "shape");
        for (int d = 0; d < t->ndim; d++)
          cJSON_AddItemToArray (shape, cJSON_CreateNumber ((double)t->shape[d]));
        cJSON_AddStringToObject (m, "dtype", sg_dtype_name (t->dtype));
        if (dir != NULL) {
          char *fn = g_strdup_printf ("%s/%d.bin", dir, i);
          char file[32];
          g_snprintf (file, sizeof file, "%d.bin", i);
          cJSON_AddStringToObject (m, "file", file);
          GError *we = NULL;
          if (!g_file_set_contents (fn, host, (gssize)bytes, &we)) {
            g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_IO, "%s", we->message);
            g_error_free (we);
            ok = false;
          }
          g_free (fn);
        }
      }
      g_free (host);
    }
    i++;
  }
  if (ok && dir != NULL) {
    char *text = cJSON_Print (meta);
    char *fn = g_build_filename (dir, "outputs.json", NULL);
    GError *we = NULL;
    if (!g_file_set_contents (fn, text, (gssize)strlen (text), &we)) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_IO, "%s", we->message);
      g_error_free (we);
      ok = false;
    }
    g_free (fn);
    cJSON_free (text);
  }
  cJSON_Delete (meta);
  return ok;
}

bool
sgeval_run (const char *graph_path, uint64_t seed, int32_t rank, const char *dump_dir,
            const char *checksums_path, GError **error)
{
  SgGraph *g = sg_graph_load (graph_path, error);
  if (g == NULL)
    return false;
  if (rank < 0 || rank >= g->world_size) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_ARGS, "--rank %d is outside the world of %d",
                 rank, g->world_size);
    sg_graph_free (g);
    return false;
  }
  Eval ev = { g, g->world_size, NULL, 0 };
  ev.vals = g_new0 (NodeVal, (size_t)g->n_nodes * (size_t)g->world_size);
  bool ok = true;
  /* Reject what the kernel library cannot run before any work. */
  for (SgNodeId id = 0; id < g->n_nodes && ok; id++) {
    const SgNode *nd = &g->nodes[id];
    if (nd->op != SG_NODE_CALL || sg_op_is_collective (nd->kind) || nd->kind == SG_OP_WAIT ||
        nd->kind == SG_OP_GETITEM)
      continue;
    cJSON *args = sg_node_args_json (g, id, false, NULL, NULL);
    cJSON *kwargs = sg_node_args_json (g, id, true, NULL, NULL);
    GError *e = NULL;
    ok = sg_cpu_kernel_check (nd->kind, nd->name, args, kwargs, &e);
    if (!ok) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED, "%s (target %s)", e->message,
                   nd->target);
      g_error_free (e);
    }
    cJSON_Delete (args);
    cJSON_Delete (kwargs);
  }
  for (SgNodeId id = 0; id < g->n_nodes && ok; id++)
    ok = eval_node (&ev, id, seed, error);
  cJSON *sums = checksums_path ? cJSON_CreateArray () : NULL;
  if (ok)
    ok = write_outputs (&ev, rank, dump_dir, sums, error);
  if (ok && sums != NULL) {
    char *text = cJSON_Print (sums);
    ok = g_file_set_contents (checksums_path, text, (gssize)strlen (text), error);
    cJSON_free (text);
  }
  cJSON_Delete (sums);
  for (size_t i = 0; i < (size_t)g->n_nodes * (size_t)g->world_size; i++) {
    for (int j = 0; j < ev.vals[i].n_t; j++)
      g_free (ev.vals[i].t[j].data);
    g_free (ev.vals[i].t);
  }
  g_free (ev.vals);
  sg_graph_free (g);
  return ok;
}

/* report.c: the bucket pass's statistics and the report's "bucket"
 * section; the pass entry point that keeps them on the graph.
 *
 * Requires: a graph sg_bucket_run/sg_bucket_pass ran on. Invalidates: nothing.
 */
#include "bucket-private.h"

#include <math.h>
#include <string.h>

/* What codegen does with the pack and unpacks of bucket collective @c. */
static void
copies_of (const SgGraph *g, const SgElision *e, SgNodeId c, SgBucketInfo *info)
{
  uint32_t k, nu;
  const SgNodeId *in = sg_node_inputs (g, c, &k);
  info->pack_copy = k && g->nodes[in[0]].kind == SG_OP_BUCKET_PACK
                      ? (SgCopyReason)e->reason[in[0]] : SG_COPY_NO_COLLECTIVE;
  info->unpack_copy = SG_COPY_ELIDED;
  const SgNodeId *w = sg_node_users (g, c, &nu);
  for (uint32_t i = 0; i < nu; i++) {
    uint32_t nuu;
    const SgNodeId *u = sg_node_users (g, w[i], &nuu);
    for (uint32_t j = 0; j < nuu; j++) {
      if (g->nodes[u[j]].kind != SG_OP_BUCKET_UNPACK)
        continue;
      if (e->reason[u[j]] == SG_COPY_ELIDED)
        info->unpacks_elided++;
      else
        info->unpack_copy = (SgCopyReason)e->reason[u[j]];
    }
  }
}

/* Fills st->infos from the bucket collectives of @g (kwargs member lists). */
void
sg_bucket_collect_infos (SgGraph *g, SgBucketStats *st)
{
  GArray *infos = g_array_new (FALSE, TRUE, sizeof (SgBucketInfo));
  SgElision e;
  sg_graph_elision (g, &e);
  sg_graph_fill_users (g);
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    const SgNode *n = &g->nodes[i];
    const SgArg *mem = sg_op_is_collective (n->kind) ? sg_node_kwarg (g, i, SG_BUCKET_KWARG)
                                                     : NULL;
    if (!mem || mem->type != SG_ARG_LIST)
      continue;
    uint32_t n_mem;
    const SgArg *items = sg_arg_items (g, mem, &n_mem);
    SgBucketInfo info = { 0 };
    info.name = g_strdup (n->name);
    info.kind = sg_op_member_kind (n->kind);
    info.grouped = sg_op_is_coalesced (n->kind);
    info.group = g_strdup (n->group >= 0 ? g->groups[n->group].name : "");
    info.dtype = sg_node_coll_output (g, i, 0)->dtype;
    info.reduce = n->reduce;
    info.bytes = sg_node_comm_bytes (g, i);
    info.n_members = (int32_t)n_mem;
    info.members = g_new0 (char *, (size_t)n_mem + 1);
    for (uint32_t j = 0; j < n_mem; j++) {
      const char *s = sg_arg_str (&items[j]);
      info.members[j] = g_strdup (s ? s : "");
    }
    if (!info.grouped)
      copies_of (g, &e, i, &info);
    g_array_append_val (infos, info);
  }
  sg_elision_clear (&e);
  st->n_infos = (int32_t)infos->len;
  st->infos = (SgBucketInfo *)(void *)g_array_free (infos, FALSE);
}

void
sg_bucket_stats_clear (SgBucketStats *st)
{
  if (!st)
    return;
  for (int32_t i = 0; i < st->n_infos; i++) {
    g_free (st->infos[i].name);
    g_free (st->infos[i].group);
    g_strfreev (st->infos[i].members);
  }
  g_free (st->infos);
  memset (st, 0, sizeof *st);
}

static void
stats_free (gpointer p)
{
  sg_bucket_stats_clear (p);
  g_free (p);
}

bool
sg_bucket_pass (SgGraph *g, const SgConfig *cfg, GError **error)
{
  g_return_val_if_fail (g, false);
  SgBucketStats *st = g_new0 (SgBucketStats, 1);
  if (!sg_bucket_run (g, cfg, st, error)) {
    stats_free (st);
    return false;
  }
  if (g->bucket_stats && g->bucket_stats_free)
    g->bucket_stats_free (g->bucket_stats);
  g->bucket_stats = st;
  g->bucket_stats_free = stats_free;
  return true;
}

const SgBucketStats *
sg_bucket_stats (const SgGraph *g)
{
  g_return_val_if_fail (g, NULL);
  return g->bucket_stats_free == stats_free ? g->bucket_stats : NULL;
}

cJSON *
sg_bucket_report (const SgGraph *g, const SgBucketStats *st)
{
  if (!st)
    st = sg_bucket_stats (g);
  cJSON *o = cJSON_CreateObject ();
  if (!st) {
    cJSON_AddBoolToObject (o, "enabled", false);
    return o;
  }
  cJSON_AddBoolToObject (o, "enabled", st->ran);
  cJSON_AddStringToObject (o, "mode", sg_bucket_mode_name (st->mode));
  cJSON_AddNumberToObject (o, "cap_bytes", (double)st->cap_bytes);
  cJSON_AddNumberToObject (o, "collectives_before", st->collectives_before);
  cJSON_AddNumberToObject (o, "collectives_after", st->collectives_after);
  cJSON_AddNumberToObject (o, "buckets_formed", st->buckets);
  cJSON *e = cJSON_AddObjectToObject (o, "exposed_us");
  sg_report_add_us (e, "unbucketed", st->exposed_before_us);
  sg_report_add_us (e, "bucketed", st->exposed_after_us);
  cJSON *s = cJSON_AddObjectToObject (o, "step_us");
  sg_report_add_us (s, "unbucketed", st->step_before_us);
  sg_report_add_us (s, "bucketed", st->step_after_us);
  cJSON *pk = cJSON_AddObjectToObject (o, "peak_bytes");
  cJSON_AddNumberToObject (pk, "unbucketed", (double)st->peak_before_bytes);
  cJSON_AddNumberToObject (pk, "bucketed", (double)st->peak_after_bytes);
  cJSON_AddStringToObject (o, "source", "simulator");
  static const char *const from[] = { "none", "greedy", "per-layer" };
  cJSON_AddStringToObject (o, "chosen", from[st->source]);
  cJSON_AddNumberToObject (o, "layers", st->layers);
  cJSON *cand = cJSON_AddObjectToObject (o, "candidates_step_us");
  sg_report_add_us (cand, "unbucketed", st->step_before_us);
  if (!isnan (st->greedy_step_us))
    sg_report_add_us (cand, "greedy", st->greedy_step_us);
  if (!isnan (st->per_layer_step_us))
    sg_report_add_us (cand, "per_layer", st->per_layer_step_us);
  if (!isnan (st->per_layer_refined_step_us))
    sg_report_add_us (cand, "per_layer_refined", st->per_layer_refined_step_us);
  cJSON *ref = cJSON_AddObjectToObject (o, "refused");
  cJSON_AddNumberToObject (ref, "cycle", st->refused_cycle);
  cJSON_AddNumberToObject (ref, "cap", st->refused_cap);
  cJSON_AddNumberToObject (ref, "step", st->refused_step);
  cJSON_AddNumberToObject (ref, "memory", st->refused_memory);
  cJSON_AddNumberToObject (ref, "predicted", st->refused_predicted);
  cJSON_AddNumberToObject (ref, "budget", st->refused_budget);
  cJSON_AddNumberToObject (o, "simulations", st->simulations);
  cJSON_AddStringToObject (o, "lowering", sg_bucket_lowering_name (st->lowering));
  cJSON_AddNumberToObject (o, "grouped", st->grouped);
  cJSON_AddNumberToObject (o, "lowering_flips", st->lowering_flips);
  cJSON *arr = cJSON_AddArrayToObject (o, "buckets");
  for (int32_t i = 0; i < st->n_infos; i++) {
    const SgBucketInfo *b = &st->infos[i];
    cJSON *j = cJSON_CreateObject ();
    cJSON_AddStringToObject (j, "name", b->name);
    cJSON_AddStringToObject (j, "kind", sg_op_name (b->kind));
    cJSON_AddStringToObject (j, "group", b->group);
    cJSON_AddStringToObject (j, "dtype", sg_dtype_name (b->dtype));
    if (b->reduce != SG_REDUCE_NONE)
      cJSON_AddStringToObject (j, "reduce", sg_reduce_name (b->reduce));
    cJSON_AddNumberToObject (j, "bytes", (double)b->bytes);
    cJSON_AddStringToObject (j, "lowering", b->grouped ? "grouped" : "flat");
    if (!b->grouped) { /* a grouped bucket has no copies */
      cJSON *cp = cJSON_AddObjectToObject (j, "copies");
      cJSON_AddStringToObject (cp, "pack", sg_copy_reason_text (b->pack_copy));
      cJSON_AddNumberToObject (cp, "unpacks_elided", b->unpacks_elided);
      cJSON_AddStringToObject (cp, "unpack", sg_copy_reason_text (b->unpack_copy));
    }
    cJSON *m = cJSON_AddArrayToObject (j, "members");
    for (int32_t k = 0; k < b->n_members; k++)
      cJSON_AddItemToArray (m, cJSON_CreateString (b->members[k]));
    cJSON_AddItemToArray (arr, j);
  }
  return o;
}

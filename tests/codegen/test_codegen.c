/* test_codegen.c: lowering graphs to plans (codegen/).
 *
 * Small builder graphs pin the lowering rules: instruction order, events,
 * aliases and view offsets, tuple values, frees. The sample graphs are in
 * test_samples.c.
 */
#include <check.h>
#include <string.h>

#include "builder.h"
#include "codegen-private.h"

#ifndef SG_TEST_GOLDEN
#error "SG_TEST_GOLDEN must name tests/codegen/golden"
#endif

static SgPlan *
lower (SgGraph *g, const SgSimResult *pred)
{
  SgPlan *p = NULL;
  g_autoptr (GError) e = NULL;
  ck_assert_msg (sg_codegen_plan (g, NULL, pred, "test", "reorder=1", &p, &e), "%s",
                 e ? e->message : "");
  return p;
}

static int32_t
find_ins (const SgPlan *p, SgInsKind kind, const char *name)
{
  for (int32_t i = 0; i < p->n_ins; i++)
    if (p->ins[i].kind == kind && p->ins[i].name && strcmp (p->ins[i].name, name) == 0)
      return i;
  return -1;
}

static int32_t
find_value (const SgPlan *p, const char *name)
{
  for (int32_t v = 0; v < p->n_values; v++)
    if (strcmp (p->values[v].name, name) == 0)
      return v;
  return -1;
}

static int32_t
free_of (const SgPlan *p, int32_t buffer)
{
  for (int32_t i = 0; i < p->n_ins; i++)
    if (p->ins[i].kind == SG_INS_FREE && p->ins[i].buffer == buffer)
      return i;
  return -1;
}

/* x[8,16], w[4,16] shard; ag = all_gather(w); wt = wait(ag); t = t(wt);
 * y = mm(x, t) [8,8]; z = silu(y); rs = reduce_scatter(z) [4,8]; ws = wait(rs);
 * output (ws). */
static SgGraph *
fsdp_graph (void)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 8, 16);
  tb_input (g, "w", "bfloat16", 2, 4, 16);
  tb_all_gather (g, "ag", "w", "0");
  tb_wait (g, "wt", "ag");
  tb_t (g, "t", "wt");
  tb_mm (g, "y", "x", "t");
  tb_pointwise (g, "z", "aten.silu.default", "y", NULL);
  tb_reduce_scatter (g, "rs", "z", "0");
  tb_wait (g, "ws", "rs");
  tb_output (g, 1, "ws");
  return g;
}

START_TEST (collective_is_bracketed_by_events_on_its_comm_stream)
{
  g_autoptr (SgGraph) g = fsdp_graph ();
  g_autoptr (SgPlan) p = lower (g, NULL);
  int32_t c = find_ins (p, SG_INS_COLLECTIVE, "ag");
  ck_assert_int_ge (c, 2);
  const SgPlanIns *rec = &p->ins[c - 2], *wait = &p->ins[c - 1], *done = &p->ins[c + 1];
  ck_assert (rec->kind == SG_INS_RECORD && rec->stream == 0);
  ck_assert (wait->kind == SG_INS_WAIT_EVENT && wait->stream == 1 && wait->event == rec->event);
  ck_assert_int_eq (p->ins[c].stream, 1);
  ck_assert (done->kind == SG_INS_RECORD && done->stream == 1);
  int32_t w = find_ins (p, SG_INS_WAIT_EVENT, "wt");
  ck_assert_int_gt (w, c);
  ck_assert_int_eq (p->ins[w].stream, 0);
  ck_assert_int_eq (p->ins[w].event, done->event);
  ck_assert_int_eq (p->ins[w].coll, c);
  /* the kernel that reads the gathered weight comes after the wait */
  ck_assert_int_gt (find_ins (p, SG_INS_KERNEL, "y"), w);
  ck_assert_int_eq (p->ins[c].count, 64);
  ck_assert_int_eq (p->ins[c].dtype, SG_DTYPE_BF16);
  int32_t r = find_ins (p, SG_INS_COLLECTIVE, "rs");
  ck_assert_int_eq (p->ins[r].count, 32); /* reduce_scatter: output elements */
  ck_assert_int_eq (p->ins[r].reduce, SG_REDUCE_SUM);
  ck_assert_int_eq (p->n_streams, 2);
  ck_assert_int_eq (p->n_events, 4);
}
END_TEST

START_TEST (aliases_share_their_roots_buffer)
{
  g_autoptr (SgGraph) g = fsdp_graph ();
  g_autoptr (SgPlan) p = lower (g, NULL);
  int32_t ag = find_value (p, "ag"), t = find_value (p, "t");
  ck_assert_int_ge (ag, 0);
  ck_assert_int_ge (t, 0);
  ck_assert_int_lt (find_value (p, "wt"), 0); /* the wait is the collective's value */
  ck_assert_int_eq (p->values[t].buffer, p->values[ag].buffer);
  ck_assert_int_eq (p->values[t].shape[0], 16);
  ck_assert_int_eq (p->values[t].stride[0], 1);
  ck_assert_int_eq (p->values[t].stride[1], 16);
  int32_t y = find_ins (p, SG_INS_KERNEL, "y");
  ck_assert_int_eq (p->ins[y].n_in, 2);
  ck_assert_int_eq (p->ins[y].in[1], t);
  int32_t v;
  ck_assert (sg_plan_arg_value (&p->ins[y], 1, &v) && v == t);
  /* the output is the reduce_scatter's value, alive to the end */
  ck_assert_int_eq (p->n_outputs, 1);
  ck_assert_int_eq (p->outputs[0], find_value (p, "rs"));
  ck_assert_int_eq (p->buffers[p->values[p->outputs[0]].buffer].last_ins, p->n_ins - 1);
  ck_assert_int_eq (p->n_inputs, 2);
  ck_assert_int_eq (p->values[p->inputs[1]].init, SG_INIT_INPUT);
}
END_TEST

START_TEST (buffers_are_freed_after_last_use_never_before_the_wait)
{
  g_autoptr (SgGraph) g = fsdp_graph ();
  g_autoptr (SgPlan) p = lower (g, NULL);
  int32_t ag_buf = p->values[find_value (p, "ag")].buffer;
  int32_t y = find_ins (p, SG_INS_KERNEL, "y");
  ck_assert_int_eq (free_of (p, ag_buf), y + 1); /* last read by y (through t) */
  int32_t z_buf = p->values[find_value (p, "z")].buffer;
  int32_t ws = find_ins (p, SG_INS_WAIT_EVENT, "ws");
  ck_assert_int_gt (free_of (p, z_buf), ws); /* the reduce_scatter's input */
  ck_assert_int_eq (p->buffers[z_buf].last_ins, ws);
  /* inputs and outputs are never freed */
  ck_assert_int_lt (free_of (p, p->values[p->inputs[0]].buffer), 0);
  ck_assert_int_lt (free_of (p, p->values[p->outputs[0]].buffer), 0);
  /* y's buffer (dead after z) may reuse memory, ag's may not be reused before y */
  for (int32_t b = 0; b < p->n_buffers; b++)
    ck_assert_int_eq (p->buffers[b].offset % 256, 0);
}
END_TEST

START_TEST (slice_and_select_views_get_byte_offsets)
{
  g_autoptr (SgGraph) g = tb_new (1);
  tb_input (g, "a", "float32", 2, 6, 10);
  tb_node (g, "{\"name\":\"s\",\"op\":\"call_function\",\"target\":\"aten.slice.Tensor\","
              "\"args\":[{\"node\":\"a\"},0,2,5],\"kwargs\":{},"
              "\"meta\":{\"shape\":[3,10],\"stride\":[10,1],\"dtype\":\"float32\"}}");
  tb_node (g, "{\"name\":\"c\",\"op\":\"call_function\",\"target\":\"aten.select.int\","
              "\"args\":[{\"node\":\"s\"},1,-1],\"kwargs\":{},"
              "\"meta\":{\"shape\":[3],\"stride\":[10],\"dtype\":\"float32\"}}");
  tb_pointwise (g, "r", "aten.relu.default", "c", NULL);
  tb_output (g, 1, "r");
  g_autoptr (SgPlan) p = lower (g, NULL);
  int32_t s = find_value (p, "s"), c = find_value (p, "c"), a = find_value (p, "a");
  ck_assert_uint_eq (p->values[s].offset, 2 * 10 * 4);
  ck_assert_uint_eq (p->values[c].offset, 2 * 10 * 4 + 9 * 4);
  ck_assert_int_eq (p->values[c].buffer, p->values[a].buffer);
}
END_TEST

START_TEST (tuple_elements_are_values_and_getitem_maps_to_them)
{
  g_autoptr (SgGraph) g = tb_new (1);
  tb_input (g, "q", "bfloat16", 4, 1, 2, 8, 4);
  tb_node (g, "{\"name\":\"att\",\"op\":\"call_function\","
              "\"target\":\"aten._scaled_dot_product_flash_attention.default\","
              "\"args\":[{\"node\":\"q\"},{\"node\":\"q\"},{\"node\":\"q\"}],\"kwargs\":{},"
              "\"meta\":{\"tuple\":[{\"shape\":[1,2,8,4],\"stride\":[64,32,4,1],"
              "\"dtype\":\"bfloat16\"},null,{\"shape\":[1,2,8],\"stride\":[16,8,1],"
              "\"dtype\":\"float32\"}]}}");
  tb_node (g, "{\"name\":\"o\",\"op\":\"call_function\",\"target\":\"<built-in function "
              "getitem>\",\"args\":[{\"node\":\"att\"},0],\"kwargs\":{},"
              "\"meta\":{\"shape\":[1,2,8,4],\"stride\":[64,32,4,1],\"dtype\":\"bfloat16\"}}");
  tb_pointwise (g, "r", "aten.relu.default", "o", NULL);
  tb_output (g, 1, "r");
  g_autoptr (SgPlan) p = lower (g, NULL);
  int32_t k = find_ins (p, SG_INS_KERNEL, "att");
  ck_assert_int_eq (p->ins[k].n_out, 3);
  ck_assert_int_eq (p->ins[k].out[0], find_value (p, "att.0"));
  ck_assert_int_eq (p->ins[k].out[1], -1);
  ck_assert_int_eq (p->ins[k].out[2], find_value (p, "att.2"));
  ck_assert_int_eq (p->ins[k].n_in, 1); /* q once, though passed three times */
  int32_t r = find_ins (p, SG_INS_KERNEL, "r");
  ck_assert_int_eq (p->ins[r].in[0], find_value (p, "att.0"));
  /* the unused element dies right after the kernel */
  int32_t lse = p->values[find_value (p, "att.2")].buffer;
  ck_assert_int_eq (free_of (p, lse), k + 1);
}
END_TEST

START_TEST (collective_without_wait_is_waited_at_the_end)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "float32", 1, 8);
  tb_all_reduce (g, "ar", "x", "0");
  tb_pointwise (g, "y", "aten.relu.default", "x", NULL);
  tb_output (g, 1, "y");
  g_autoptr (SgPlan) p = lower (g, NULL);
  int32_t c = find_ins (p, SG_INS_COLLECTIVE, "ar");
  bool found = false;
  for (int32_t i = c + 1; i < p->n_ins; i++)
    if (p->ins[i].kind == SG_INS_WAIT_EVENT && p->ins[i].coll == c) {
      found = true;
      ck_assert_int_gt (i, find_ins (p, SG_INS_KERNEL, "y"));
    }
  ck_assert (found);
}
END_TEST

START_TEST (collective_arguments_reach_the_plan)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "float32", 1, 8);
  tb_node (g, "{\"name\":\"bc\",\"op\":\"call_function\","
              "\"target\":\"_c10d_functional.broadcast.default\","
              "\"args\":[{\"node\":\"x\"},1,\"0\"],\"kwargs\":{},"
              "\"meta\":{\"shape\":[8],\"stride\":[1],\"dtype\":\"float32\"}}");
  tb_wait (g, "wb", "bc");
  tb_node (g, "{\"name\":\"a2a\",\"op\":\"call_function\","
              "\"target\":\"_c10d_functional.all_to_all_single.default\","
              "\"args\":[{\"node\":\"wb\"},[2,4],[3,5],\"0\"],\"kwargs\":{},"
              "\"meta\":{\"shape\":[6],\"stride\":[1],\"dtype\":\"float32\"}}");
  tb_wait (g, "wa", "a2a");
  tb_output (g, 1, "wa");
  g_autoptr (SgPlan) p = lower (g, NULL);
  const SgPlanIns *bc = &p->ins[find_ins (p, SG_INS_COLLECTIVE, "bc")];
  int64_t src, splits[4];
  ck_assert (sg_plan_arg_int (bc, 1, &src) && src == 1);
  ck_assert_int_eq (bc->count, 8);
  const SgPlanIns *a2a = &p->ins[find_ins (p, SG_INS_COLLECTIVE, "a2a")];
  ck_assert_int_eq (sg_plan_arg_ints (a2a, 1, splits, 4), 2);
  ck_assert_int_eq (splits[1], 4);
  int32_t v;
  ck_assert (sg_plan_arg_value (a2a, 0, &v) && v == a2a->in[0]);
  ck_assert_int_eq (a2a->count, 8); /* input elements; the output has 6 */
  ck_assert_int_eq (p->values[a2a->out[0]].shape[0], 6);
}
END_TEST

START_TEST (collective_of_a_non_tensor_is_an_error_naming_the_node)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "float32", 1, 8);
  tb_node (g, "{\"name\":\"tup\",\"op\":\"call_function\",\"target\":\"my.op\","
              "\"args\":[{\"node\":\"x\"}],\"kwargs\":{},\"meta\":{\"tuple\":[null,"
              "{\"shape\":[8],\"stride\":[1],\"dtype\":\"float32\"}]}}");
  tb_node (g, "{\"name\":\"none\",\"op\":\"call_function\",\"target\":\"<built-in "
              "function getitem>\",\"args\":[{\"node\":\"tup\"},0],\"kwargs\":{}}");
  tb_node (g, "{\"name\":\"ar\",\"op\":\"call_function\","
              "\"target\":\"_c10d_functional.all_reduce.default\","
              "\"args\":[{\"node\":\"none\"},\"sum\",\"0\"],\"kwargs\":{},"
              "\"meta\":{\"shape\":[8],\"stride\":[1],\"dtype\":\"float32\"}}");
  tb_wait (g, "w", "ar");
  tb_output (g, 1, "w");
  SgPlan *p = NULL;
  g_autoptr (GError) e = NULL;
  ck_assert (!sg_codegen_plan (g, NULL, NULL, "t", "", &p, &e));
  ck_assert_ptr_null (p);
  ck_assert_int_eq (e->code, SG_CODEGEN_ERROR_GRAPH);
  ck_assert_msg (strstr (e->message, "\"ar\"") && strstr (e->message, "args[0]"), "%s",
                 e->message);
}
END_TEST

/* Random lifetimes and sizes (fixed LCG seed), from a few buffers to enough
 * that greedy-by-size runs out of budget and the online packer decides. */
START_TEST (packed_buffers_never_overlap_while_both_live)
{
  static const int32_t sizes[] = { 3, 40, 400, 6000 };
  uint64_t seed = 12345u + (uint64_t)_i;
  int32_t nb = sizes[_i], ni = nb * 2;
  g_autoptr (SgPlan) p = sg_plan_new ();
  p->n_ins = ni;
  p->n_buffers = nb;
  p->buffers = g_new0 (SgPlanBuffer, (size_t)nb);
  g_autofree bool *pinned = g_new0 (bool, (size_t)nb);
  for (int32_t b = 0; b < nb; b++) {
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    uint32_t r = (uint32_t)(seed >> 33);
    int32_t first = (int32_t)(r % (uint32_t)ni);
    int32_t len = (int32_t)((r >> 8) % (uint32_t)(ni / 4 + 1));
    p->buffers[b].first_ins = first;
    p->buffers[b].last_ins = MIN (ni - 1, first + len);
    p->buffers[b].bytes = (uint64_t)((r >> 4) % 5000u);
    pinned[b] = b % 17 == 0;
    if (pinned[b]) {
      p->buffers[b].first_ins = 0;
      p->buffers[b].last_ins = ni - 1;
    }
  }
  sg_codegen_pack_buffers (p, pinned);
  for (int32_t a = 0; a < nb; a++) {
    const SgPlanBuffer *x = &p->buffers[a];
    ck_assert_uint_eq (x->offset % 256, 0);
    ck_assert_uint_le (x->offset + x->bytes, p->arena_bytes);
    for (int32_t b = a + 1; b < nb; b++) {
      const SgPlanBuffer *y = &p->buffers[b];
      if (!x->bytes || !y->bytes || x->last_ins < y->first_ins || y->last_ins < x->first_ins)
        continue;
      if (!(x->offset + x->bytes <= y->offset || y->offset + y->bytes <= x->offset))
        ck_abort_msg ("buffers %d [%d,%d] and %d [%d,%d] overlap", a, x->first_ins, x->last_ins,
                      b, y->first_ins, y->last_ins);
    }
  }
  SgMemStats st;
  sg_codegen_mem_stats (p, &st);
  ck_assert_uint_ge (st.arena_bytes, st.live_peak_bytes);
  ck_assert_uint_le (st.arena_bytes, st.sum_bytes);
  /* deterministic: packing again gives the same offsets */
  g_autofree SgPlanBuffer *before = g_memdup2 (p->buffers, sizeof (SgPlanBuffer) * (size_t)nb);
  sg_codegen_pack_buffers (p, pinned);
  ck_assert (memcmp (before, p->buffers, sizeof (SgPlanBuffer) * (size_t)nb) == 0);
  p->n_ins = 0; /* lifetimes only: there is no instruction array */
}
END_TEST

/* The online packer and the size order as first written (GTrees of the
 * free gaps by offset and by size; a comparison sort), the reference for
 * memplan.c's treap, hash maps and radix sort. */
typedef struct {
  uint64_t off, size;
} RefGap;

static int
ref_by_off (gconstpointer a, gconstpointer b, gpointer data)
{
  (void)data;
  const RefGap *x = a, *y = b;
  return (x->off > y->off) - (x->off < y->off);
}

static int
ref_by_size (gconstpointer a, gconstpointer b, gpointer data)
{
  (void)data;
  const RefGap *x = a, *y = b;
  if (x->size != y->size)
    return x->size < y->size ? -1 : 1;
  return (x->off > y->off) - (x->off < y->off);
}

static void
ref_remove (GTree *by_off, GTree *by_size, RefGap *g)
{
  g_tree_remove (by_size, g);
  g_tree_remove (by_off, g);
}

static void
ref_add (GTree *by_off, GTree *by_size, uint64_t off, uint64_t size)
{
  RefGap *g = g_new (RefGap, 1);
  *g = (RefGap){ off, size };
  g_tree_insert (by_off, g, g);
  g_tree_insert (by_size, g, g);
}

static uint64_t
ref_alloc (GTree *by_off, GTree *by_size, uint64_t *top, uint64_t size)
{
  RefGap key = { 0, size };
  GTreeNode *nd = g_tree_lower_bound (by_size, &key);
  if (nd) {
    RefGap g = *(RefGap *)g_tree_node_key (nd);
    ref_remove (by_off, by_size, g_tree_node_key (nd));
    if (g.size > size)
      ref_add (by_off, by_size, g.off + size, g.size - size);
    return g.off;
  }
  GTreeNode *last = g_tree_node_last (by_off);
  if (last && ((RefGap *)g_tree_node_key (last))->off + ((RefGap *)g_tree_node_key (last))->size
                == *top) {
    uint64_t o = ((RefGap *)g_tree_node_key (last))->off;
    ref_remove (by_off, by_size, g_tree_node_key (last));
    *top = o + size;
    return o;
  }
  uint64_t o = *top;
  *top += size;
  return o;
}

static void
ref_release (GTree *by_off, GTree *by_size, uint64_t off, uint64_t size)
{
  RefGap key = { off, 0 };
  GTreeNode *next = g_tree_lower_bound (by_off, &key);
  GTreeNode *prev = next ? g_tree_node_previous (next) : g_tree_node_last (by_off);
  if (prev && ((RefGap *)g_tree_node_key (prev))->off + ((RefGap *)g_tree_node_key (prev))->size
                == off) {
    RefGap *g = g_tree_node_key (prev);
    off = g->off;
    size += g->size;
    ref_remove (by_off, by_size, g);
  }
  if (next && off + size == ((RefGap *)g_tree_node_key (next))->off) {
    size += ((RefGap *)g_tree_node_key (next))->size;
    ref_remove (by_off, by_size, g_tree_node_key (next));
  }
  ref_add (by_off, by_size, off, size);
}

static int
ref_cmp_size (gconstpointer a, gconstpointer b, gpointer data)
{
  const SgPlanBuffer *bufs = data;
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  uint64_t sx = sg_align_up (bufs[x].bytes), sy = sg_align_up (bufs[y].bytes);
  if (sx != sy)
    return sx > sy ? -1 : 1;
  if (bufs[x].first_ins != bufs[y].first_ins)
    return bufs[x].first_ins < bufs[y].first_ins ? -1 : 1;
  return (x > y) - (x < y);
}

/* memplan.c's size order and online packer place every buffer where the
 * first ones did, on random lifetimes and sizes (many equal ones: ties;
 * huge ones: several radix passes). */
START_TEST (online_packing_places_buffers_as_the_tree_packer_did)
{
  GRand *rnd = g_rand_new_with_seed (3);
  for (int trial = 0; trial < 300; trial++) {
    g_autoptr (SgPlan) p = sg_plan_new ();
    int32_t nb = g_rand_int_range (rnd, 1, trial % 10 ? 300 : 5000), ni = 2 * nb;
    p->n_buffers = nb;
    p->buffers = g_new0 (SgPlanBuffer, (size_t)nb);
    const uint32_t kinds = (uint32_t)g_rand_int_range (rnd, 1, 40);
    for (int32_t b = 0; b < nb; b++) {
      SgPlanBuffer *x = &p->buffers[b];
      x->first_ins = g_rand_int_range (rnd, 0, ni);
      x->last_ins = MIN (ni - 1, x->first_ins + g_rand_int_range (rnd, 0, ni / 8 + 2));
      uint64_t k = (uint64_t)(g_rand_int (rnd) % kinds) + 1;
      x->bytes = trial % 7 ? k * 1000 + (uint64_t)g_rand_int_range (rnd, 0, 2)
                           : k << g_rand_int_range (rnd, 8, 50);
    }
    g_autofree int32_t *order = g_new (int32_t, (size_t)nb);
    g_autofree int32_t *want = g_new (int32_t, (size_t)nb);
    for (int32_t b = 0; b < nb; b++)
      order[b] = want[b] = b;
    g_qsort_with_data (want, nb, sizeof (int32_t), ref_cmp_size, p->buffers);
    sg_codegen_sort_by_size (p, order, nb);
    ck_assert (memcmp (order, want, sizeof (int32_t) * (size_t)nb) == 0);

    const uint64_t base = (uint64_t)g_rand_int_range (rnd, 0, 4) * 256;
    g_autofree uint64_t *off = g_new0 (uint64_t, (size_t)nb);
    uint64_t top = sg_codegen_pack_online (p, order, nb, base, off);
    /* the reference: allocations by (first, size order), releases by (last, id) */
    g_autofree int32_t *alloc = g_memdup2 (order, sizeof (int32_t) * (size_t)nb);
    g_autofree int32_t *release = g_new (int32_t, (size_t)nb);
    for (int32_t b = 0; b < nb; b++)
      release[b] = b;
    sg_plan_sort_buffers_by_time (p, alloc, nb, false);
    sg_plan_sort_buffers_by_time (p, release, nb, true);
    GTree *by_off = g_tree_new_full (ref_by_off, NULL, g_free, NULL);
    GTree *by_size = g_tree_new_full (ref_by_size, NULL, NULL, NULL);
    g_autofree uint64_t *ref = g_new0 (uint64_t, (size_t)nb);
    uint64_t ref_top = base;
    int32_t r = 0;
    for (int32_t k = 0; k < nb; k++) {
      const SgPlanBuffer *x = &p->buffers[alloc[k]];
      for (; r < nb && p->buffers[release[r]].last_ins < x->first_ins; r++)
        ref_release (by_off, by_size, ref[release[r]], sg_align_up (p->buffers[release[r]].bytes));
      ref[alloc[k]] = ref_alloc (by_off, by_size, &ref_top, sg_align_up (x->bytes));
    }
    g_tree_destroy (by_size);
    g_tree_destroy (by_off);
    ck_assert_uint_eq (top, ref_top);
    ck_assert (memcmp (off, ref, sizeof (uint64_t) * (size_t)nb) == 0);
  }
  g_rand_free (rnd);
}
END_TEST

/* The plan text of a small graph, byte for byte: a change of the format or
 * of the lowering shows up here (and needs SG_PLAN_VERSION bumped when the
 * format changes). SG_REGEN_GOLDEN=1 rewrites the expected file. */
START_TEST (small_graph_lowers_to_the_golden_plan)
{
  g_autofree char *gpath = g_build_filename (SG_TEST_GOLDEN, "small.graph.json", NULL);
  g_autofree char *ppath = g_build_filename (SG_TEST_GOLDEN, "small.plan.json", NULL);
  g_autoptr (GError) e = NULL;
  g_autoptr (SgGraph) g = sg_graph_load (gpath, &e);
  ck_assert_msg (g != NULL, "%s", e ? e->message : "");
  SgPlan *p = NULL;
  ck_assert_msg (sg_codegen_plan (g, NULL, NULL, "small.graph.json", "golden", &p, &e), "%s",
                 e ? e->message : "");
  size_t len;
  g_autofree char *text = sg_plan_to_json (p, &len);
  sg_plan_free (p);
  if (g_getenv ("SG_REGEN_GOLDEN"))
    ck_assert (g_file_set_contents (ppath, text, (gssize)len, NULL));
  g_autofree char *want = NULL;
  size_t want_len;
  ck_assert_msg (g_file_get_contents (ppath, &want, &want_len, &e), "%s", e ? e->message : "");
  size_t at = 0;
  while (at < len && at < want_len && want[at] == text[at])
    at++;
  if (at < len || at < want_len) {
    size_t line = at;
    while (line > 0 && text[line - 1] != '\n')
      line--;
    ck_abort_msg ("plan differs from %s at byte %zu (SG_REGEN_GOLDEN=1 to accept): %.160s",
                  ppath, at, text + line);
  }
  /* and the golden file itself loads (hash, rules) */
  g_autoptr (SgPlan) q = sg_plan_load (ppath, &e);
  ck_assert_msg (q != NULL, "%s", e ? e->message : "");
}
END_TEST

static Suite *
codegen_suite (void)
{
  Suite *s = suite_create ("codegen");
  TCase *tc = tcase_create ("lowering");
  tcase_add_test (tc, collective_is_bracketed_by_events_on_its_comm_stream);
  tcase_add_test (tc, aliases_share_their_roots_buffer);
  tcase_add_test (tc, buffers_are_freed_after_last_use_never_before_the_wait);
  tcase_add_test (tc, slice_and_select_views_get_byte_offsets);
  tcase_add_test (tc, tuple_elements_are_values_and_getitem_maps_to_them);
  tcase_add_test (tc, collective_without_wait_is_waited_at_the_end);
  tcase_add_test (tc, collective_arguments_reach_the_plan);
  tcase_add_test (tc, collective_of_a_non_tensor_is_an_error_naming_the_node);
  tcase_add_test (tc, small_graph_lowers_to_the_golden_plan);
  tcase_add_loop_test (tc, packed_buffers_never_overlap_while_both_live, 0, 4);
  tcase_add_test (tc, online_packing_places_buffers_as_the_tree_packer_did);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (codegen_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}

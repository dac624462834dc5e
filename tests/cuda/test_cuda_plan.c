/* test_cuda_plan.c: the CUDA backend's host-side logic, without a GPU.
 *
 * What check_plan accepts and rejects (naming the node) and the scratch it
 * plans per stream, the GEMM view classification, and the profiler's keys,
 * text and cache. Runs in CI (no CUDA call is made); argv[1] is tests/data.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder.h"
#include "cuda-private.h"
#include "estimate-private.h"
#include "profile-private.h"

static const char *data_dir = "tests/data";

/* ---- a hand-made plan: values with their own buffers ---- */

typedef struct {
  SgPlan p;
  SgPlanValue values[16];
  int64_t dims[16][2 * SG_PLAN_MAX_DIMS]; /* the values' shapes and strides */
  SgPlanBuffer buffers[16];
  SgPlanGroup group;
  int32_t partition[2];
} MiniPlan;

static void
mini_init (MiniPlan *m)
{
  memset (m, 0, sizeof *m);
  m->p.values = m->values;
  m->p.buffers = m->buffers;
  m->p.n_streams = 2;
  m->p.world_size = 2;
  m->partition[0] = 0;
  m->partition[1] = 1;
  m->group = (SgPlanGroup){ "0", 2, 1, m->partition };
  m->p.groups = &m->group;
  m->p.n_groups = 1;
}

/* A dense value of @dtype with @nd dims; returns its id. */
static int32_t
mini_value (MiniPlan *m, SgDtype dtype, int nd, const int64_t *shape)
{
  const int32_t v = m->p.n_values++;
  SgPlanValue *pv = &m->values[v];
  pv->name = (char *)"v";
  pv->dtype = dtype;
  pv->ndim = nd;
  pv->shape = m->dims[v];
  pv->stride = m->dims[v] + SG_PLAN_MAX_DIMS;
  int64_t s = 1;
  for (int k = nd - 1; k >= 0; k--) {
    pv->shape[k] = shape[k];
    pv->stride[k] = s;
    s *= shape[k];
  }
  pv->buffer = m->p.n_buffers++;
  m->buffers[pv->buffer].bytes = (uint64_t)s * sg_dtype_size (dtype);
  return v;
}

static SgPlanIns
kernel_ins (const char *name, SgOpKind op, const char *target, const char *args_json, int32_t *out,
            int n_out)
{
  SgPlanIns ins;
  memset (&ins, 0, sizeof ins);
  ins.kind = SG_INS_KERNEL;
  ins.name = (char *)name;
  ins.op = op;
  ins.target = (char *)target;
  ins.args = cJSON_Parse (args_json);
  ins.kwargs = cJSON_CreateObject ();
  ins.out = out;
  ins.n_out = n_out;
  return ins;
}

static void
ins_clear (SgPlanIns *ins)
{
  cJSON_Delete (ins->args);
  cJSON_Delete (ins->kwargs);
}

START_TEST (check_rejects_an_unknown_target_naming_the_node)
{
  MiniPlan m;
  mini_init (&m);
  const int64_t s[] = { 4, 4 };
  int32_t out = mini_value (&m, SG_DTYPE_BF16, 2, s);
  SgPlanIns ins =
    kernel_ins ("custom_7", SG_OP_UNKNOWN, "mylib.fused_thing.default", "[]", &out, 1);
  uint64_t need[2] = { 0, 0 };
  GError *error = NULL;
  ck_assert (!sg_cu_check_ins (&m.p, &ins, false, -1, need, &error));
  ck_assert_ptr_nonnull (strstr (error->message, "custom_7"));
  ck_assert_ptr_nonnull (strstr (error->message, "mylib.fused_thing.default"));
  g_error_free (error);
  ins_clear (&ins);
}
END_TEST

START_TEST (check_rejects_attention_with_dropout)
{
  MiniPlan m;
  mini_init (&m);
  const int64_t s[] = { 1, 4, 64, 32 };
  const int32_t q = mini_value (&m, SG_DTYPE_BF16, 4, s);
  int32_t out = mini_value (&m, SG_DTYPE_BF16, 4, s);
  char args[160];
  g_snprintf (args, sizeof args,
              "[{\"value\": %d}, {\"value\": %d}, {\"value\": %d}, 0.1, true, false]", q, q, q);
  SgPlanIns ins = kernel_ins ("sdpa_3", SG_OP_SDPA_FLASH, "f", args, &out, 1);
  uint64_t need[2] = { 0, 0 };
  GError *error = NULL;
  ck_assert (!sg_cu_check_ins (&m.p, &ins, false, -1, need, &error));
  ck_assert_ptr_nonnull (strstr (error->message, "sdpa_3"));
  ck_assert_ptr_nonnull (strstr (error->message, "dropout"));
  g_error_free (error);
  ins_clear (&ins);
}
END_TEST

/* A cudnn attention backward of q/k/v/out [1, 4, 128, 64] bf16, causal:
 * (dout, q, k, v, out, lse, seed, offset, bias, cq, ck, mq, mk, p, causal). */
static SgPlanIns
attention_backward_plan (MiniPlan *m, int32_t *outs)
{
  const int64_t s[] = { 1, 4, 128, 64 }, sl[] = { 1, 4, 128, 1 };
  int32_t ids[5];
  for (int i = 0; i < 5; i++)
    ids[i] = mini_value (m, SG_DTYPE_BF16, 4, s);
  const int32_t lse = mini_value (m, SG_DTYPE_F32, 4, sl);
  for (int i = 0; i < 3; i++)
    outs[i] = mini_value (m, SG_DTYPE_BF16, 4, s);
  char args[320];
  g_snprintf (args, sizeof args,
              "[{\"value\": %d}, {\"value\": %d}, {\"value\": %d}, {\"value\": %d}, "
              "{\"value\": %d}, {\"value\": %d}, null, null, null, null, null, 128, 128, 0.0, "
              "true]",
              ids[0], ids[1], ids[2], ids[3], ids[4], lse);
  return kernel_ins ("bwd", SG_OP_SDPA_CUDNN_BWD, "b", args, outs, 3);
}

START_TEST (check_plans_attention_backward_scratch_larger_in_exact_mode)
{
  MiniPlan m;
  mini_init (&m);
  int32_t outs[3];
  SgPlanIns ins = attention_backward_plan (&m, outs);
  uint64_t timing[2] = { 0, 0 }, exact[2] = { 0, 0 };
  GError *error = NULL;
  ck_assert (sg_cu_check_ins (&m.p, &ins, false, -1, timing, &error));
  ck_assert (sg_cu_check_ins (&m.p, &ins, true, -1, exact, &error));
  /* scores, dP (fp32) and P/dS of 4 x 128 x 128 at least */
  ck_assert_uint_ge (timing[0], 3ull * 4 * 128 * 128 * 4 / 2);
  ck_assert_uint_gt (exact[0], timing[0]);
  ck_assert_uint_eq (timing[1], 0);
  ins_clear (&ins);
}
END_TEST

START_TEST (attention_keeps_the_math_path_without_cudnn_and_says_why)
{
  MiniPlan m;
  mini_init (&m);
  int32_t outs[3];
  SgPlanIns ins = attention_backward_plan (&m, outs);
  m.p.ins = &ins;
  m.p.n_ins = 1;
  SgCuState st;
  memset (&st, 0, sizeof st);
  int32_t plan = 7;
  st.attn_plan = &plan;
  st.attn_why = g_strdup ("no libcudnn here");
  uint64_t need[2] = { 0, 0 }, math[2] = { 0, 0 };
  GError *error = NULL;
  ck_assert (sg_cu_prepare_ins (&st, &m.p, 0, need, &error));
  ck_assert (sg_cu_check_ins (&m.p, &ins, false, -1, math, &error));
  ck_assert_int_eq (plan, -1);
  ck_assert_int_eq (st.n_attn, 1);
  ck_assert_int_eq (st.n_attn_dnn, 0);
  ck_assert_uint_eq (need[0], math[0]);
  char *note = sg_cu_attention_note (&st);
  ck_assert_ptr_nonnull (strstr (note, "math path"));
  ck_assert_ptr_nonnull (strstr (note, "no libcudnn here"));
  g_free (note);
  /* SG_CUDA_ATTENTION=cudnn: an instruction cuDNN does not run is an error */
  g_setenv ("SG_CUDA_ATTENTION", "cudnn", TRUE);
  ck_assert (!sg_cu_prepare_ins (&st, &m.p, 0, need, &error));
  g_unsetenv ("SG_CUDA_ATTENTION");
  ck_assert_ptr_nonnull (strstr (error->message, "bwd"));
  g_error_free (error);
  free (st.attn_why);
  ins_clear (&ins);
}
END_TEST

START_TEST (attention_on_cudnn_needs_only_its_workspace)
{
  MiniPlan m;
  mini_init (&m);
  int32_t outs[3];
  SgPlanIns ins = attention_backward_plan (&m, outs);
  uint64_t math[2] = { 0, 0 }, dnn[2] = { 0, 0 };
  GError *error = NULL;
  ck_assert (sg_cu_check_ins (&m.p, &ins, false, -1, math, &error));
  ck_assert (sg_cu_check_ins (&m.p, &ins, false, 4096, dnn, &error));
  ck_assert_uint_ge (dnn[0], 4096);
  ck_assert_uint_lt (dnn[0], math[0] / 4); /* no scores, no cuBLAS workspace */
  ins_clear (&ins);
}
END_TEST

START_TEST (check_rejects_a_reduction_collective_nccl_cannot_reduce)
{
  MiniPlan m;
  mini_init (&m);
  const int64_t s[] = { 8, 4 }, so[] = { 4, 4 };
  int32_t in = mini_value (&m, SG_DTYPE_F8E4M3, 2, s);
  int32_t out = mini_value (&m, SG_DTYPE_F8E4M3, 2, so);
  SgPlanIns ins;
  memset (&ins, 0, sizeof ins);
  ins.kind = SG_INS_COLLECTIVE;
  ins.stream = 1;
  ins.name = (char *)"rs_2";
  ins.op = SG_OP_REDUCE_SCATTER;
  ins.in = &in;
  ins.n_in = 1;
  ins.out = &out;
  ins.n_out = 1;
  ins.reduce = SG_REDUCE_SUM;
  uint64_t need[2] = { 0, 0 };
  GError *error = NULL;
  ck_assert (!sg_cu_check_ins (&m.p, &ins, false, -1, need, &error));
  ck_assert_ptr_nonnull (strstr (error->message, "rs_2"));
  g_error_free (error);
}
END_TEST

START_TEST (check_stages_a_strided_collective_input_on_its_stream)
{
  MiniPlan m;
  mini_init (&m);
  const int64_t s[] = { 8, 16 }, so[] = { 16, 16 };
  int32_t in = mini_value (&m, SG_DTYPE_BF16, 2, s), out = mini_value (&m, SG_DTYPE_BF16, 2, so);
  SgPlanIns ins;
  memset (&ins, 0, sizeof ins);
  ins.kind = SG_INS_COLLECTIVE;
  ins.stream = 1;
  ins.name = (char *)"ag";
  ins.op = SG_OP_ALL_GATHER;
  ins.in = &in;
  ins.n_in = 1;
  ins.out = &out;
  ins.n_out = 1;
  uint64_t need[2] = { 0, 0 };
  GError *error = NULL;
  ck_assert (sg_cu_check_ins (&m.p, &ins, false, -1, need, &error));
  ck_assert_uint_eq (need[1], 0); /* dense: no staging */
  /* the input as a transposed view: staged */
  m.values[in].shape[0] = 16;
  m.values[in].shape[1] = 8;
  m.values[in].stride[0] = 1;
  m.values[in].stride[1] = 16;
  ck_assert (sg_cu_check_ins (&m.p, &ins, false, -1, need, &error));
  ck_assert_uint_ge (need[1], 8 * 16 * 2);
  ck_assert_uint_eq (need[0], 0);
}
END_TEST

START_TEST (check_accepts_permute_steps_and_sizes_their_flags)
{
  MiniPlan m;
  mini_init (&m);
  const int64_t s[] = { 8, 16 };
  int32_t in = mini_value (&m, SG_DTYPE_BF16, 2, s), out = mini_value (&m, SG_DTYPE_BF16, 2, s);
  int32_t pairs[] = { 0, 1, 1, 0 };
  SgPlanIns ins[2];
  memset (ins, 0, sizeof ins);
  for (int k = 0; k < 2; k++) {
    ins[k].kind = SG_INS_COLLECTIVE;
    ins[k].stream = 1;
    ins[k].name = (char *)"p";
    ins[k].op = SG_OP_COLLECTIVE_PERMUTE;
    ins[k].in = &in;
    ins[k].n_in = 1;
    ins[k].out = &out;
    ins[k].n_out = 1;
    ins[k].pairs = pairs;
    ins[k].n_pairs = 2;
    ins[k].transport = k ? SG_TRANSPORT_CE : SG_TRANSPORT_NCCL;
  }
  uint64_t need[2] = { 0, 0 };
  GError *error = NULL;
  ck_assert (sg_cu_check_ins (&m.p, &ins[0], false, -1, need, &error));
  ck_assert (sg_cu_check_ins (&m.p, &ins[1], false, -1, need, &error));
  ck_assert_uint_eq (need[1], 0);
  m.p.ins = ins;
  m.p.n_ins = 2;
  ck_assert_uint_eq (sg_cu_p2p_flag_bytes (&m.p), 2 * sizeof (uint32_t)); /* the ce step only */
}
END_TEST

/* ---- GEMM views ---- */

static SgCuTensor
view2 (int64_t r, int64_t c, int64_t rs, int64_t cs)
{
  SgCuTensor t;
  memset (&t, 0, sizeof t);
  t.dtype = SG_DTYPE_BF16;
  t.ndim = 2;
  t.shape[0] = r;
  t.shape[1] = c;
  t.stride[0] = rs;
  t.stride[1] = cs;
  return t;
}

START_TEST (gemm_stages_only_views_neither_row_nor_column_major)
{
  const SgCuTensor row = view2 (8, 16, 16, 1), col = view2 (16, 8, 1, 16);
  const SgCuTensor padded = view2 (8, 16, 32, 1), strided = view2 (8, 16, 32, 2);
  ck_assert_uint_eq (sg_cu_gemm_scratch_bytes (&row, &row), 0);
  ck_assert_uint_eq (sg_cu_gemm_scratch_bytes (&col, &padded), 0);
  ck_assert_uint_ge (sg_cu_gemm_scratch_bytes (&strided, &row), 8 * 16 * 2);
}
END_TEST

/* ---- profile keys, text and cache ---- */

static SgGraph *
load_sample (const char *name)
{
  char *path = g_build_filename (data_dir, name, NULL);
  GError *error = NULL;
  SgGraph *g = sg_graph_load (path, &error);
  ck_assert_msg (g != NULL, "%s: %s", path, error ? error->message : "");
  g_free (path);
  return g;
}

/* Distinct keys of @g, sorted as the profiler sorts them. */
static GPtrArray *
graph_keys (SgGraph *g, GHashTable **by_key)
{
  GPtrArray *keys = g_ptr_array_new_with_free_func (sg_cu_prof_key_free);
  *by_key = g_hash_table_new (g_str_hash, g_str_equal);
  for (SgNodeId id = 0; id < g->n_nodes; id++) {
    Key tmp = { 0 };
    if (!sg_cu_prof_node_key (g, id, 1, &tmp))
      continue;
    if (g_hash_table_contains (*by_key, tmp.key)) {
      g_free (tmp.key);
      g_free (tmp.json);
      continue;
    }
    Key *k = g_memdup2 (&tmp, sizeof tmp);
    k->node = id;
    k->us = -1;
    g_ptr_array_add (keys, k);
    g_hash_table_insert (*by_key, k->key, k);
  }
  g_ptr_array_sort (keys, sg_cu_prof_key_cmp);
  return keys;
}

/* @text read back through the cache into @g's keys (an H200 profile of
 * @world ranks) and written again; the cache's hits in *@n_cached, its
 * contention section in *@contention (transfer full, NULL: none). */
static char *
through_cache (SgGraph *g, const char *text, int32_t world, int *n_cached, char **contention)
{
  GHashTable *by_key;
  GPtrArray *keys = graph_keys (g, &by_key);
  *n_cached = 0;
  *contention = NULL;
  sg_cu_prof_read_cache (text, strlen (text), "NVIDIA H200", world, keys, by_key, 1, n_cached,
                         contention);
  g_ptr_array_sort (keys, sg_cu_prof_key_cmp);
  char *again = sg_cu_prof_profile_text (keys, "NVIDIA H200", world, *contention);
  g_hash_table_unref (by_key);
  g_ptr_array_unref (keys);
  return again;
}

START_TEST (profile_keys_are_the_distinct_shapes_of_the_graph)
{
  SgGraph *g = load_sample ("w2_tiny_tp2_L2_h256.json");
  GHashTable *by_key;
  GPtrArray *keys = graph_keys (g, &by_key);
  int n[4] = { 0, 0, 0, 0 };
  for (guint i = 0; i < keys->len; i++) {
    const Key *k = keys->pdata[i];
    n[k->fam]++;
    if (i > 0)
      ck_assert_int_le (sg_cu_prof_key_cmp (&keys->pdata[i - 1], &keys->pdata[i]), 0);
  }
  /* counted from the JSON: 6 mm shapes, cudnn fwd + bwd, one all_gather
   * and one reduce_scatter size, 25 (target, bytes) of other ops */
  ck_assert_int_eq (n[FAM_GEMM], 6);
  ck_assert_int_eq (n[FAM_ATTN], 2);
  ck_assert_int_eq (n[FAM_COLL], 2);
  ck_assert_int_eq (n[FAM_OPS], 25);
  g_hash_table_unref (by_key);
  g_ptr_array_unref (keys);
  sg_graph_free (g);
}
END_TEST

START_TEST (profile_text_reads_back_through_the_cache_identically)
{
  SgGraph *g = load_sample ("w2_tiny_tp2_L2_h256.json");
  GHashTable *by_key;
  GPtrArray *keys = graph_keys (g, &by_key);
  for (guint i = 0; i < keys->len; i++)
    ((Key *)keys->pdata[i])->us = 1.5 + i;
  char *text = sg_cu_prof_profile_text (keys, "NVIDIA H200", 2, NULL);
  /* the cost model's loader accepts it */
  cJSON *root = cJSON_Parse (text);
  ck_assert_ptr_nonnull (root);
  ck_assert_str_eq (cJSON_GetObjectItem (root, "format")->valuestring, "schedgraph.profile");
  cJSON_Delete (root);

  int cached = 0;
  char *contention = NULL;
  char *again = through_cache (g, text, 2, &cached, &contention);
  ck_assert_int_eq (cached, (int)keys->len);
  ck_assert_ptr_null (contention);
  ck_assert_str_eq (again, text);

  /* another device: nothing is taken */
  GHashTable *by_key3;
  GPtrArray *other = graph_keys (g, &by_key3);
  cached = 0;
  sg_cu_prof_read_cache (text, strlen (text), "NVIDIA H100", 2, other, by_key3, 1, &cached,
                         &contention);
  ck_assert_int_eq (cached, 0);
  for (guint i = 0; i < other->len; i++)
    ck_assert (((Key *)other->pdata[i])->us < 0);

  g_free (text);
  g_free (again);
  g_hash_table_unref (by_key);
  g_hash_table_unref (by_key3);
  g_ptr_array_unref (keys);
  g_ptr_array_unref (other);
  sg_graph_free (g);
}
END_TEST

/* The contention section: written entries load in the cost model (every
 * field where estimate/profile.c reads it), come back through the cache
 * unchanged, and make the profile version 2. */
START_TEST (contention_entries_load_in_the_cost_model_and_survive_the_cache)
{
  SgGraph *g = load_sample ("w2_tiny_tp2_L2_h256.json");
  GHashTable *by_key;
  GPtrArray *keys = graph_keys (g, &by_key);
  const Key *coll = NULL, *gemm = NULL;
  for (guint i = 0; i < keys->len; i++) {
    Key *k = keys->pdata[i];
    k->us = 10.0 + i;
    if (k->fam == FAM_COLL && !coll)
      coll = k;
    if (k->fam == FAM_GEMM && !gemm)
      gemm = k;
  }
  ck_assert (coll && gemm);
  double vec[SG_CU_CONTENTION_VEC] = { 100.0004, 50.25 };
  for (int o = 0; o < 2; o++) {
    double *x = vec + 2 + o * (2 + SG_CU_CONTENTION_MAX_REPS);
    x[0] = o ? 50.0 : 0.0;
    x[1] = 120.0;
    for (int r = 0; r < 3; r++)
      x[2 + r] = 100.0 + 10.0 * (r == 1);
  }
  GString *entries = g_string_new (NULL);
  sg_cu_prof_contention_entries (entries, coll, SG_KERNEL_GEMM, gemm->key, 1, 3, vec);
  char *text = sg_cu_prof_profile_text (keys, "NVIDIA H200", 2, entries->str);
  GError *err = NULL;
  SgProfile *p = sg_profile_load_data (text, strlen (text), "mem", 2, &err);
  ck_assert_msg (p != NULL, "%s", err ? err->message : "");
  size_t n = 0;
  const SgContentionSample *s = sg_profile_contention (p, &n);
  ck_assert_int_eq ((int)n, 2);
  ck_assert (!s[0].kernel_first && s[1].kernel_first);
  ck_assert_int_eq (s[0].klass, SG_KERNEL_GEMM);
  ck_assert_str_eq (s[0].kernel_key, gemm->key);
  ck_assert_int_eq (s[0].n_reps, 3);
  ck_assert (s[0].rep_solo_us == 100.0 && s[0].comm_solo_us == 50.25); /* 0.001 us */
  ck_assert (s[1].lag_us == 50.0 && s[1].reps_us[1] == 110.0);
  sg_profile_free (p);

  int cached = 0;
  char *contention = NULL;
  char *again = through_cache (g, text, 2, &cached, &contention);
  ck_assert_str_eq (contention, entries->str);
  ck_assert_str_eq (again, text);
  ck_assert (strstr (text, "\"version\": 2") != NULL);
  g_free (contention);
  g_free (again);
  g_free (text);
  g_string_free (entries, TRUE);
  g_hash_table_unref (by_key);
  g_ptr_array_unref (keys);
  sg_graph_free (g);
}
END_TEST

/* Every kernel entry keeps each rank's time (us_by_rank, us their median);
 * collectives do not. The cost model's reader takes the text, the cache
 * keeps the times, and a cached list of the wrong length is dropped. */
START_TEST (profile_keeps_each_ranks_kernel_time)
{
  SgGraph *g = load_sample ("w2_tiny_tp2_L2_h256.json");
  GHashTable *by_key;
  GPtrArray *keys = graph_keys (g, &by_key);
  for (guint i = 0; i < keys->len; i++) {
    Key *k = keys->pdata[i];
    k->us = 10.0 + i;
    if (k->fam != FAM_COLL) {
      k->n_by_rank = 2;
      k->us_by_rank = g_new (double, 2);
      k->us_by_rank[0] = k->us - 0.5, k->us_by_rank[1] = k->us + 0.5;
    }
  }
  char *text = sg_cu_prof_profile_text (keys, "NVIDIA H200", 2, NULL);
  cJSON *root = cJSON_Parse (text);
  const cJSON *mm = cJSON_GetArrayItem (cJSON_GetObjectItem (root, "gemm"), 0);
  const cJSON *by = cJSON_GetObjectItem (mm, "us_by_rank");
  ck_assert_int_eq (cJSON_GetArraySize (by), 2);
  ck_assert_double_eq_tol (cJSON_GetArrayItem (by, 1)->valuedouble,
                           cJSON_GetObjectItem (mm, "us")->valuedouble + 0.5, 1e-9);
  const cJSON *coll = cJSON_GetArrayItem (cJSON_GetObjectItem (root, "collectives"), 0);
  ck_assert_ptr_null (cJSON_GetObjectItem (coll, "us_by_rank"));
  cJSON_Delete (root);
  GError *err = NULL;
  SgProfile *p = sg_profile_load_data (text, strlen (text), "mem", 2, &err);
  ck_assert_msg (p != NULL, "%s", err ? err->message : "");
  sg_profile_free (p);

  int cached = 0;
  char *contention = NULL;
  char *again = through_cache (g, text, 2, &cached, &contention);
  ck_assert_str_eq (again, text);
  /* a world of 3 reading it: the lists of 2 are not kept */
  GHashTable *by_key3;
  GPtrArray *three = graph_keys (g, &by_key3);
  char *text3 = g_strdup (text);
  memcpy (strstr (text3, "\"world_size\": 2"), "\"world_size\": 3", 15);
  sg_cu_prof_read_cache (text3, strlen (text3), "NVIDIA H200", 3, three, by_key3, 1, &cached,
                         &contention);
  for (guint i = 0; i < three->len; i++) {
    const Key *k = three->pdata[i];
    ck_assert (k->us > 0 && k->us_by_rank == NULL && k->n_by_rank == 0);
  }
  g_free (text);
  g_free (text3);
  g_free (again);
  g_hash_table_unref (by_key);
  g_hash_table_unref (by_key3);
  g_ptr_array_unref (keys);
  g_ptr_array_unref (three);
  sg_graph_free (g);
}
END_TEST

START_TEST (profile_keys_addmm_by_its_matrix_operands)
{
  SgGraph *g = tb_new (2);
  tb_input (g, "bias", "bfloat16", 1, 48);
  tb_input (g, "a", "bfloat16", 2, 32, 64);
  tb_input (g, "b", "bfloat16", 2, 64, 48);
  const SgNodeId id = tb_node (
    g, "{\"name\": \"addmm\", \"op\": \"call_function\", \"target\": \"aten.addmm.default\", "
       "\"args\": [{\"node\": \"bias\"}, {\"node\": \"a\"}, {\"node\": \"b\"}], \"kwargs\": {}, "
       "\"meta\": {\"shape\": [32, 48], \"stride\": [48, 1], \"dtype\": \"bfloat16\"}}");
  Key k = { 0 };
  ck_assert (sg_cu_prof_node_key (g, id, 1, &k));
  ck_assert_int_eq (k.fam, FAM_GEMM);
  ck_assert_str_eq (k.key, "addmm|bfloat16|1|32|48|64");
  ck_assert_ptr_nonnull (strstr (k.json, "\"m\": 32, \"n\": 48, \"k\": 64"));
  g_free (k.key);
  g_free (k.json);
  sg_graph_free (g);
}
END_TEST

/* ---- launcher and NCCL mappings ---- */

START_TEST (local_rank_comes_from_the_launcher_environment)
{
  g_unsetenv ("OMPI_COMM_WORLD_LOCAL_RANK");
  g_setenv ("MPI_LOCALRANKID", "5", TRUE);
  ck_assert_int_eq (sg_cu_local_rank (MPI_COMM_NULL), 5);
  g_setenv ("OMPI_COMM_WORLD_LOCAL_RANK", "3", TRUE); /* OpenMPI's wins */
  ck_assert_int_eq (sg_cu_local_rank (MPI_COMM_NULL), 3);
  g_unsetenv ("OMPI_COMM_WORLD_LOCAL_RANK");
  g_unsetenv ("MPI_LOCALRANKID");
}
END_TEST

START_TEST (nccl_reduces_the_float_types_and_not_fp8)
{
  ncclDataType_t t;
  ck_assert (sg_cu_nccl_type (SG_DTYPE_BF16, &t) && t == ncclBfloat16);
  ck_assert (sg_cu_nccl_type (SG_DTYPE_F16, &t) && t == ncclFloat16);
  ck_assert (sg_cu_nccl_type (SG_DTYPE_F32, &t) && t == ncclFloat32);
  ck_assert (sg_cu_nccl_type (SG_DTYPE_I64, &t) && t == ncclInt64);
  ck_assert (!sg_cu_nccl_type (SG_DTYPE_F8E4M3, &t));
}
END_TEST

static Suite *
suite (void)
{
  Suite *s = suite_create ("cuda-host");
  TCase *tc = tcase_create ("plan");
  tcase_add_test (tc, check_rejects_an_unknown_target_naming_the_node);
  tcase_add_test (tc, check_rejects_attention_with_dropout);
  tcase_add_test (tc, check_plans_attention_backward_scratch_larger_in_exact_mode);
  tcase_add_test (tc, attention_keeps_the_math_path_without_cudnn_and_says_why);
  tcase_add_test (tc, attention_on_cudnn_needs_only_its_workspace);
  tcase_add_test (tc, check_rejects_a_reduction_collective_nccl_cannot_reduce);
  tcase_add_test (tc, check_stages_a_strided_collective_input_on_its_stream);
  tcase_add_test (tc, check_accepts_permute_steps_and_sizes_their_flags);
  tcase_add_test (tc, gemm_stages_only_views_neither_row_nor_column_major);
  tcase_add_test (tc, profile_keys_are_the_distinct_shapes_of_the_graph);
  tcase_add_test (tc, profile_text_reads_back_through_the_cache_identically);
  tcase_add_test (tc, profile_keeps_each_ranks_kernel_time);
  tcase_add_test (tc, profile_keys_addmm_by_its_matrix_operands);
  tcase_add_test (tc, contention_entries_load_in_the_cost_model_and_survive_the_cache);
  tcase_add_test (tc, local_rank_comes_from_the_launcher_environment);
  tcase_add_test (tc, nccl_reduces_the_float_types_and_not_fp8);
  suite_add_tcase (s, tc);
  return s;
}

int
main (int argc, char **argv)
{
  if (argc > 1)
    data_dir = argv[1];
  SRunner *sr = srunner_create (suite ());
  srunner_run_all (sr, CK_NORMAL);
  const int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? 0 : 1;
}

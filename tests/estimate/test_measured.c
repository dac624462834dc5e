/* test_measured.c: the model against our own measurements
 * (tests/estimate/measure/measure_h200.py; data in tests/estimate/data/):
 * 2x H200 collectives, GEMMs and SDPA, one H100, and the overlap
 * interference behind the contention defaults. */
#include "est-test.h"

#include <math.h>

/* The bf16 SDPA shape of one "attention" row of the measurements (op unset). */
static SgShape
attention_shape (const cJSON *r)
{
  return (SgShape){ .dtype = SG_DTYPE_BF16,
                    .batch = (int64_t)cJSON_GetObjectItem (r, "batch")->valuedouble,
                    .heads = (int64_t)cJSON_GetObjectItem (r, "heads")->valuedouble,
                    .seq_q = (int64_t)cJSON_GetObjectItem (r, "seq_q")->valuedouble,
                    .seq_kv = (int64_t)cJSON_GetObjectItem (r, "seq_kv")->valuedouble,
                    .head_dim = (int64_t)cJSON_GetObjectItem (r, "head_dim")->valuedouble,
                    .causal = cJSON_IsTrue (cJSON_GetObjectItem (r, "causal")) };
}

/* Out-of-sample: our own 2x H200 measurements (tests/estimate/measure/,
 * eager PyTorch 2.11, NCCL 2.28.9, back-to-back CUDA-event timing):
 * every bf16 mm within 15% (bmm 20%), every collective kind with a shard >= 16 MiB
 * within 25% (the small ones carry torch.distributed's own overhead). */
START_TEST (model_matches_the_torch_measurements_on_h200)
{
  cJSON *root = est_load_json (SG_TEST_ESTIMATE_DATA, "measure_h200x2.json");
  SgCluster c;
  ck_assert (sg_cluster_preset ("h200-sxm", &c));
  const cJSON *r;
  int n_mm = 0, n_coll = 0;
  cJSON_ArrayForEach (r, cJSON_GetObjectItem (root, "gemm"))
  {
    const char *op = cJSON_GetObjectItem (r, "op")->valuestring;
    const char *dt = cJSON_GetObjectItem (r, "dtype")->valuestring;
    double b = cJSON_GetObjectItem (r, "batch")->valuedouble;
    double m = cJSON_GetObjectItem (r, "m")->valuedouble;
    double k = cJSON_GetObjectItem (r, "k")->valuedouble;
    double n = cJSON_GetObjectItem (r, "n")->valuedouble;
    double us = cJSON_GetObjectItem (r, "us")->valuedouble;
    if (strcmp (dt, "bfloat16") != 0)
      continue;
    double model =
      sg_compute_gemm_us (&c, SG_DTYPE_BF16, 2 * b * m * n * k, b * (m * k + k * n + m * n) * 2);
    /* bmm 32 x 2048 x 128 x 2048 (k = 128) is bound by writing its output,
     * which cuBLAS does at ~72% of HBM bandwidth, not the 87% of pointwise
     * kernels: -16%, the model's known worst case here */
    double tol = strcmp (op, "bmm") == 0 ? 0.2 : 0.15;
    ck_assert_msg (fabs (rel_err (model, us)) <= tol, "%s %gx%gx%gx%g: model %.1f, measured %.1f",
                   op, b, m, k, n, model, us);
    n_mm++;
  }
  static const struct {
    const char *key;
    SgOpKind kind;
    int shards; /* comm bytes = shards x shard */
  } kinds[] = {
    { "all_gather_us", SG_OP_ALL_GATHER, 2 },     { "reduce_scatter_us", SG_OP_REDUCE_SCATTER, 2 },
    { "all_reduce_us", SG_OP_ALL_REDUCE, 1 },     { "all_to_all_us", SG_OP_ALL_TO_ALL, 1 },
    { "broadcast_us", SG_OP_BROADCAST, 1 },
  };
  cJSON_ArrayForEach (r, cJSON_GetObjectItem (root, "collectives"))
  {
    double shard = cJSON_GetObjectItem (r, "shard_bytes")->valuedouble;
    if (shard < 16 << 20)
      continue;
    for (size_t i = 0; i < G_N_ELEMENTS (kinds); i++) {
      double us = cJSON_GetObjectItem (r, kinds[i].key)->valuedouble;
      double model = sg_nccl_time (&c, kinds[i].kind, (uint64_t)(shard * kinds[i].shards), 2, 1).us;
      ck_assert_msg (fabs (rel_err (model, us)) <= 0.25, "%s shard %g: model %.1f, measured %.1f",
                     kinds[i].key, shard, model, us);
      n_coll++;
    }
    double us = cJSON_GetObjectItem (r, "sendrecv_us")->valuedouble;
    double model = sg_nccl_p2p_time (&c, (uint64_t)shard, true);
    ck_assert_msg (fabs (rel_err (model, us)) <= 0.25,
                   "sendrecv shard %g: model %.1f, measured %.1f", shard, model, us);
    n_coll++;
  }
  ck_assert_int_eq (n_mm, 14);
  ck_assert_int_eq (n_coll, 4 * 6);
  cJSON_Delete (root);
}
END_TEST

/* SDPA forward and backward, three backends, against the same
 * measurements: shapes of >= 100 GFLOP within 20%. */
START_TEST (attention_matches_the_torch_measurements_on_h200)
{
  cJSON *root = est_load_json (SG_TEST_ESTIMATE_DATA, "measure_h200x2.json");
  SgCluster c;
  ck_assert (sg_cluster_preset ("h200-sxm", &c));
  static const struct {
    const char *name;
    SgOpKind fwd, bwd;
  } ops[] = {
    { "sdpa_flash", SG_OP_SDPA_FLASH, SG_OP_SDPA_FLASH_BWD },
    { "sdpa_efficient", SG_OP_SDPA_EFFICIENT, SG_OP_SDPA_EFFICIENT_BWD },
    { "sdpa_cudnn", SG_OP_SDPA_CUDNN, SG_OP_SDPA_CUDNN_BWD },
  };
  const cJSON *r;
  int checked = 0;
  cJSON_ArrayForEach (r, cJSON_GetObjectItem (root, "attention"))
  {
    const char *op = cJSON_GetObjectItem (r, "op")->valuestring;
    for (size_t i = 0; i < G_N_ELEMENTS (ops); i++) {
      if (strcmp (op, ops[i].name) != 0)
        continue;
      SgShape s = attention_shape (r);
      for (int bwd = 0; bwd < 2; bwd++) {
        double us = cJSON_GetObjectItem (r, bwd ? "bwd_us" : "fwd_us")->valuedouble;
        s.op = bwd ? ops[i].bwd : ops[i].fwd;
        double model = sg_compute_shape_us (&c, &s);
        /* small shapes (< 100 GFLOP forward) measure eager PyTorch's
         * dispatch (34-108 us forward floors), and autograd's backward */
        double f = 4.0 * (double)(s.batch * s.heads * s.seq_q * s.seq_kv * s.head_dim) *
                   (s.causal ? 0.5 : 1.0);
        if (f < 100e9)
          continue;
        ck_assert_msg (fabs (rel_err (model, us)) <= 0.2,
                       "%s%s %ldx%ldx%ldx%ld: model %.0f, measured %.0f", op,
                       bwd ? "_backward" : "", (long)s.batch, (long)s.heads, (long)s.seq_q,
                       (long)s.head_dim, model, us);
        checked++;
      }
    }
  }
  ck_assert_int_eq (checked, 18);
  cJSON_Delete (root);
}
END_TEST

/* The h100-sxm preset (the H200's compute model with the H100's HBM)
 * against one H100 (tests/estimate/data/measure_h100.json, same script):
 * bf16 GEMMs of >= 10 GFLOP within 15%, large-shape SDPA within 20%. */
START_TEST (h100_preset_matches_the_h100_measurements)
{
  cJSON *root = est_load_json (SG_TEST_ESTIMATE_DATA, "measure_h100.json");
  ck_assert (strstr (cJSON_GetObjectItem (root, "device")->valuestring, "H100") != NULL);
  SgCluster c;
  ck_assert (sg_cluster_preset ("h100-sxm", &c));
  const cJSON *r;
  int checked = 0;
  cJSON_ArrayForEach (r, cJSON_GetObjectItem (root, "gemm"))
  {
    if (strcmp (cJSON_GetObjectItem (r, "dtype")->valuestring, "bfloat16") != 0)
      continue;
    double b = cJSON_GetObjectItem (r, "batch")->valuedouble;
    double m = cJSON_GetObjectItem (r, "m")->valuedouble;
    double k = cJSON_GetObjectItem (r, "k")->valuedouble;
    double n = cJSON_GetObjectItem (r, "n")->valuedouble;
    double us = cJSON_GetObjectItem (r, "us")->valuedouble;
    double f = 2 * b * m * n * k;
    if (f < 10e9)
      continue;
    double model = sg_compute_gemm_us (&c, SG_DTYPE_BF16, f, b * (m * k + k * n + m * n) * 2);
    ck_assert_msg (fabs (rel_err (model, us)) <= 0.15, "%gx%gx%gx%g: model %.1f, measured %.1f", b,
                   m, k, n, model, us);
    checked++;
  }
  cJSON_ArrayForEach (r, cJSON_GetObjectItem (root, "attention"))
  {
    const char *op = cJSON_GetObjectItem (r, "op")->valuestring;
    SgOpKind fwd = strcmp (op, "sdpa_flash") == 0       ? SG_OP_SDPA_FLASH
                   : strcmp (op, "sdpa_efficient") == 0 ? SG_OP_SDPA_EFFICIENT
                                                        : SG_OP_SDPA_CUDNN;
    SgShape s = attention_shape (r);
    double f = 4.0 * (double)(s.batch * s.heads * s.seq_q * s.seq_kv * s.head_dim) *
               (s.causal ? 0.5 : 1.0);
    if (f < 100e9)
      continue;
    for (int bwd = 0; bwd < 2; bwd++) {
      s.op = bwd ? (SgOpKind)(fwd + 1) : fwd; /* ops.h: each backward follows its forward */
      double us = cJSON_GetObjectItem (r, bwd ? "bwd_us" : "fwd_us")->valuedouble;
      double model = sg_compute_shape_us (&c, &s);
      ck_assert_msg (fabs (rel_err (model, us)) <= 0.2, "%s%s: model %.0f, measured %.0f", op,
                     bwd ? "_backward" : "", model, us);
      checked++;
    }
  }
  ck_assert_int_eq (checked, 11 + 18);
  cJSON_Delete (root);
}
END_TEST

/* tests/estimate/data/interference_h200x2.json: 8192^3 bf16 GEMM chains
 * beside an all_gather over 2 H200s, the all_gather issued first
 * (comm_first) or while the first GEMM runs (compute_first), each paired
 * with solo runs of both. */
START_TEST (contention_defaults_match_the_interference_measurements)
{
  g_autoptr (SgGraph) g = est_graph (2);
  tb_input (g, "x", "bfloat16", 1, I64 (8));
  tb_output (g, 1, "x");
  est_run (g, NULL, NULL);
  const SgCostModel *cm = sg_graph_cost_model (g);
  const SgContention *ct = sg_cost_model_contention (cm);
  cJSON *root = est_load_json (SG_TEST_ESTIMATE_DATA, "interference_h200x2.json");
  const cJSON *r;
  double extra = 0.0, overlap = 0.0, lo = 1e9, hi = 0.0;
  int waits = 0;
  cJSON_ArrayForEach (r, cJSON_GetObjectItem (root, "interference"))
  {
    const char *order = cJSON_GetObjectItem (r, "order")->valuestring;
    double shard = cJSON_GetObjectItem (r, "shard_bytes")->valuedouble;
    double ag_o = cJSON_GetObjectItem (r, "ag_overlapped_us")->valuedouble;
    double ag_s = cJSON_GetObjectItem (r, "ag_solo_us")->valuedouble;
    double mm_s = cJSON_GetObjectItem (r, "mm_solo_us")->valuedouble;
    double n_mm = cJSON_GetObjectItem (r, "mm_8192")->valuedouble;
    if (strcmp (order, "comm_first") == 0 && shard >= 64 << 20) {
      /* beside GEMMs, once it runs, the all_gather is barely slower ... */
      lo = MIN (lo, ag_o / ag_s);
      hi = MAX (hi, ag_o / ag_s);
      /* ... and the GEMMs lose mm_extra over the overlap */
      extra += cJSON_GetObjectItem (r, "mm_extra_us")->valuedouble;
      overlap += ag_o;
    } else if (strcmp (order, "compute_first") == 0) {
      /* issued behind a running GEMM it waits for it (comm_start_wait 1):
       * its time beyond its solo time is about one GEMM */
      double wait = ag_o - ag_s * ct->comm_slowdown;
      double gemm = mm_s / n_mm;
      ck_assert_msg (wait > 0.5 * gemm * sg_cost_model_comm_start_wait (cm) && wait < 1.3 * gemm,
                     "waited %.0f us, one GEMM is %.0f us", wait, gemm);
      waits++;
    }
  }
  ck_assert_msg (ct->comm_slowdown >= lo - 0.01 && ct->comm_slowdown <= hi + 0.02,
                 "comm_slowdown %.2f outside the measured %.2f..%.2f", ct->comm_slowdown, lo, hi);
  /* rate reading: the GEMMs run at 1/s during the overlap */
  double s = 1.0 / (1.0 - extra / overlap);
  ck_assert_msg (fabs (ct->compute_slowdown - s) < 0.05, "compute_slowdown %.2f, measured %.2f",
                 ct->compute_slowdown, s);
  ck_assert_int_eq (waits, 6);
  cJSON_Delete (root);
}
END_TEST

/* Median over @plan's collectives of @kind with >= 1 MiB of measured /
 * predicted duration (the predicted one includes the start wait and the
 * slowdown then in force, as the measured one includes both). */
static double
median_ratio (const cJSON *plan, const char *kind)
{
  double v[256];
  int n = 0;
  const cJSON *c;
  cJSON_ArrayForEach (c, cJSON_GetObjectItem (plan, "collectives"))
  {
    const double bytes = cJSON_GetArrayItem (c, 1)->valuedouble;
    const double dur = cJSON_GetArrayItem (c, 4)->valuedouble - cJSON_GetArrayItem (c, 3)->valuedouble;
    if (strcmp (cJSON_GetArrayItem (c, 0)->valuestring, kind) == 0 && bytes >= 1 << 20 && dur > 0 &&
        n < 256)
      v[n++] = cJSON_GetArrayItem (c, 5)->valuedouble / dur;
  }
  ck_assert_int_gt (n, 0);
  for (int i = 1; i < n; i++) /* insertion sort: a few dozen values */
    for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
      const double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* tests/estimate/data/overlap_h200x2.json: schedrun's timing runs on 2x
 * H200 of the input order (collectives mostly alone) and of our schedule
 * (collectives beside compute) of three graphs, twice. Per graph, how much
 * longer a collective ran against its prediction in the schedule than in
 * the input order is the contention the model missed: reduce_scatters
 * 1.09-1.47x (geometric mean 1.23) on top of the 1.05 then in force, all_gathers none. */
START_TEST (reduce_slowdown_matches_the_runtime_measurements)
{
  g_autoptr (SgGraph) g = est_graph (2);
  tb_input (g, "x", "bfloat16", 1, I64 (8));
  tb_output (g, 1, "x");
  est_run (g, NULL, NULL);
  const SgContention *ct = sg_cost_model_contention (sg_graph_cost_model (g));
  cJSON *root = est_load_json (SG_TEST_ESTIMATE_DATA, "overlap_h200x2.json");
  const cJSON *with = cJSON_GetObjectItem (root, "predicted_with");
  const double then_reduce = cJSON_GetObjectItem (with, "reduce_slowdown")->valuedouble;
  const double then_comm = cJSON_GetObjectItem (with, "comm_slowdown")->valuedouble;
  const cJSON *runs = cJSON_GetObjectItem (root, "runs");
  double log_rs = 0, worst_ag = 0;
  int pairs = 0;
  for (int i = 0; i + 1 < cJSON_GetArraySize (runs); i += 2) {
    const cJSON *in = cJSON_GetArrayItem (runs, i), *sc = cJSON_GetArrayItem (runs, i + 1);
    ck_assert_str_eq (cJSON_GetObjectItem (in, "plan")->valuestring, "input");
    ck_assert_str_eq (cJSON_GetObjectItem (sc, "plan")->valuestring, "sched");
    log_rs += log (median_ratio (sc, "reduce_scatter") / median_ratio (in, "reduce_scatter"));
    worst_ag = MAX (worst_ag, median_ratio (sc, "all_gather") / median_ratio (in, "all_gather"));
    pairs++;
  }
  ck_assert_int_eq (pairs, 6);
  const double reduce = then_reduce * exp (log_rs / pairs);
  ck_assert_msg (fabs (ct->reduce_slowdown - reduce) < 0.03, "reduce_slowdown %.3f, measured %.3f",
                 ct->reduce_slowdown, reduce);
  /* beside our kernels all_gathers run no slower than comm_slowdown says */
  ck_assert_msg (then_comm * worst_ag <= ct->comm_slowdown + 0.05,
                 "all_gather overlapped %.2fx, comm_slowdown %.2f", then_comm * worst_ag,
                 ct->comm_slowdown);
  cJSON_Delete (root);
}
END_TEST

static Suite *
suite (void)
{
  Suite *s = suite_create ("estimate-measured");
  TCase *tc = tcase_create ("measured");
  tcase_add_test (tc, model_matches_the_torch_measurements_on_h200);
  tcase_add_test (tc, attention_matches_the_torch_measurements_on_h200);
  tcase_add_test (tc, h100_preset_matches_the_h100_measurements);
  tcase_add_test (tc, contention_defaults_match_the_interference_measurements);
  tcase_add_test (tc, reduce_slowdown_matches_the_runtime_measurements);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  return est_run_suite (suite ());
}

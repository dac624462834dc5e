/* test_inputs.c: cluster presets and files, profiles (exact, interpolated,
 * errors), precedence graph cost_us > profile > model. */
#include "est-test.h"

#include <math.h>

/* x [m,k] @ w [k,n] in bf16, then an all_gather and an all_reduce of 1 MiB
 * and 4 MiB per rank over group "0" of 2 ranks. */
static SgGraph *
small_graph (int64_t m, int64_t k, int64_t n, const char *cluster_json)
{
  SgGraph *g = est_graph (2);
  if (cluster_json)
    g->cluster_json = g_strdup (cluster_json);
  tb_input (g, "x", "bfloat16", 2, m, k);
  tb_input (g, "w", "bfloat16", 2, k, n);
  tb_input (g, "s", "bfloat16", 2, I64 (512), I64 (1024));  /* 1 MiB */
  tb_input (g, "b", "bfloat16", 2, I64 (1024), I64 (2048)); /* 4 MiB */
  tb_mm (g, "mm", "x", "w");
  tb_all_gather (g, "ag", "s", "0");
  tb_all_reduce (g, "ar", "b", "0");
  tb_pointwise (g, "silu", "aten.silu.default", "b", NULL);
  tb_output (g, 4, "mm", "ag", "ar", "silu");
  return g;
}

static const SgNode *
node (SgGraph *g, const char *name)
{
  SgNodeId id = sg_graph_lookup (g, name);
  ck_assert (id != SG_NO_NODE);
  return &g->nodes[id];
}

START_TEST (presets_differ_where_the_hardware_does)
{
  g_autoptr (SgGraph) h200 = small_graph (4096, 4096, 4096, NULL);
  g_autoptr (SgGraph) h100 = small_graph (4096, 4096, 4096, NULL);
  g_autoptr (SgGraph) a100 = small_graph (4096, 4096, 4096, NULL);
  est_run (h200, "h200-sxm", NULL);
  est_run (h100, "h100-sxm", NULL);
  est_run (a100, "A100-SXM", NULL); /* names are case-insensitive */
  ck_assert_str_eq (sg_cost_model_cluster_name (sg_graph_cost_model (h100)), "h100-sxm");
  /* same tensor cores, less HBM bandwidth */
  ck_assert_double_eq_tol (node (h100, "mm")->est_us, node (h200, "mm")->est_us, 1e-9);
  ck_assert (sg_compute_bytes_us (&sg_graph_cost_model (h100)->cluster, 1e9) >
             sg_compute_bytes_us (&sg_graph_cost_model (h200)->cluster, 1e9));
  /* A100: a third of the flops, slower NVLink */
  ck_assert (node (a100, "mm")->est_us > 2.5 * node (h200, "mm")->est_us);
  ck_assert (node (a100, "ag")->est_us > node (h200, "ag")->est_us);
  for (const char *const *p = sg_cluster_preset_names (); *p; p++) {
    SgCluster c;
    ck_assert (sg_cluster_preset (*p, &c));
    ck_assert_int_eq (c.gpus_per_node, 8);
    ck_assert (c.net_nic_GBps > 0 && c.nics_per_node == 8);
  }
}
END_TEST

START_TEST (graph_cluster_picks_the_preset_and_cfg_wins)
{
  g_autoptr (SgGraph) g =
    small_graph (4096, 4096, 4096, "{\"gpus_per_node\":2,\"nodes\":1,\"gpu\":\"A100\"}");
  est_run (g, NULL, NULL);
  const SgCluster *c = &sg_graph_cost_model (g)->cluster;
  ck_assert_str_eq (c->name, "a100-sxm");
  ck_assert_int_eq (c->gpus_per_node, 2);
  double a100_mm = node (g, "mm")->est_us;
  /* --cluster wins over the graph's gpu, the graph keeps its layout */
  est_run (g, "h200-sxm", NULL);
  c = &sg_graph_cost_model (g)->cluster;
  ck_assert_str_eq (c->name, "h200-sxm");
  ck_assert_int_eq (c->gpus_per_node, 2);
  ck_assert (node (g, "mm")->est_us < a100_mm);
  /* graph-format.md's intra_bw_GBps sets the node's ring bandwidth */
  g_autoptr (SgGraph) slow =
    small_graph (1024, 1024, 1024, "{\"gpu\":\"H200\",\"intra_bw_GBps\":50}");
  g_autoptr (SgGraph) fast = small_graph (1024, 1024, 1024, "{\"gpu\":\"H200\"}");
  est_run (slow, NULL, NULL);
  est_run (fast, NULL, NULL);
  ck_assert (node (slow, "ag")->est_us > node (fast, "ag")->est_us);
  /* the GPU as torch.cuda.get_device_name() prints it */
  g_autoptr (SgGraph) named = small_graph (64, 64, 64, "{\"gpu\":\"NVIDIA H100 80GB HBM3\"}");
  est_run (named, NULL, NULL);
  ck_assert_str_eq (sg_graph_cost_model (named)->cluster.name, "h100-sxm");
  /* an unknown GPU in the graph is an error that says what to do */
  g_autoptr (SgGraph) bad = small_graph (64, 64, 64, "{\"gpu\":\"Z9000\"}");
  g_autofree char *msg = est_fail (bad, NULL, NULL, SG_ESTIMATE_ERROR_CLUSTER);
  ck_assert_msg (strstr (msg, "Z9000") && strstr (msg, "--cluster"), "%s", msg);
  /* ... unless --cluster says which machine it is */
  est_run (bad, "h100-sxm", NULL);
}
END_TEST

START_TEST (cluster_file_overrides_fields_of_its_base)
{
  g_autofree char *path = est_tmpfile (
    "c.json", "{\"name\":\"lab\",\"base\":\"h100-sxm\",\"bf16_tflops\":494.5,"
              "\"collective_overhead_us\":0,\"comm_slowdown\":3.0,\"compute_slowdown\":1.1,"
              "\"nccl_arch\":\"hopper\",\"nvls\":false}");
  g_autoptr (SgGraph) ref = small_graph (8192, 8192, 8192, NULL);
  g_autoptr (SgGraph) g = small_graph (8192, 8192, 8192, NULL);
  est_run (ref, "h100-sxm", NULL);
  est_run (g, path, NULL);
  const SgCostModel *cm = sg_graph_cost_model (g);
  ck_assert_str_eq (cm->cluster.name, "lab"); /* the file's name, else its path */
  ck_assert_double_eq (cm->cluster.hbm_GBps, 3350.0); /* from the base */
  ck_assert_double_eq (sg_cost_model_contention (cm)->comm_slowdown, 3.0);
  ck_assert_double_eq (sg_cost_model_contention (cm)->compute_slowdown, 1.1);
  /* half the peak: about twice the time of a large GEMM */
  double r = node (g, "mm")->est_us / node (ref, "mm")->est_us;
  ck_assert_msg (r > 1.9 && r < 2.01, "ratio %g", r);
  ck_assert (node (g, "ag")->est_us < node (ref, "ag")->est_us); /* no overhead */
  est_rmtmp (path);
}
END_TEST

static void
expect_cluster_error (const char *text, const char *needle)
{
  g_autofree char *path = est_tmpfile ("bad.json", text);
  g_autoptr (SgGraph) g = small_graph (64, 64, 64, NULL);
  g_autofree char *msg = est_fail (g, path, NULL, SG_ESTIMATE_ERROR_CLUSTER);
  ck_assert_msg (strstr (msg, needle) != NULL, "'%s' not in: %s", needle, msg);
  ck_assert_msg (strstr (msg, "bad.json") != NULL, "file not named: %s", msg);
  est_rmtmp (path);
}

START_TEST (bad_cluster_files_are_rejected_naming_the_field)
{
  expect_cluster_error ("{\"hbm_gbps\": 3000}", "hbm_gbps: unknown cluster field");
  expect_cluster_error ("{\"hbm_GBps\": -1}", "hbm_GBps: -1 is out of range");
  expect_cluster_error ("{\"nodes\": 1.5}", "nodes: expected an integer");
  expect_cluster_error ("{\"ll128\": 1}", "ll128: expected true or false");
  expect_cluster_error ("{\"comm_slowdown\": 0.5}", "comm_slowdown");
  expect_cluster_error ("{\"base\": \"tpu-v5\"}", "unknown preset \"tpu-v5\"");
  expect_cluster_error ("{\"nccl_arch\": \"kepler\"}", "nccl_arch");
  expect_cluster_error ("{\"gemm_max_efficiency\": 1.5}", "gemm_max_efficiency");
  expect_cluster_error ("[1, 2]", "must be a JSON object");
  expect_cluster_error ("{\"hbm_GBps\": 3000,", "truncated");
  expect_cluster_error ("{\"hbm_GBps\": 3000 x}", "line 1, column 19: malformed JSON");
  /* cJSON reads 1e400 as infinity: refused as text, before any range check */
  expect_cluster_error ("{\"hbm_GBps\": 1e400}", "number 1e400 is out of range");
  expect_cluster_error ("\xEF\xBB\xBF{}", "byte-order mark");
  g_autoptr (SgGraph) g = small_graph (64, 64, 64, NULL);
  g_autofree char *m1 = est_fail (g, "/nonexistent/cluster.json", NULL, SG_ESTIMATE_ERROR_CLUSTER);
  ck_assert_msg (strstr (m1, "cannot read cluster file"), "%s", m1);
  g_autofree char *m2 = est_fail (g, "h300-sxm", NULL, SG_ESTIMATE_ERROR_CLUSTER);
  ck_assert_msg (strstr (m2, "unknown preset \"h300-sxm\"") && strstr (m2, "h200-sxm"), "%s", m2);
  ck_assert (g->cost_model == NULL); /* nothing attached on failure */
}
END_TEST

static const char *profile_text =
  "{\"format\":\"schedgraph.profile\",\"version\":1,\"device\":\"NVIDIA H200\",\"world_size\":2,"
  "\"gemm\":[{\"op\":\"mm\",\"dtype\":\"bfloat16\",\"m\":1024,\"n\":1024,\"k\":1024,\"us\":20.0},"
  "          {\"op\":\"mm\",\"dtype\":\"bfloat16\",\"m\":4096,\"n\":4096,\"k\":4096,\"us\":200.0},"
  "          {\"op\":\"mm\",\"dtype\":\"bfloat16\",\"m\":8192,\"n\":8192,\"k\":8192,"
  "           \"us\":1400.0}],"
  "\"collectives\":[{\"kind\":\"all_gather\",\"bytes\":1048576,\"group_size\":2,\"us\":30.0},"
  "                 {\"kind\":\"all_gather\",\"bytes\":4194304,\"group_size\":2,\"us\":60.0},"
  "                 {\"kind\":\"all_reduce\",\"bytes\":1048576,\"group_size\":2,\"nodes\":1,"
  "                  \"us\":33.0}],"
  "\"ops\":[{\"target\":\"aten.silu.default\",\"bytes\":4194304,\"us\":9.5}],"
  "\"note\":\"ignored\"}";

START_TEST (profile_exact_hits_win_over_the_model)
{
  g_autofree char *path = est_tmpfile ("p.json", profile_text);
  g_autoptr (SgGraph) g = small_graph (4096, 4096, 4096, NULL);
  est_run (g, NULL, path);
  ck_assert_double_eq (node (g, "mm")->est_us, 200.0);
  ck_assert_int_eq (node (g, "mm")->est_src, SG_COST_PROFILE);
  /* all_gather of a 512x1024 bf16 shard over 2: 2 MiB output, between the
   * 1 MiB and 4 MiB entries */
  ck_assert_int_eq (node (g, "ag")->est_src, SG_COST_PROFILE);
  ck_assert_double_eq_tol (node (g, "ag")->est_us, sqrt (30.0 * 60.0), 1e-9);
  /* all_reduce of 4 MiB: above the largest entry, scaled linearly */
  ck_assert_double_eq_tol (node (g, "ar")->est_us, 33.0 * 4, 1e-9);
  ck_assert_int_eq (node (g, "silu")->est_src, SG_COST_PROFILE);
  ck_assert_double_eq (node (g, "silu")->est_us, 9.5);
  g_autofree char *text = NULL;
  size_t len;
  FILE *f = open_memstream (&text, &len);
  sg_estimate_print_costs (g, f);
  fclose (f);
  ck_assert_msg (strstr (text, "(NVIDIA H200)") && strstr (text, "profile\n"), "%s", text);
  est_rmtmp (path);
}
END_TEST

START_TEST (profile_interpolates_gemms_by_flops_and_falls_back_below)
{
  g_autofree char *path = est_tmpfile ("p.json", profile_text);
  /* 4096 x 8192 x 4096 = 2x the flops of 4096^3: between 4096^3 and 8192^3 */
  g_autoptr (SgGraph) g = small_graph (4096, 8192, 4096, NULL);
  est_run (g, NULL, path);
  const SgNode *mm = node (g, "mm");
  ck_assert_int_eq (mm->est_src, SG_COST_PROFILE);
  double expect = exp (log (200.0) + (log (1400.0) - log (200.0)) / 3.0);
  ck_assert_double_eq_tol (mm->est_us, expect, 1e-6);
  /* below the smallest measured GEMM: the model answers */
  g_autoptr (SgGraph) tiny = small_graph (256, 256, 256, NULL);
  est_run (tiny, NULL, path);
  ck_assert_int_eq (node (tiny, "mm")->est_src, SG_COST_MODEL);
  /* an addmm without addmm entries uses the mm entries */
  SgCostSource src;
  double us = sg_cost_collective_us (sg_graph_cost_model (g), SG_OP_REDUCE_SCATTER,
                                     SG_DTYPE_BF16, 1u << 22, 2, 1, &src);
  ck_assert_int_eq (src, SG_COST_MODEL); /* no reduce_scatter entries */
  ck_assert (us > 0);
  SgShape s = { .op = SG_OP_ADDMM, .dtype = SG_DTYPE_BF16, .batch = 1, .m = 4096, .n = 4096,
                .k = 4096, .flops = 2.0 * 4096 * 4096 * 4096 };
  ck_assert (sg_profile_shape_us (sg_graph_cost_model (g)->profile, &s, &us));
  ck_assert_double_eq (us, 200.0);
  s.dtype = SG_DTYPE_F32; /* no float32 entries */
  ck_assert (!sg_profile_shape_us (sg_graph_cost_model (g)->profile, &s, &us));
  est_rmtmp (path);
}
END_TEST

START_TEST (an_ops_entry_of_zero_bytes_answers_its_exact_key_only)
{
  /* fuzz_profile found it: 0 bytes as an interpolation point made every
   * larger lookup infinite (x / 0) */
  static const char text[] =
    "{\"format\":\"schedgraph.profile\",\"version\":1,\"world_size\":2,\"ops\":["
    "{\"target\":\"aten.mul.Tensor\",\"bytes\":0,\"us\":2},"
    "{\"target\":\"aten.add.Tensor\",\"bytes\":0,\"us\":3},"
    "{\"target\":\"aten.add.Tensor\",\"bytes\":1024,\"us\":4}]}";
  g_autoptr (GError) e = NULL;
  SgProfile *p = sg_profile_load_data (text, strlen (text), "z.json", 2, &e);
  ck_assert_msg (p != NULL, "%s", e ? e->message : "");
  double us = -1;
  ck_assert (sg_profile_op_us (p, "aten.mul.Tensor", 0, &us) && us == 2);
  ck_assert (!sg_profile_op_us (p, "aten.mul.Tensor", 64, &us));
  ck_assert (sg_profile_op_us (p, "aten.add.Tensor", 0, &us) && us == 3);
  ck_assert (!sg_profile_op_us (p, "aten.add.Tensor", 512, &us));
  ck_assert (sg_profile_op_us (p, "aten.add.Tensor", 4096, &us) && us == 16);
  sg_profile_free (p);
}
END_TEST

START_TEST (graph_cost_us_beats_profile_beats_model)
{
  g_autofree char *path = est_tmpfile ("p.json", profile_text);
  g_autoptr (SgGraph) g = small_graph (4096, 4096, 4096, NULL);
  tb_cost (g, sg_graph_lookup (g, "mm"), 42.0);
  est_run (g, NULL, path);
  ck_assert_double_eq (node (g, "mm")->est_us, 42.0);
  ck_assert_int_eq (node (g, "mm")->est_src, SG_COST_GRAPH);
  ck_assert_int_eq (node (g, "ag")->est_src, SG_COST_PROFILE);
  g_autoptr (SgGraph) m = small_graph (4096, 4096, 4096, NULL);
  est_run (m, NULL, NULL);
  ck_assert_int_eq (node (m, "mm")->est_src, SG_COST_MODEL);
  ck_assert (node (m, "mm")->est_us != 200.0);
  est_rmtmp (path);
}
END_TEST

static void
expect_profile_error (const char *text, const char *needle)
{
  g_autofree char *path = est_tmpfile ("prof.json", text);
  g_autoptr (SgGraph) g = small_graph (64, 64, 64, NULL);
  g_autofree char *msg = est_fail (g, NULL, path, SG_ESTIMATE_ERROR_PROFILE);
  ck_assert_msg (strstr (msg, needle) != NULL, "'%s' not in: %s", needle, msg);
  ck_assert_msg (strstr (msg, "prof.json") != NULL, "file not named: %s", msg);
  ck_assert (g->cost_model == NULL);
  est_rmtmp (path);
}

#define HDR "\"format\":\"schedgraph.profile\",\"version\":1,\"world_size\":2"

START_TEST (bad_profiles_are_rejected_naming_the_entry)
{
  expect_profile_error ("{\"format\":\"other\",\"version\":1,\"world_size\":2}",
                        "format: \"other\" is not \"schedgraph.profile\"");
  expect_profile_error ("{\"format\":\"schedgraph.profile\",\"version\":3,\"world_size\":2}",
                        "version 3 is not supported");
  expect_profile_error ("{\"format\":\"schedgraph.profile\",\"version\":1,\"world_size\":8}",
                        "world_size 8, the graph has 2");
  expect_profile_error ("{\"format\":\"schedgraph.profile\",\"version\":1}", "world_size: missing");
  expect_profile_error ("{" HDR ",\"collectives\":[{\"kind\":\"all_gather\",\"bytes\":1024,"
                        "\"group_size\":2,\"us\":3},{\"kind\":\"allgather\",\"bytes\":1,"
                        "\"group_size\":2,\"us\":3}]}",
                        "collectives[1].kind: unknown collective kind \"allgather\"");
  expect_profile_error ("{" HDR ",\"gemm\":[{\"op\":\"mm\",\"dtype\":\"bfloat16\",\"m\":1,"
                        "\"n\":1,\"k\":1,\"us\":-4}]}",
                        "gemm[0].us: expected a positive time");
  expect_profile_error ("{" HDR ",\"gemm\":[{\"op\":\"sdpa_cudnn\",\"dtype\":\"bfloat16\",\"m\":1,"
                        "\"n\":1,\"k\":1,\"us\":4}]}",
                        "gemm[0].op: unknown matmul op");
  expect_profile_error ("{" HDR ",\"gemm\":[{\"op\":\"mm\",\"dtype\":\"bfloat17\",\"m\":1,"
                        "\"n\":1,\"k\":1,\"us\":4}]}",
                        "gemm[0].dtype: unknown dtype \"bfloat17\"");
  expect_profile_error ("{" HDR ",\"gemm\":[{\"op\":\"mm\",\"dtype\":\"bfloat16\",\"m\":0,"
                        "\"n\":1,\"k\":1,\"us\":4}]}",
                        "gemm[0].m: 0 is below the minimum 1");
  expect_profile_error ("{" HDR ",\"attention\":[{\"op\":\"sdpa_flash\",\"dtype\":\"bfloat16\","
                        "\"batch\":1,\"heads\":8,\"seq_q\":128,\"head_dim\":64,\"us\":4}]}",
                        "attention[0].seq_kv: missing");
  expect_profile_error ("{" HDR ",\"collectives\":[{\"kind\":\"all_reduce\",\"bytes\":64,"
                        "\"group_size\":1,\"us\":3}]}",
                        "collectives[0].group_size: 1 is below the minimum 2");
  expect_profile_error ("{" HDR ",\"collectives\":[{\"kind\":\"all_reduce\",\"bytes\":64,"
                        "\"group_size\":2,\"us\":3},{\"kind\":\"all_reduce\",\"bytes\":64,"
                        "\"group_size\":2,\"us\":4}]}",
                        "collectives[1]: duplicates the key of collectives[0]");
  expect_profile_error ("{" HDR ",\"ops\":{}}", "ops: expected an array");
  /* the contention section (version 2) */
#define CE(first) /* fields in @first win over the defaults (cJSON reads the first) */         \
  "{" first "\"kind\":\"reduce_scatter\",\"bytes\":1048576,\"group_size\":2,\"kernel\":\"gemm\","           \
  "\"kernel_key\":\"mm|bfloat16|1|8|8|8\",\"order\":\"comm_first\",\"comm_solo_us\":50,"            \
  "\"rep_solo_us\":100,\"comm_us\":60,\"reps_us\":[110,100]}"
#define V2 "\"format\":\"schedgraph.profile\",\"version\":2,\"world_size\":2"
  expect_profile_error ("{" HDR ",\"contention\":[" CE ("") "]}",
                        "contention: needs version 2 (this profile says 1)");
  expect_profile_error ("{" V2 ",\"contention\":[" CE ("\"kernel\":\"conv\",") "]}",
                        "contention[0].kernel: unknown kernel class \"conv\"");
  expect_profile_error ("{" V2 ",\"contention\":[" CE ("\"order\":\"both\",") "]}",
                        "contention[0].order: \"both\" is neither comm_first nor kernel_first");
  expect_profile_error ("{" V2 ",\"contention\":[" CE ("\"reps_us\":[1,0],") "]}",
                        "contention[0].reps_us: element 1: expected a positive time");
  expect_profile_error ("{" V2 ",\"contention\":[" CE ("\"transport\":\"ib\",") "]}",
                        "contention[0].transport: unknown transport \"ib\"");
  expect_profile_error ("{" V2 ",\"contention\":[" CE ("\"lag_us\":-1,") "]}",
                        "contention[0].lag_us: expected a non-negative time");
  expect_profile_error ("{" V2 ",\"contention\":[" CE ("") "," CE ("") "]}",
                        "contention[1]: duplicates the key of contention[0]");
  expect_profile_error ("{" HDR ",", "truncated");
  expect_profile_error ("{" HDR "} []", "trailing text");
  expect_profile_error ("{" HDR ",\"ops\":[{\"target\":\"aten.add.Tensor\",\"bytes\":1e999,"
                        "\"us\":3}]}",
                        "number 1e999 is out of range");
  g_autoptr (SgGraph) g = small_graph (64, 64, 64, NULL);
  g_autofree char *msg = est_fail (g, NULL, "/nonexistent/p.json", SG_ESTIMATE_ERROR_PROFILE);
  ck_assert_msg (strstr (msg, "cannot read profile"), "%s", msg);
}
END_TEST

START_TEST (attention_profile_entries_match_shape_and_causality)
{
  const char *text =
    "{" HDR ",\"attention\":[{\"op\":\"sdpa_cudnn\",\"dtype\":\"bfloat16\",\"batch\":1,"
    "\"heads\":8,\"seq_q\":2048,\"seq_kv\":2048,\"head_dim\":128,\"causal\":true,\"us\":77}]}";
  g_autoptr (GError) error = NULL;
  SgProfile *p = sg_profile_load_data (text, strlen (text), "mem", 2, &error);
  ck_assert_msg (p != NULL, "%s", error ? error->message : "");
  SgShape s = { .op = SG_OP_SDPA_CUDNN, .dtype = SG_DTYPE_BF16, .batch = 1, .heads = 8,
                .seq_q = 2048, .seq_kv = 2048, .head_dim = 128, .causal = true };
  s.flops = 4.0 * 8 * 2048 * 2048 * 128 * 0.5;
  double us;
  ck_assert (sg_profile_shape_us (p, &s, &us) && us == 77);
  s.causal = false; /* a different family */
  ck_assert (!sg_profile_shape_us (p, &s, &us));
  s.causal = true;
  s.op = SG_OP_SDPA_CUDNN_BWD;
  ck_assert (!sg_profile_shape_us (p, &s, &us));
  sg_profile_free (p);
}
END_TEST

START_TEST (cluster_file_without_base_starts_from_the_graphs_gpu)
{
  g_autofree char *path = est_tmpfile ("c.json", "{\"collective_overhead_us\": 5}");
  g_autoptr (SgGraph) g =
    small_graph (64, 64, 64, "{\"gpu\":\"A100\",\"gpus_per_node\":4,\"rack\":\"b7\"}");
  est_run (g, path, NULL);
  const SgCluster *c = &sg_graph_cost_model (g)->cluster;
  ck_assert_str_eq (c->gpu, "A100");
  ck_assert_double_eq (c->bf16_tflops, 312.0);
  ck_assert_int_eq (c->gpus_per_node, 4);          /* the graph's layout */
  ck_assert_double_eq (c->collective_overhead_us, 5.0); /* the file's field */
  /* the graph's unknown "rack" key was ignored; a file's is an error */
  est_rmtmp (path);
}
END_TEST

/* Deterministic mutations of a valid profile and cluster file (bytes
 * replaced, dropped, truncated): every load either succeeds or fails with
 * a message, never crashes (the sanitizer build checks memory). */
START_TEST (mutated_profiles_and_cluster_files_load_or_fail_cleanly)
{
  GRand *rng = g_rand_new_with_seed (20261122);
  static const char alphabet[] = "{}[]\":,0123456789-.eEtruefalsn x";
  const char *cluster_text = "{\"base\":\"h100-sxm\",\"hbm_GBps\":3000,\"nvls\":false,"
                             "\"efficiency_p2p\":0.9,\"name\":\"m\",\"sm_count\":100}";
  int ok = 0, failed = 0;
  for (int i = 0; i < 3000; i++) {
    const char *base = i % 3 ? profile_text : cluster_text;
    GString *t = g_string_new (base);
    int edits = 1 + g_rand_int_range (rng, 0, 4);
    for (int e = 0; e < edits && t->len > 1; e++) {
      guint at = (guint)g_rand_int_range (rng, 0, (gint32)t->len);
      switch (g_rand_int_range (rng, 0, 3)) {
      case 0:
        t->str[at] = alphabet[g_rand_int_range (rng, 0, (gint32)sizeof alphabet - 1)];
        break;
      case 1:
        g_string_erase (t, at, 1);
        break;
      default:
        g_string_truncate (t, at);
        break;
      }
    }
    GError *error = NULL;
    if (base == profile_text) {
      SgProfile *p = sg_profile_load_data (t->str, t->len, "fuzz", 2, &error);
      ck_assert ((p != NULL) == (error == NULL));
      sg_profile_free (p);
    } else {
      cJSON *obj = cJSON_Parse (t->str);
      SgCluster c;
      ck_assert (sg_cluster_preset ("h200-sxm", &c));
      bool r = obj && sg_cluster_apply_json (&c, obj, true, "fuzz", &error);
      ck_assert (!obj || r == (error == NULL));
      cJSON_Delete (obj);
    }
    if (error) {
      ck_assert (error->message && *error->message);
      ck_assert (strstr (error->message, "fuzz") != NULL);
      g_error_free (error);
      failed++;
    } else {
      ok++;
    }
    g_string_free (t, TRUE);
  }
  g_rand_free (rng);
  ck_assert (ok > 0 && failed > 0);
}
END_TEST

static Suite *
suite (void)
{
  Suite *s = suite_create ("estimate-inputs");
  TCase *tc = tcase_create ("inputs");
  tcase_add_test (tc, presets_differ_where_the_hardware_does);
  tcase_add_test (tc, graph_cluster_picks_the_preset_and_cfg_wins);
  tcase_add_test (tc, cluster_file_overrides_fields_of_its_base);
  tcase_add_test (tc, bad_cluster_files_are_rejected_naming_the_field);
  tcase_add_test (tc, cluster_file_without_base_starts_from_the_graphs_gpu);
  tcase_add_test (tc, profile_exact_hits_win_over_the_model);
  tcase_add_test (tc, profile_interpolates_gemms_by_flops_and_falls_back_below);
  tcase_add_test (tc, an_ops_entry_of_zero_bytes_answers_its_exact_key_only);
  tcase_add_test (tc, graph_cost_us_beats_profile_beats_model);
  tcase_add_test (tc, bad_profiles_are_rejected_naming_the_entry);
  tcase_add_test (tc, attention_profile_entries_match_shape_and_causality);
  tcase_add_test (tc, mutated_profiles_and_cluster_files_load_or_fail_cleanly);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  return est_run_suite (suite ());
}

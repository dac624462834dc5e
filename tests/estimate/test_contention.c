/* test_contention.c: contention per pair (estimate/contention.c): deriving a
 * pair from an in-place run, the table built from a profile's contention
 * section (interpolation, slots, fallbacks, scales), and the global factors
 * it reduces to without one. Runs are synthetic (hand-computed timelines);
 * tests/schedule/test_pairs.c checks the derivation against the simulator. */
#include "est-test.h"

#include <math.h>

/* One profile `contention` entry. */
static char *
entry (const char *kind, uint64_t bytes, const char *kernel, const char *key, bool kernel_first,
       double comm_solo, double rep_solo, double lag, double comm, const char *reps)
{
  return g_strdup_printf ("{\"kind\":\"%s\",\"bytes\":%" G_GUINT64_FORMAT ",\"group_size\":2,"
                          "\"kernel\":\"%s\",\"kernel_key\":\"%s\",\"order\":\"%s\","
                          "\"comm_solo_us\":%g,\"rep_solo_us\":%g,\"lag_us\":%g,\"comm_us\":%g,"
                          "\"reps_us\":[%s]}",
                          kind, bytes, kernel, key, kernel_first ? "kernel_first" : "comm_first",
                          comm_solo, rep_solo, lag, comm, reps);
}

/* A version-2 profile with the entries (NULL-terminated, taken). */
static char *
profile_with (const char *first, ...)
{
  GString *s = g_string_new ("{\"format\":\"schedgraph.profile\",\"version\":2,\"world_size\":2,"
                             "\"contention\":[");
  va_list ap;
  va_start (ap, first);
  for (const char *e = first; e; e = va_arg (ap, const char *)) {
    g_string_append_printf (s, "%s%s", e == first ? "" : ",", e);
    g_free ((char *)e);
  }
  va_end (ap);
  g_string_append (s, "]}");
  return g_string_free (s, FALSE);
}

/* Case A, issued with the chain: a 100 us collective waits for the first
 * 100 us GEMM (wait_before 1), then runs at 1/1.5 (150 us, 100..250)
 * beside rep 1, which runs at 1/2 while it does: 150 us for 75 of its
 * work, 25 more alone: rep 1 takes 175. */
#define CASE_A(kind, bytes) \
  entry (kind, bytes, "gemm", "mm|A", false, 100, 100, 0, 250, "100,175,100,100")
/* Case B, startable 50 us into a 200 us GEMM (150 left): waits half of it
 * (75, wait_during 0.5), starts at 125, runs at 1/2 (100 us, to 225); the
 * GEMM at 1/1.5 meanwhile: 125 + 100 + (200 - 125 - 100/1.5) = 233.33. */
#define CASE_B(kind, bytes) \
  entry (kind, bytes, "gemm", "mm|B", true, 50, 200, 50, 175, "233.3333333333,200,200")

static SgContentionRun
run_of (double comm_solo, double rep_solo, double lag, double comm, const double *reps, int n,
        bool kernel_first)
{
  return (SgContentionRun){ comm_solo, rep_solo, lag, comm, reps, n, 1, kernel_first, NAN };
}

START_TEST (derive_reads_a_full_wait_and_both_rates_from_the_reps)
{
  const double reps[] = { 100, 175, 100, 100 };
  SgContentionRun run = run_of (100, 100, 0, 250, reps, 4, false);
  SgPairRates r;
  /* the collective ended inside rep 1: its start is not read from a whole
   * rep; without a hint it is placed at rep 1's start, which is right here */
  ck_assert (!sg_contention_derive (&run, &r));
  ck_assert_double_eq_tol (r.comm_x, 1.5, 1e-9);
  ck_assert_double_eq_tol (r.kernel_x, 2.0, 1e-9);
  ck_assert_double_eq_tol (r.wait_before, 1.0, 1e-9);
  ck_assert (isnan (r.wait_during));
}
END_TEST

START_TEST (derive_places_the_start_by_a_whole_slowed_rep)
{
  /* 300 us collective issued with a chain of 100 us GEMMs, wait_before
   * 0.5: starts at 50, runs at 1/1.5 (450 us, to 500) beside reps that run
   * at 1/2: rep 0 = 50 + 100, rep 1 = 200 (150..350), rep 2 does 75 of its
   * work by 500 and the rest alone (175) */
  const double reps[] = { 150, 200, 175, 100, 100 };
  SgContentionRun run = run_of (300, 100, 0, 500, reps, 5, false);
  SgPairRates r;
  ck_assert (sg_contention_derive (&run, &r));
  ck_assert_double_eq_tol (r.wait_before, 0.5, 1e-9);
  ck_assert_double_eq_tol (r.comm_x, 1.5, 1e-9);
  ck_assert_double_eq_tol (r.kernel_x, 2.0, 1e-9);
}
END_TEST

START_TEST (derive_takes_the_other_orders_rate_to_place_a_start)
{
  const double reps[] = { 233.3333333333, 200, 200 };
  SgContentionRun run = run_of (50, 200, 50, 175, reps, 3, true);
  SgPairRates r;
  ck_assert (!sg_contention_derive (&run, &r));
  /* placed at the lag: all of its time counts as slowdown, none as wait */
  ck_assert_double_eq_tol (r.wait_during, 0.0, 1e-9);
  ck_assert_double_eq_tol (r.comm_x, 3.5, 1e-9);
  run.comm_x_hint = 2.0;
  ck_assert (!sg_contention_derive (&run, &r));
  ck_assert_double_eq_tol (r.wait_during, 0.5, 1e-9);
  ck_assert_double_eq_tol (r.comm_x, 2.0, 1e-9);
  ck_assert_double_eq_tol (r.kernel_x, 1.5, 1e-6);
  ck_assert (isnan (r.wait_before));
}
END_TEST

START_TEST (derive_marks_what_a_run_cannot_show)
{
  /* waited for the whole chain (2 x 100 us), then ran alone 100 us */
  const double reps[] = { 100, 100 };
  SgContentionRun run = run_of (100, 100, 0, 300, reps, 2, false);
  SgPairRates r;
  ck_assert (sg_contention_derive (&run, &r));
  ck_assert (isnan (r.comm_x) && isnan (r.kernel_x));
  ck_assert_double_eq_tol (r.wait_before, 1.0, 1e-9);
  /* ran beside the chain without slowing it, at its solo speed */
  SgContentionRun quiet = run_of (60, 100, 0, 60, reps, 2, false);
  ck_assert (sg_contention_derive (&quiet, &r));
  ck_assert_double_eq_tol (r.comm_x, 1.0, 1e-9);
  ck_assert_double_eq_tol (r.kernel_x, 1.0, 1e-9);
  ck_assert_double_eq_tol (r.wait_before, 0.0, 1e-9);
  /* nonsense in, nothing out */
  SgContentionRun bad = run_of (0, 100, 0, 60, reps, 2, false);
  ck_assert (!sg_contention_derive (&bad, &r));
  ck_assert (isnan (r.comm_x) && isnan (r.wait_before));
}
END_TEST

START_TEST (derive_reads_an_undisturbed_collective_as_waiting_for_the_kernel)
{
  /* a 10 us collective issued with a chain of 100 us GEMMs ends at 105,
   * no rep slowed: it waited for the first one (kernels hand a waiting
   * collective the SMs at their end) and ran at its solo speed; it did not
   * run 105 us at a tenth of its speed */
  const double reps[] = { 100, 100, 100 };
  SgContentionRun run = run_of (10, 100, 0, 105, reps, 3, false);
  SgPairRates r;
  ck_assert (sg_contention_derive (&run, &r));
  ck_assert_double_eq_tol (r.wait_before, 0.95, 1e-9);
  ck_assert_double_eq_tol (r.comm_x, 1.0, 1e-9);
  ck_assert_double_eq_tol (r.kernel_x, 1.0, 1e-9);
  /* issued 40 us into the first GEMM, ended 2 us after it */
  run = run_of (10, 100, 40, 62, reps, 3, true);
  ck_assert (sg_contention_derive (&run, &r));
  ck_assert_double_eq_tol (r.wait_during, 52.0 / 60.0, 1e-9);
  ck_assert_double_eq_tol (r.comm_x, 1.0, 1e-9);
}
END_TEST

START_TEST (derive_takes_the_kernels_time_from_the_reps_beside_nothing)
{
  /* the chain's kernel takes 104 us in this run, 100 when timed alone
   * (clocks); a 50 us collective runs from 0 at its solo speed and slows
   * the first rep by 1.2 (41.67 of 104 done by 50, 112.33 in all). Read
   * against 100 us the chain's extra would be 24.3 us and kernel_x 1.95. */
  const double reps[] = { 50 + (104 - 50 / 1.2), 104, 104, 104 };
  SgContentionRun run = run_of (50, 100, 0, 50, reps, 4, false);
  SgPairRates r;
  sg_contention_derive (&run, &r);
  ck_assert_double_eq_tol (r.kernel_x, 1.2, 1e-9);
  ck_assert_double_eq_tol (r.comm_x, 1.0, 1e-9);
  ck_assert_double_eq_tol (r.wait_before, 0.0, 1e-9);
}
END_TEST

START_TEST (global_rates_are_the_cluster_factors)
{
  const SgContention c = { 1.05, 1.22, 1.30 };
  SgPairRates r;
  sg_contention_global_rates (&c, 1.0, SG_OP_REDUCE_SCATTER, SG_KERNEL_GEMM, &r);
  ck_assert (r.comm_x == 1.30 && r.kernel_x == 1.22 && r.wait_before == 1.0
             && r.wait_during == 1.0);
  sg_contention_global_rates (&c, 0.5, SG_OP_ALL_GATHER, SG_KERNEL_MAP, &r);
  ck_assert (r.comm_x == 1.05 && r.kernel_x == 1.22 && r.wait_before == 0.0
             && r.wait_during == 0.0);
  sg_contention_global_rates (&c, 0.5, SG_OP_ALL_REDUCE, SG_KERNEL_ATTENTION_BACKWARD, &r);
  ck_assert (r.comm_x == 1.30 && r.wait_before == 0.5);
  ck_assert_int_eq (sg_kernel_class (SG_OP_SDPA_CUDNN_BWD), SG_KERNEL_ATTENTION_BACKWARD);
  ck_assert_int_eq (sg_kernel_class (SG_OP_SDPA_FLASH), SG_KERNEL_ATTENTION);
  ck_assert_int_eq (sg_kernel_class (SG_OP_BMM), SG_KERNEL_GEMM);
}
END_TEST

/* A graph whose only nodes matter for the model's slots: a 100 us mm and a
 * 300 us mm (cost_us), a reduction and a map. */
static SgGraph *
pair_graph (const char *profile_text, const char *cluster_json)
{
  SgGraph *g = est_graph (2);
  tb_input (g, "x", "bfloat16", 2, I64 (64), I64 (64));
  tb_cost (g, tb_mm (g, "mm_small", "x", "x"), 100);
  tb_cost (g, tb_mm (g, "mm_big", "x", "x"), 300);
  tb_cost (g, tb_pointwise (g, "relu", "aten.relu.default", "x", NULL), 10);
  tb_output (g, 3, "mm_small", "mm_big", "relu");
  if (cluster_json)
    g->cluster_json = g_strdup (cluster_json);
  g_autofree char *path = profile_text ? est_tmpfile ("p.json", profile_text) : NULL;
  est_run (g, NULL, path);
  if (path)
    est_rmtmp (path);
  return g;
}

START_TEST (a_profile_without_contention_keeps_the_global_factors)
{
  g_autoptr (SgGraph) g = pair_graph (NULL, NULL);
  const SgCostModel *cm = sg_graph_cost_model (g);
  ck_assert_int_eq (sg_cost_contention_pairs (cm), 0);
  ck_assert_int_eq (sg_cost_contention_slots (cm), SG_KERNEL_N_CLASSES);
  SgPairRates r[SG_KERNEL_N_CLASSES], want;
  sg_cost_contention_rates (cm, SG_TRANSPORT_NCCL, SG_OP_REDUCE_SCATTER, 1 << 20, 2, 1, r);
  for (int k = 0; k < SG_KERNEL_N_CLASSES; k++) {
    sg_contention_global_rates (sg_cost_model_contention (cm), sg_cost_model_comm_start_wait (cm),
                                SG_OP_REDUCE_SCATTER, (SgKernelClass)k, &want);
    ck_assert (memcmp (&r[k], &want, sizeof want) == 0);
  }
  ck_assert (sg_cost_model_has_start_wait (cm));
  /* the version-1 profile of the repository loads and adds no pairs */
  g_autoptr (SgGraph) g1 = est_graph (2);
  tb_input (g1, "x", "bfloat16", 1, I64 (8));
  tb_output (g1, 1, "x");
  g_autofree char *v1 = g_build_filename (SG_TEST_ESTIMATE_DATA, "h200x2.profile.json", NULL);
  est_run (g1, NULL, v1);
  ck_assert_int_eq (sg_cost_contention_pairs (sg_graph_cost_model (g1)), 0);
}
END_TEST

START_TEST (pairs_are_derived_merged_and_interpolated_in_bytes)
{
  /* reduce_scatter beside gemm "A" at 1 MiB and 4 MiB: case A at 1 MiB,
   * a collective that ran beside without slowing anything at 4 MiB */
  g_autofree char *p = profile_with (
    CASE_A ("reduce_scatter", 1 << 20),
    entry ("reduce_scatter", 4 << 20, "gemm", "mm|A", false, 60, 100, 0, 60, "100,100"), NULL);
  g_autoptr (SgGraph) g = pair_graph (p, NULL);
  const SgCostModel *cm = sg_graph_cost_model (g);
  ck_assert_int_eq (sg_cost_contention_pairs (cm), 2);
  /* the gemm slot is the measured kernel; the other classes keep one each */
  ck_assert_int_eq (sg_cost_contention_slots (cm), SG_KERNEL_N_CLASSES);
  const int32_t gemm = sg_cost_contention_slot (cm, g, sg_graph_lookup (g, "mm_big"), 300);
  ck_assert_int_eq (sg_cost_contention_slot_class (cm, gemm), SG_KERNEL_GEMM);
  SgPairRates r[SG_KERNEL_N_CLASSES];
  sg_cost_contention_rates (cm, SG_TRANSPORT_NCCL, SG_OP_REDUCE_SCATTER, 1 << 20, 2, 1, r);
  ck_assert_double_eq_tol (r[gemm].comm_x, 1.5, 1e-9);
  ck_assert_double_eq_tol (r[gemm].kernel_x, 2.0, 1e-9);
  ck_assert_double_eq_tol (r[gemm].wait_before, 1.0, 1e-9);
  /* no kernel_first run: wait_during falls back to comm_start_wait */
  ck_assert_double_eq_tol (r[gemm].wait_during, 1.0, 1e-9);
  /* halfway in log(bytes): 2 MiB */
  sg_cost_contention_rates (cm, SG_TRANSPORT_NCCL, SG_OP_REDUCE_SCATTER, 2 << 20, 2, 1, r);
  ck_assert_double_eq_tol (r[gemm].comm_x, 1.25, 1e-9);
  ck_assert_double_eq_tol (r[gemm].kernel_x, 1.5, 1e-9);
  ck_assert_double_eq_tol (r[gemm].wait_before, 0.5, 1e-9);
  /* outside the measured sizes: the nearest end */
  sg_cost_contention_rates (cm, SG_TRANSPORT_NCCL, SG_OP_REDUCE_SCATTER, 64 << 20, 2, 1, r);
  ck_assert_double_eq_tol (r[gemm].comm_x, 1.0, 1e-9);
  /* all_reduce has no entries: its sibling reduce_scatter's */
  sg_cost_contention_rates (cm, SG_TRANSPORT_NCCL, SG_OP_ALL_REDUCE, 1 << 20, 2, 1, r);
  ck_assert_double_eq_tol (r[gemm].comm_x, 1.5, 1e-9);
  /* all_gather, and the map class, fall back to the global factors */
  SgPairRates want;
  sg_cost_contention_rates (cm, SG_TRANSPORT_NCCL, SG_OP_ALL_GATHER, 1 << 20, 2, 1, r);
  sg_contention_global_rates (sg_cost_model_contention (cm), 1.0, SG_OP_ALL_GATHER,
                              SG_KERNEL_GEMM, &want);
  ck_assert (memcmp (&r[gemm], &want, sizeof want) == 0);
  const int32_t map = sg_cost_contention_slot (cm, g, sg_graph_lookup (g, "relu"), 10);
  sg_cost_contention_rates (cm, SG_TRANSPORT_NCCL, SG_OP_REDUCE_SCATTER, 1 << 20, 2, 1, r);
  sg_contention_global_rates (sg_cost_model_contention (cm), 1.0, SG_OP_REDUCE_SCATTER,
                              SG_KERNEL_MAP, &want);
  ck_assert (memcmp (&r[map], &want, sizeof want) == 0);
}
END_TEST

START_TEST (both_orders_merge_into_one_pair)
{
  /* the run of derive_places_the_start_by_a_whole_slowed_rep (1.5, 2,
   * wait_before 0.5) and case B, which cannot place its start alone and
   * takes that comm_x; rates merge as geometric means */
  g_autofree char *p = profile_with (
    entry ("all_gather", 1 << 20, "gemm", "mm|A", false, 300, 100, 0, 500, "150,200,175,100,100"),
    entry ("all_gather", 1 << 20, "gemm", "mm|A", true, 50, 200, 50, 175,
           "233.3333333333,200,200"),
    NULL);
  g_autoptr (SgGraph) g = pair_graph (p, NULL);
  const SgCostModel *cm = sg_graph_cost_model (g);
  ck_assert_int_eq (sg_cost_contention_pairs (cm), 1);
  const int32_t gemm = sg_cost_contention_slot (cm, g, sg_graph_lookup (g, "mm_small"), 100);
  SgPairRates r[SG_KERNEL_N_CLASSES];
  sg_cost_contention_rates (cm, SG_TRANSPORT_NCCL, SG_OP_ALL_GATHER, 1 << 20, 2, 1, r);
  /* B placed with comm_x 1.5: starts at 225 - 75 = 150, waits 100 of 150 */
  ck_assert_double_eq_tol (r[gemm].comm_x, 1.5, 1e-9);
  ck_assert_double_eq_tol (r[gemm].wait_before, 0.5, 1e-9);
  ck_assert_double_eq_tol (r[gemm].wait_during, 100.0 / 150.0, 1e-9);
  /* B's GEMM: 75 us beside (150..225) for 41.67 of work -> kernel_x 1.8,
   * merged with 2 */
  ck_assert_double_eq_tol (r[gemm].kernel_x, sqrt (2.0 * 1.8), 1e-6);
}
END_TEST

START_TEST (slots_pick_the_measured_kernel_nearest_in_time)
{
  g_autofree char *p = profile_with (
    entry ("reduce_scatter", 1 << 20, "gemm", "mm|A", false, 100, 100, 0, 250, "100,175,100,100"),
    entry ("reduce_scatter", 1 << 20, "gemm", "mm|C", false, 100, 1000, 0, 100, "1000,1000"),
    NULL);
  g_autoptr (SgGraph) g = pair_graph (p, NULL);
  const SgCostModel *cm = sg_graph_cost_model (g);
  ck_assert_int_eq (sg_cost_contention_slots (cm), SG_KERNEL_N_CLASSES + 1);
  const int32_t small = sg_cost_contention_slot (cm, g, sg_graph_lookup (g, "mm_small"), 100);
  const int32_t big = sg_cost_contention_slot (cm, g, sg_graph_lookup (g, "mm_big"), 500);
  ck_assert_int_ne (small, big);
  SgPairRates r[SG_KERNEL_N_CLASSES + 1];
  sg_cost_contention_rates (cm, SG_TRANSPORT_NCCL, SG_OP_REDUCE_SCATTER, 1 << 20, 2, 1, r);
  ck_assert_double_eq_tol (r[small].comm_x, 1.5, 1e-9);
  ck_assert_double_eq_tol (r[big].comm_x, 1.0, 1e-9); /* quiet beside the big one */
  ck_assert_double_eq_tol (r[big].wait_before, 0.0, 1e-9);
  /* 300 us is nearer 100 than 1000 in log time: |log 3| < |log 0.3| */
  ck_assert_int_eq (sg_cost_contention_slot (cm, g, sg_graph_lookup (g, "mm_big"), 300), small);
  ck_assert (sg_cost_model_has_start_wait (cm));
}
END_TEST

START_TEST (scales_apply_to_measured_pairs_only)
{
  g_autofree char *p = profile_with (CASE_A ("reduce_scatter", 1 << 20), NULL);
  g_autoptr (SgGraph) g = pair_graph (
    p, "{\"contention_comm_scale\": 2, \"contention_compute_scale\": 0.5,"
       " \"contention_wait_scale\": 0.25}");
  const SgCostModel *cm = sg_graph_cost_model (g);
  const int32_t gemm = sg_cost_contention_slot (cm, g, sg_graph_lookup (g, "mm_small"), 100);
  const int32_t map = sg_cost_contention_slot (cm, g, sg_graph_lookup (g, "relu"), 10);
  SgPairRates r[SG_KERNEL_N_CLASSES], want;
  sg_cost_contention_rates (cm, SG_TRANSPORT_NCCL, SG_OP_REDUCE_SCATTER, 1 << 20, 2, 1, r);
  ck_assert_double_eq_tol (r[gemm].comm_x, 2.0, 1e-9);      /* 1 + 2 x 0.5 */
  ck_assert_double_eq_tol (r[gemm].kernel_x, 1.5, 1e-9);    /* 1 + 0.5 x 1 */
  ck_assert_double_eq_tol (r[gemm].wait_before, 0.25, 1e-9);
  sg_contention_global_rates (sg_cost_model_contention (cm), 1.0, SG_OP_REDUCE_SCATTER,
                              SG_KERNEL_MAP, &want);
  ck_assert (memcmp (&r[map], &want, sizeof want) == 0);
}
END_TEST

static Suite *
suite (void)
{
  Suite *s = suite_create ("estimate-contention");
  TCase *tc = tcase_create ("contention");
  tcase_add_test (tc, derive_reads_a_full_wait_and_both_rates_from_the_reps);
  tcase_add_test (tc, derive_places_the_start_by_a_whole_slowed_rep);
  tcase_add_test (tc, derive_takes_the_other_orders_rate_to_place_a_start);
  tcase_add_test (tc, derive_marks_what_a_run_cannot_show);
  tcase_add_test (tc, derive_reads_an_undisturbed_collective_as_waiting_for_the_kernel);
  tcase_add_test (tc, derive_takes_the_kernels_time_from_the_reps_beside_nothing);
  tcase_add_test (tc, global_rates_are_the_cluster_factors);
  tcase_add_test (tc, a_profile_without_contention_keeps_the_global_factors);
  tcase_add_test (tc, pairs_are_derived_merged_and_interpolated_in_bytes);
  tcase_add_test (tc, both_orders_merge_into_one_pair);
  tcase_add_test (tc, slots_pick_the_measured_kernel_nearest_in_time);
  tcase_add_test (tc, scales_apply_to_measured_pairs_only);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  return est_run_suite (suite ());
}

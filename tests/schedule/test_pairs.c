/* test_pairs.c: the simulator with contention per pair (a collective beside
 * a kernel class, estimate/contention.c): measured pairs price a collective
 * by the kernel beside it, compute slows by the most disturbing collective
 * (a held one too),
 * the derivation of a pair inverts the simulator's own timeline, and
 * bucket/'s screen (sg_beside_end) prices like the simulator. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "builder.h"
#include "schedule.h"
#include "sched-test.h"
#include "sim-test.h"

/* Runs the estimate pass with @cluster_json (graph cluster) and, when not
 * NULL, a version-2 profile whose contention section is @entries. */
static void
estimate (SgGraph *g, const char *cluster_json, const char *entries)
{
  st_estimate_with_pairs (g, cluster_json, entries);
}

#define NO_GLOBAL                                                                              \
  "{\"comm_start_wait\": 0, \"comm_slowdown\": 1, \"reduce_slowdown\": 1, "                    \
  "\"compute_slowdown\": 1}"

/* A quiet pair (the collective ran beside @kernel at its solo speed, the
 * kernel unslowed) and one at comm_x 2 and kernel_x 1.5 beside maps (ran
 * 60 us for 30 from the start, the 10 us maps beside it took 15). */
#define RS_QUIET_GEMM                                                                          \
  "{\"kind\":\"reduce_scatter\",\"bytes\":1024,\"group_size\":2,\"kernel\":\"gemm\","            \
  "\"kernel_key\":\"g\",\"order\":\"comm_first\",\"comm_solo_us\":30,\"rep_solo_us\":100,"      \
  "\"comm_us\":30,\"reps_us\":[100,100]}"
#define RS_SLOW_MAP                                                                            \
  "{\"kind\":\"reduce_scatter\",\"bytes\":1024,\"group_size\":2,\"kernel\":\"map\","             \
  "\"kernel_key\":\"m\",\"order\":\"comm_first\",\"comm_solo_us\":30,\"rep_solo_us\":10,"       \
  "\"comm_us\":60,\"reps_us\":[15,15,15,15,10,10,10,10,10,10]}"

/* x -> rs (40 us, group "0") ; relu (20 us, a map) ; mm (100 us) ; wait. */
static SgGraph *
beside_graph (const char *cluster_json, const char *entries)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 32, 16);
  tb_cost (g, tb_reduce_scatter (g, "rs", "x", "0"), 40);
  tb_cost (g, tb_pointwise (g, "relu", "aten.relu.default", "x", NULL), 20);
  tb_cost (g, tb_mm (g, "mm", "x", "x"), 100);
  tb_wait (g, "w", "rs");
  tb_output (g, 3, "relu", "mm", "w");
  estimate (g, cluster_json, entries);
  return g;
}

START_TEST (a_collective_is_priced_by_the_kernel_beside_it)
{
  g_autoptr (SgGraph) g = beside_graph (NO_GLOBAL, RS_QUIET_GEMM "," RS_SLOW_MAP);
  SgSimResult r;
  ck_assert (sg_simulate (g, NULL, &r, NULL));
  /* beside relu (slowed to 0..30) at 1/2: 15 of 40; beside mm at 1: 25
   * more, to 55 */
  const SgCollRow *rs = row_of (&r, g, "rs");
  ck_assert_double_eq_tol (rs->start_us, 0, 1e-9);
  ck_assert_double_eq_tol (rs->end_us, 55, 1e-9);
  ck_assert_double_eq_tol (r.node_end[id_of (g, "mm")], 130, 1e-9);
  ck_assert_double_eq_tol (r.step_us, 130, 1e-9);
  sg_sim_result_clear (&r);
  /* the same graph without the profile: the global factors, all 1 here */
  g_autoptr (SgGraph) plain = beside_graph (NO_GLOBAL, NULL);
  ck_assert (sg_simulate (plain, NULL, &r, NULL));
  ck_assert_double_eq_tol (row_of (&r, plain, "rs")->end_us, 40, 1e-9);
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (the_screen_prices_a_collective_like_the_simulator)
{
  g_autoptr (SgGraph) g = beside_graph (NO_GLOBAL, RS_QUIET_GEMM "," RS_SLOW_MAP);
  SgSimResult r;
  ck_assert (sg_simulate (g, NULL, &r, NULL));
  SgBeside *b = sg_beside_new (g, &r);
  const SgNodeId rs = id_of (g, "rs");
  ck_assert_double_eq_tol (sg_beside_end (b, rs, 1024, 0, 40), row_of (&r, g, "rs")->end_us, 1e-9);
  /* started in the middle of relu: 20 us beside it (10 of work), 30 beside mm */
  ck_assert_double_eq_tol (sg_beside_end (b, rs, 1024, 10, 40), 60, 1e-9);
  /* past the compute: full speed */
  ck_assert_double_eq_tol (sg_beside_end (b, rs, 1024, 200, 40), 240, 1e-9);
  sg_beside_free (b);
  sg_sim_result_clear (&r);
  /* one rate for every kernel (no contention profile): beside compute
   * throughout, the screen's old rule, even past the compute */
  g_autoptr (SgGraph) plain = beside_graph ("{\"reduce_slowdown\": 1.3}", NULL);
  ck_assert (sg_simulate (plain, NULL, &r, NULL));
  b = sg_beside_new (plain, &r);
  ck_assert_double_eq_tol (sg_beside_end (b, id_of (plain, "rs"), 1024, 200, 40), 252, 1e-9);
  sg_beside_free (b);
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (compute_slows_by_the_most_disturbing_collective)
{
  /* ag (group a, 30 us) beside GEMMs: wait_before 0.5, comm_x 1.5,
   * kernel_x 2 (the run of tests/estimate's
   * derive_places_the_start_by_a_whole_slowed_rep); rs (group b, 200 us)
   * quiet beside GEMMs */
  SgGraph *g = tb_new (2);
  tb_group (g, "a", 2, 0, 1);
  tb_group (g, "b", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 32, 16);
  tb_cost (g, tb_all_gather (g, "ag", "x", "a"), 30);
  tb_cost (g, tb_reduce_scatter (g, "rs", "x", "b"), 200);
  tb_cost (g, tb_mm (g, "mm", "x", "x"), 100);
  tb_wait (g, "wa", "ag");
  tb_wait (g, "wb", "rs");
  tb_output (g, 3, "mm", "wa", "wb");
  estimate (g, NO_GLOBAL,
            "{\"kind\":\"all_gather\",\"bytes\":2048,\"group_size\":2,\"kernel\":\"gemm\","
            "\"kernel_key\":\"g\",\"order\":\"comm_first\",\"comm_solo_us\":300,"
            "\"rep_solo_us\":100,\"comm_us\":500,\"reps_us\":[150,200,175,100,100]},"
            "{\"kind\":\"reduce_scatter\",\"bytes\":1024,\"group_size\":2,\"kernel\":\"gemm\","
            "\"kernel_key\":\"g\",\"order\":\"comm_first\",\"comm_solo_us\":30,"
            "\"rep_solo_us\":100,\"comm_us\":30,\"reps_us\":[100,100]}");
  SgSimResult r;
  ck_assert (sg_simulate (g, NULL, &r, NULL));
  /* rs runs from 0 (quiet); ag waits for half of mm's work, which runs at
   * 1/2 meanwhile (ag held is resident too): 100 us; then ag runs 45 us at
   * 1/1.5 while mm runs at 1/2 (22.5 of work), then mm's last 27.5 beside
   * rs alone at full speed */
  ck_assert_double_eq_tol (row_of (&r, g, "ag")->start_us, 100, 1e-9);
  ck_assert_double_eq_tol (row_of (&r, g, "ag")->end_us, 145, 1e-9);
  ck_assert_double_eq_tol (r.node_end[id_of (g, "mm")], 172.5, 1e-9);
  ck_assert_double_eq_tol (row_of (&r, g, "rs")->end_us, 200, 1e-9);
  sg_sim_result_clear (&r);
  sg_graph_free (g);
}
END_TEST

/* An all_gather measured beside GEMMs: issued with the chain it waited for
 * the first (100 us, wait_before 1), then ran 50 us beside the second,
 * which it slowed by 2 (125 us). */
#define AG_HELD_GEMM                                                                           \
  "{\"kind\":\"all_gather\",\"bytes\":2048,\"group_size\":2,\"kernel\":\"gemm\","           \
  "\"kernel_key\":\"g\",\"order\":\"comm_first\",\"comm_solo_us\":50,\"rep_solo_us\":100,"     \
  "\"comm_us\":150,\"reps_us\":[100,125,100,100]}"

/* x -> ag (50 us) ; mm (100 us) ; wait, estimated with @cluster_json and
 * @entries; the simulated mm end and step. */
static void
held_case (const char *cluster_json, const char *entries, double *mm_end, double *step)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 32, 16);
  tb_cost (g, tb_all_gather (g, "ag", "x", "0"), 50);
  tb_cost (g, tb_mm (g, "mm", "x", "x"), 100);
  tb_wait (g, "w", "ag");
  tb_output (g, 2, "mm", "w");
  estimate (g, cluster_json, entries);
  SgSimResult r;
  ck_assert (sg_simulate (g, NULL, &r, NULL));
  *mm_end = r.node_end[id_of (g, "mm")];
  *step = r.step_us;
  sg_sim_result_clear (&r);
}

START_TEST (a_held_collective_slows_the_kernel_that_holds_it)
{
  /* ag (50 us) issued right before mm (100 us) waits for all of it; with
   * measured pairs it is resident meanwhile (on the rank where it got in
   * first), so mm runs at 1/2: it ends at 200, ag at 250 */
  double mm_end, step;
  held_case (NO_GLOBAL, AG_HELD_GEMM, &mm_end, &step);
  ck_assert_double_eq_tol (mm_end, 200, 1e-9);
  ck_assert_double_eq_tol (step, 250, 1e-9);
  /* ranks kept aligned (contention_held_scale 0, as the profiler runs):
   * held, not resident, mm at full speed */
  held_case ("{\"comm_start_wait\": 0, \"comm_slowdown\": 1, \"reduce_slowdown\": 1, "
             "\"compute_slowdown\": 1, \"contention_held_scale\": 0}",
             AG_HELD_GEMM, &mm_end, &step);
  ck_assert_double_eq_tol (mm_end, 100, 1e-9);
  ck_assert_double_eq_tol (step, 150, 1e-9);
  /* the global factors (no measured pair): held, but not slowing mm */
  held_case ("{\"comm_start_wait\": 1, \"comm_slowdown\": 1, \"compute_slowdown\": 2}", NULL,
             &mm_end, &step);
  ck_assert_double_eq_tol (mm_end, 100, 1e-9);
  ck_assert_double_eq_tol (step, 150, 1e-9);
}
END_TEST

/* A reduce_scatter (60 us) beside 100 us GEMMs and 60 us maps: "holds"
 * that kernel class (wait_before 1, and slows it by 2 once running),
 * the other class is quiet (no wait, no slowdown). */
#define RS_PAIR(kernel, key, rep, comm, reps)                                                  \
  "{\"kind\":\"reduce_scatter\",\"bytes\":2048,\"group_size\":2,\"kernel\":\"" kernel "\","  \
  "\"kernel_key\":\"" key "\",\"order\":\"comm_first\",\"comm_solo_us\":60,"                    \
  "\"rep_solo_us\":" rep ",\"comm_us\":" comm ",\"reps_us\":[" reps "]}"
#define RS_HELD_BY_GEMM RS_PAIR ("gemm", "g", "100", "160", "100,130,100,100")
#define RS_QUIET_BESIDE_GEMM RS_PAIR ("gemm", "g", "100", "60", "100,100,100")
#define RS_HELD_BY_MAP RS_PAIR ("map", "m", "60", "120", "60,90,60,60")
#define RS_QUIET_BESIDE_MAP RS_PAIR ("map", "m", "60", "60", "60,60,60")

/* g1 (mm, 100 us) -> rs (60 us) -> w; then g2 (mm, 100 us) and m (map,
 * 60 us), independent, in the input order @first then the other; the
 * order the scheduler chose. */
static SgNodeId *
placed_reduction (const char *entries, bool map_first, SgGraph **out, double *step)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 32, 32);
  tb_cost (g, tb_mm (g, "g1", "x", "x"), 100);
  tb_cost (g, tb_reduce_scatter (g, "rs", "g1", "0"), 60);
  tb_wait (g, "w", "rs");
  if (map_first)
    tb_cost (g, tb_pointwise (g, "m", "aten.relu.default", "x", NULL), 60);
  tb_cost (g, tb_mm (g, "g2", "x", "x"), 100);
  if (!map_first)
    tb_cost (g, tb_pointwise (g, "m", "aten.relu.default", "x", NULL), 60);
  tb_output (g, 3, "w", "g2", "m");
  estimate (g, NO_GLOBAL, entries);
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.max_peak_increase = 100.0;
  SgScheduleStats st;
  GError *err = NULL;
  SgNodeId *o = sg_schedule_compute (g, &cfg, &st, &err);
  ck_assert_msg (o != NULL, "%s", err ? err->message : "");
  SgSimResult r;
  ck_assert (sg_simulate (g, o, &r, NULL));
  *step = r.step_us;
  sg_sim_result_clear (&r);
  *out = g;
  return o;
}

static int32_t
position (const SgGraph *g, const SgNodeId *o, const char *name)
{
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (o[i] == id_of (g, name))
      return i;
  return -1;
}

START_TEST (a_reduction_goes_where_its_measured_pairs_make_it_cheap)
{
  /* held by GEMMs, quiet beside maps: the map goes first, the
   * reduce_scatter runs beside it (60 us), then g2: 260 us (the input
   * order holds it through g2, slowed to 200: 360) */
  SgGraph *g;
  double step;
  g_autofree SgNodeId *a = placed_reduction (RS_HELD_BY_GEMM "," RS_QUIET_BESIDE_MAP, false, &g,
                                             &step);
  ck_assert_int_lt (position (g, a, "m"), position (g, a, "g2"));
  ck_assert_double_eq_tol (step, 260, 1e-9);
  sg_graph_free (g);
  /* the other way round: the GEMM goes first */
  g_autofree SgNodeId *b = placed_reduction (RS_QUIET_BESIDE_GEMM "," RS_HELD_BY_MAP, true, &g,
                                             &step);
  ck_assert_int_lt (position (g, b, "g2"), position (g, b, "m"));
  ck_assert_double_eq_tol (step, 260, 1e-9);
  sg_graph_free (g);
}
END_TEST

/* x -> ag (@tc) ; N GEMMs of @t ; wait. Global factors from the cluster. */
static SgGraph *
chain_graph (int n, double tc, double t, double cx, double kx, double sw)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 32, 16);
  tb_cost (g, tb_all_gather (g, "ag", "x", "0"), tc);
  for (int i = 0; i < n; i++) {
    g_autofree char *name = g_strdup_printf ("k%d", i);
    tb_cost (g, tb_mm (g, name, "x", "x"), t);
  }
  tb_wait (g, "w", "ag");
  tb_output (g, 2, "k0", "w");
  g_autofree char *cl = g_strdup_printf (
    "{\"comm_start_wait\": %g, \"comm_slowdown\": %g, \"compute_slowdown\": %g}", sw, cx, kx);
  estimate (g, cl, NULL);
  return g;
}

START_TEST (deriving_a_pair_inverts_the_simulator)
{
  /* the simulator's timeline of a collective issued with a chain, read as
   * a measurement, gives back the rates it was simulated with */
  static const struct {
    double tc, t, cx, kx, sw;
  } cases[] = {
    { 300, 100, 1.5, 2.0, 0.5 }, { 300, 100, 1.2, 1.3, 1.0 }, { 500, 50, 1.05, 1.22, 0.0 },
    { 250, 40, 3.0, 1.5, 0.25 },
  };
  for (size_t c = 0; c < G_N_ELEMENTS (cases); c++) {
    const int n = 24;
    g_autoptr (SgGraph) g = chain_graph (n, cases[c].tc, cases[c].t, cases[c].cx, cases[c].kx,
                                         cases[c].sw);
    SgSimResult r;
    ck_assert (sg_simulate (g, NULL, &r, NULL));
    double reps[24];
    const double t0 = r.node_start[id_of (g, "k0")];
    for (int i = 0; i < n; i++) {
      g_autofree char *name = g_strdup_printf ("k%d", i);
      reps[i] = r.node_end[id_of (g, name)] - r.node_start[id_of (g, name)];
    }
    const SgCollRow *ag = row_of (&r, g, "ag");
    SgContentionRun run = { cases[c].tc, cases[c].t, ag->issue_us - t0, ag->end_us - ag->issue_us,
                            reps, n, 1, false, NAN };
    SgPairRates p;
    ck_assert_msg (sg_contention_derive (&run, &p), "case %zu: start not placed", c);
    ck_assert_msg (fabs (p.comm_x - cases[c].cx) < 1e-6 && fabs (p.kernel_x - cases[c].kx) < 1e-6
                     && fabs (p.wait_before - cases[c].sw) < 1e-6,
                   "case %zu: derived %g %g %g", c, p.comm_x, p.kernel_x, p.wait_before);
    sg_sim_result_clear (&r);
  }
}
END_TEST

static Suite *
suite (void)
{
  Suite *s = suite_create ("pairs");
  TCase *tc = tcase_create ("pairs");
  tcase_add_test (tc, a_collective_is_priced_by_the_kernel_beside_it);
  tcase_add_test (tc, the_screen_prices_a_collective_like_the_simulator);
  tcase_add_test (tc, compute_slows_by_the_most_disturbing_collective);
  tcase_add_test (tc, a_held_collective_slows_the_kernel_that_holds_it);
  tcase_add_test (tc, a_reduction_goes_where_its_measured_pairs_make_it_cheap);
  tcase_add_test (tc, deriving_a_pair_inverts_the_simulator);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}

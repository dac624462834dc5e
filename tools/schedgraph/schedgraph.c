/* schedgraph.c: the command-line driver: options and the pipeline.
 *
 * schedgraph [OPTIONS] GRAPH.json runs the pass list below through
 * sg_pass_run(): load -> validate -> estimate -> simulate-input ->
 * decompose -> schedule -> bucket -> polish -> simulate -> codegen (graph
 * passes, and steps that need the run's state), each timed, followed by
 * the validator with --validate (default on in debug builds) and dumped
 * with --dump=PASS; then it prints the summary and writes the outputs
 * (outputs.c). The simulations are handed on with the graph
 * (sg_graph_simulation): every order is simulated once. Outputs are
 * produced in memory first and written atomically only when every step
 * succeeded.
 *
 * Exit status: 0 ok, 1 bad input or failed step (`schedgraph: FILE:
 * message` on stderr, nothing written), 2 usage error.
 *
 * Requires: graph/, estimate/, schedule/, decompose/, bucket/, codegen/, plan/.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "schedgraph-private.h"

#ifndef SG_VALIDATE_DEFAULT
#define SG_VALIDATE_DEFAULT 0
#endif

/* --- the pipeline ------------------------------------------------------------ */

static bool
step_load (SgGraph **g, const SgConfig *cfg, gpointer data, GError **error)
{
  Run *r = data;
  *g = sg_graph_load_with (r->cli->graph_path, false, cfg->pool, error);
  if (!*g)
    return false;
  r->input_nodes = (*g)->n_nodes;
  return true;
}

static bool
step_validate (SgGraph **g, const SgConfig *cfg, gpointer data, GError **error)
{
  if (!sg_graph_validate_with (*g, cfg->pool, error))
    return false;
  summary_graph (data);
  return true;
}

static bool
step_simulate_input (SgGraph **gp, const SgConfig *cfg, gpointer data, GError **error)
{
  Run *r = data;
  SgGraph *g = *gp;
  /* kept with the graph: the schedule pass starts from it */
  SgSimResult *input = sg_graph_simulation_refined (g, cfg->pool, error);
  if (!input)
    return false;
  /* Rows name nodes by id: resolve them before a pass renumbers (only the
   * report reads them). */
  if (r->cli->report) {
    r->input_metrics = sg_report_metrics (g, input);
    r->input_rows = sg_report_rows (g, input);
  }
  summary_sim (r, "input order", input);
  if (!r->cli->order)
    return true;
  r->error_file = r->cli->order;
  g_autofree SgNodeId *order = sg_order_load (g, r->cli->order, error);
  if (!order || !sg_simulate (g, order, &r->given, error))
    return false;
  r->error_file = NULL;
  r->have_given = true;
  sg_lower_bound_refine_pool (g, &r->given, cfg->pool);
  if (r->cli->report) {
    r->given_metrics = sg_report_metrics (g, &r->given);
    r->given_rows = sg_report_rows (g, &r->given);
  }
  g_autofree char *label = g_strdup_printf ("given order (%s)", r->cli->order);
  summary_sim (r, label, &r->given);
  /* With --no-reorder the plan follows the given order: the graph takes it
   * (the schedule pass then keeps it; names in the report above are
   * resolved already). */
  if (!cfg->reorder && !sg_graph_permute (g, order, error))
    return false;
  return true;
}

static bool
step_simulate_final (SgGraph **g, const SgConfig *cfg, gpointer data, GError **error)
{
  Run *r = data;
  /* the last pass's simulation of this order, kept with the graph */
  r->final = sg_graph_simulation_refined (*g, cfg->pool, error);
  if (!r->final)
    return false;
  const char *label = cfg->reorder ? "scheduled order"
                      : r->cli->order ? "final order (--order, --no-reorder)"
                                      : "final order (--no-reorder)";
  summary_sim (r, label, r->final);
  return true;
}

static bool
step_codegen (SgGraph **g, const SgConfig *cfg, gpointer data, GError **error)
{
  Run *r = data;
  if (!r->cli->output)
    return true;
  g_autofree char *opts = sg_codegen_options_text (cfg);
  /* The file name alone: the same graph and options give the same plan
   * bytes however the path was spelled (./a.json, /abs/a.json). */
  g_autofree char *graph_name = g_path_get_basename (r->cli->graph_path);
  /* The passes' freed arrays stay resident in the heap: given back before
   * the plan, the run's peak, is built beside the graph (1M nodes: 933 ->
   * 865 MB peak RSS). */
  sg_heap_trim ();
  return sg_codegen_plan (*g, cfg, r->final, graph_name, opts, &r->plan, error);
}

/* The pipeline: graph passes and the steps that need the run's state (the
 * input, the simulations, the plan). sg_pass_run() times, validates and
 * dumps after each alike. */
static const SgPass pipeline[] = {
  { .name = "load", .step = step_load, .unchecked = true },
  { .name = "validate", .step = step_validate, .unchecked = true },
  { .name = "estimate", .run = sg_estimate_costs },
  { .name = "simulate-input", .step = step_simulate_input },
  { .name = "decompose", .run = sg_decompose_pass },
  { .name = "schedule", .run = sg_schedule_reorder },
  { .name = "bucket", .run = sg_bucket_pass },
  { .name = "polish", .run = sg_schedule_polish_pass },
  { .name = "simulate", .step = step_simulate_final },
  { .name = "codegen", .step = step_codegen },
};
enum { N_PIPELINE = G_N_ELEMENTS (pipeline) };
G_STATIC_ASSERT (N_PIPELINE <= MAX_TIMES);

/* The pipeline's length up to and with @name, or 0. */
static size_t
pipeline_until (const char *name)
{
  for (size_t i = 0; i < N_PIPELINE; i++)
    if (strcmp (pipeline[i].name, name) == 0)
      return i + 1;
  return 0;
}

/* Names --dump and --stop-after accept: every step above, and "all"
 * (--dump only). */
static bool
known_pass (const char *name)
{
  return strcmp (name, "all") == 0 || pipeline_until (name) > 0;
}

/* --- usage ------------------------------------------------------------------- */

static const char usage_text[] =
  "Usage: schedgraph [OPTIONS] GRAPH.json\n"
  "\n"
  "Loads the op graph of a training step (docs/graph-format.md), estimates costs,\n"
  "reorders it to hide collectives behind compute, buckets collectives and writes\n"
  "a stream-program plan for schedrun.\n"
  "\n"
  "Outputs:\n"
  "  -o, --output PLAN.json       write the plan (atomically, only on success)\n"
  "      --report REPORT.json     write the report (metrics per order, collectives)\n"
  "      --trace TRACE.json       Chrome trace of the predicted timeline\n"
  "      --order ORDER.json       also evaluate this order (JSON array of node names)\n"
  "      --emit-graph FILE        write the final graph (scheduled order, buckets) in\n"
  "                               the graph format (docs/graph-format.md)\n"
  "      --costs                  print the per-node cost table and exit\n"
  "Passes:\n"
  "      --no-reorder             keep the input order (with --order: plan that order)\n"
  "      --exact                  optimal order by exhaustive search (small graphs: at most\n"
  "                               16 compute nodes with a cost and 6 collectives; no\n"
  "                               memory limit)\n"
  "      --no-bucket              do not merge collectives\n"
  "      --decompose MODE         split all_gather->mm, mm->reduce_scatter and\n"
  "                               mm->all_reduce into ring steps / row chunks: auto\n"
  "                               (default: where the simulator predicts a shorter\n"
  "                               step), all (every site found), all-gather (every\n"
  "                               all_gather->mm site, nothing else), off\n"
  "      --no-decompose           the same as --decompose off\n"
  "      --cluster NAME|FILE      preset (h200-sxm, h100-sxm, a100-sxm) or cluster JSON\n"
  "                               (docs/cluster-format.md; default: the graph's\n"
  "                               `cluster`, else h200-sxm)\n"
  "      --profile FILE           measured times (docs/profile-format.md)\n"
  "      --max-in-flight BYTES    bytes of collectives in flight per group (0: no limit)\n"
  "      --max-peak-increase F    allowed peak-memory growth over the input order (0.05)\n"
  "      --prefetch-limit N       collectives started ahead per group (0: no limit)\n"
  "      --bucket-cap BYTES       largest bucket (default 256M)\n"
  "      --bucket-mode MODE       auto (default: the shorter predicted step of a\n"
  "                               greedy search and per-layer buckets) or per-layer\n"
  "                               (FSDP2's: one bucket per layer and collective kind)\n"
  "      --bucket-lowering L      auto (default: per bucket, the shorter predicted\n"
  "                               step), flat (one collective over a packed buffer)\n"
  "                               or grouped (one coalesced call, no copies)\n"
  "  BYTES take the suffixes K, M, G (KiB, MiB, GiB).\n"
  "Speed:\n"
  "      --threads N              worker threads of the passes, this one included\n"
  "                               (default: one per processor, at most 64; 1: none);\n"
  "                               the outputs are the same whatever N is\n"
  "Debugging:\n"
  "      --dump=PASS              print the IR to stderr after PASS: load, validate,\n"
  "                               estimate, simulate-input, decompose, schedule,\n"
  "                               bucket, polish, simulate, codegen, or all\n"
  "      --stop-after=PASS        run up to PASS, print the summary, write nothing\n"
  "      --validate               run the validator after every pass\n"
  "      --no-validate            do not (default unless built with buildtype=debug)\n"
  "  -q, --quiet                  no summary on stdout\n"
  "  -h, --help                   this text\n"
  "      --version                print the version\n"
  "\n"
  "Exit status: 0 ok, 1 bad input or a failed pass (nothing written), 2 usage error.\n";

static int G_GNUC_PRINTF (1, 2)
usage_error (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  fprintf (stderr, "schedgraph: %s\nTry 'schedgraph --help' for more information.\n", msg);
  return EXIT_USAGE;
}

/* "123", "64K", "256M", "2G" (binary units); false on junk or overflow. */
static bool
parse_bytes (const char *s, uint64_t *out)
{
  char *end;
  errno = 0;
  if (!g_ascii_isdigit (s[0]))
    return false;
  guint64 v = g_ascii_strtoull (s, &end, 10);
  if (errno)
    return false;
  unsigned shift = 0;
  switch (g_ascii_toupper (*end)) {
  case 'K': shift = 10; end++; break;
  case 'M': shift = 20; end++; break;
  case 'G': shift = 30; end++; break;
  default: break;
  }
  if (shift && (*end == 'i' || *end == 'I') && (end[1] == 'B' || end[1] == 'b'))
    end += 2;
  if (*end || v > (G_MAXUINT64 >> shift))
    return false;
  *out = v << shift;
  return true;
}

static bool
parse_fraction (const char *s, double *out)
{
  char *end;
  errno = 0;
  double v = g_ascii_strtod (s, &end);
  if (errno || *end || end == s || !(v >= 0 && v <= 1000))
    return false;
  *out = v;
  return true;
}

static bool
parse_count (const char *s, int32_t *out)
{
  char *end;
  errno = 0;
  if (!g_ascii_isdigit (s[0]))
    return false;
  guint64 v = g_ascii_strtoull (s, &end, 10);
  if (errno || *end || v > G_MAXINT32)
    return false;
  *out = (int32_t)v;
  return true;
}

enum {
  OPT_REPORT = 256, OPT_TRACE, OPT_ORDER, OPT_NO_REORDER, OPT_NO_BUCKET, OPT_CLUSTER,
  OPT_PROFILE, OPT_MAX_IN_FLIGHT, OPT_MAX_PEAK, OPT_PREFETCH, OPT_BUCKET_CAP, OPT_BUCKET_MODE,
  OPT_BUCKET_LOWERING, OPT_COSTS, OPT_DECOMPOSE, OPT_NO_DECOMPOSE,
  OPT_DUMP, OPT_STOP_AFTER, OPT_VALIDATE, OPT_NO_VALIDATE, OPT_VERSION, OPT_EXACT, OPT_EMIT_GRAPH,
  OPT_THREADS,
};

/* Returns -1 to go on, else the exit status. */
static int
parse_args (int argc, char **argv, Cli *cli)
{
  static const struct option longopts[] = {
    { "output", required_argument, NULL, 'o' },
    { "report", required_argument, NULL, OPT_REPORT },
    { "trace", required_argument, NULL, OPT_TRACE },
    { "order", required_argument, NULL, OPT_ORDER },
    { "emit-graph", required_argument, NULL, OPT_EMIT_GRAPH },
    { "no-reorder", no_argument, NULL, OPT_NO_REORDER },
    { "exact", no_argument, NULL, OPT_EXACT },
    { "no-bucket", no_argument, NULL, OPT_NO_BUCKET },
    { "decompose", required_argument, NULL, OPT_DECOMPOSE },
    { "no-decompose", no_argument, NULL, OPT_NO_DECOMPOSE },
    { "cluster", required_argument, NULL, OPT_CLUSTER },
    { "profile", required_argument, NULL, OPT_PROFILE },
    { "max-in-flight", required_argument, NULL, OPT_MAX_IN_FLIGHT },
    { "max-peak-increase", required_argument, NULL, OPT_MAX_PEAK },
    { "prefetch-limit", required_argument, NULL, OPT_PREFETCH },
    { "bucket-cap", required_argument, NULL, OPT_BUCKET_CAP },
    { "bucket-mode", required_argument, NULL, OPT_BUCKET_MODE },
    { "bucket-lowering", required_argument, NULL, OPT_BUCKET_LOWERING },
    { "costs", no_argument, NULL, OPT_COSTS },
    { "threads", required_argument, NULL, OPT_THREADS },
    { "dump", required_argument, NULL, OPT_DUMP },
    { "stop-after", required_argument, NULL, OPT_STOP_AFTER },
    { "validate", no_argument, NULL, OPT_VALIDATE },
    { "no-validate", no_argument, NULL, OPT_NO_VALIDATE },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, OPT_VERSION },
    { NULL, 0, NULL, 0 },
  };
  sg_config_init (&cli->cfg);
  cli->cfg.validate_between = SG_VALIDATE_DEFAULT;
  opterr = 0;
  optind = 1;
  int c;
  while ((c = getopt_long (argc, argv, ":o:qh", longopts, NULL)) != -1) {
    const char *opt = argv[optind - 1];
    switch (c) {
    case 'o': cli->output = optarg; break;
    case OPT_REPORT: cli->report = optarg; break;
    case OPT_TRACE: cli->trace = optarg; break;
    case OPT_ORDER: cli->order = optarg; break;
    case OPT_EMIT_GRAPH: cli->emit_graph = optarg; break;
    case OPT_NO_REORDER: cli->cfg.reorder = false; break;
    case OPT_EXACT: cli->cfg.exact = true; break;
    case OPT_NO_BUCKET: cli->cfg.bucket = false; break;
    case OPT_DECOMPOSE:
      if (!sg_decompose_mode_from_name (optarg, &cli->cfg.decompose))
        return usage_error ("--decompose: '%s' is not auto, all, all-gather or off", optarg);
      break;
    case OPT_NO_DECOMPOSE: cli->cfg.decompose = SG_DECOMPOSE_OFF; break;
    case OPT_CLUSTER: cli->cfg.cluster = optarg; break;
    case OPT_PROFILE: cli->cfg.profile = optarg; break;
    case OPT_MAX_IN_FLIGHT:
      if (!parse_bytes (optarg, &cli->cfg.max_in_flight_bytes))
        return usage_error ("--max-in-flight: '%s' is not a byte count (e.g. 512M)", optarg);
      break;
    case OPT_BUCKET_CAP:
      if (!parse_bytes (optarg, &cli->cfg.bucket_cap_bytes) || cli->cfg.bucket_cap_bytes == 0)
        return usage_error ("--bucket-cap: '%s' is not a positive byte count (e.g. 256M)",
                            optarg);
      break;
    case OPT_BUCKET_MODE:
      if (!sg_bucket_mode_from_name (optarg, &cli->cfg.bucket_mode))
        return usage_error ("--bucket-mode: '%s' is not auto or per-layer", optarg);
      break;
    case OPT_BUCKET_LOWERING:
      if (!sg_bucket_lowering_from_name (optarg, &cli->cfg.bucket_lowering))
        return usage_error ("--bucket-lowering: '%s' is not auto, flat or grouped", optarg);
      break;
    case OPT_MAX_PEAK:
      if (!parse_fraction (optarg, &cli->cfg.max_peak_increase))
        return usage_error ("--max-peak-increase: '%s' is not a fraction >= 0 (e.g. 0.05)",
                            optarg);
      break;
    case OPT_PREFETCH:
      if (!parse_count (optarg, &cli->cfg.prefetch_limit))
        return usage_error ("--prefetch-limit: '%s' is not a count >= 0", optarg);
      break;
    case OPT_COSTS: cli->costs = true; break;
    case OPT_THREADS:
      if (!parse_count (optarg, &cli->threads) || cli->threads < 1
          || cli->threads > SG_POOL_MAX_THREADS)
        return usage_error ("--threads: '%s' is not a count from 1 to %d", optarg,
                            SG_POOL_MAX_THREADS);
      break;
    case OPT_DUMP:
      if (!known_pass (optarg))
        return usage_error ("--dump: unknown pass '%s'", optarg);
      cli->cfg.dump_pass = optarg;
      break;
    case OPT_STOP_AFTER:
      if (!known_pass (optarg) || strcmp (optarg, "all") == 0)
        return usage_error ("--stop-after: unknown pass '%s'", optarg);
      cli->stop_after = optarg;
      break;
    case OPT_VALIDATE: cli->cfg.validate_between = true; break;
    case OPT_NO_VALIDATE: cli->cfg.validate_between = false; break;
    case 'q': cli->quiet = true; break;
    case 'h': fputs (usage_text, stdout); return EXIT_OK;
    case OPT_VERSION: printf ("schedgraph %s\n", SG_VERSION); return EXIT_OK;
    case ':': return usage_error ("option '%s' needs an argument", opt);
    default: return usage_error ("unknown option '%s'", opt);
    }
  }
  if (optind >= argc)
    return usage_error ("no graph file given");
  if (argc - optind > 1)
    return usage_error ("one graph file expected, got %d (extra: '%s')", argc - optind,
                        argv[optind + 1]);
  cli->graph_path = argv[optind];
  g_autofree char *clash = outputs_clash (cli);
  if (clash)
    return usage_error ("%s", clash);
  if (cli->cfg.exact && !cli->cfg.reorder)
    return usage_error ("--exact and --no-reorder contradict each other");
  if (cli->stop_after && (cli->output || cli->report || cli->trace || cli->emit_graph || cli->costs))
    return usage_error (
        "--stop-after writes nothing: drop -o, --report, --trace, --emit-graph and --costs");
  return -1;
}

/* --- main -------------------------------------------------------------------- */

/* One line per error: control characters (from names in the input) are
 * shown escaped. */
static void
put_escaped (FILE *out, const char *s)
{
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c < 0x20 || c == 0x7f)
      fprintf (out, "\\x%02x", c);
    else
      fputc (c, out);
  }
}

static int
fail_input (const char *path, GError *error)
{
  fputs ("schedgraph: ", stderr);
  put_escaped (stderr, path);
  fputs (": ", stderr);
  put_escaped (stderr, error->message);
  fputc ('\n', stderr);
  g_error_free (error);
  return EXIT_INPUT;
}

/* Runs the pipeline; false with @error (and r->error_file) on failure.
 * *stopped: the run ended early (--stop-after, --costs) and writes nothing. */
static bool
run_pipeline (Run *r, bool *stopped, GError **error)
{
  const Cli *cli = r->cli;
  size_t n = N_PIPELINE;
  if (cli->costs)
    n = pipeline_until ("estimate");
  else if (cli->stop_after)
    n = pipeline_until (cli->stop_after);
  *stopped = n < N_PIPELINE;
  if (!sg_pass_run (&r->g, &cli->cfg, pipeline, n, r, r->times, error))
    return false;
  r->n_times = n;
  if (cli->costs)
    sg_estimate_print_costs (r->g, stdout);
  else if (n == 1)
    summary_graph (r); /* --stop-after=load */
  return true;
}

int
main (int argc, char **argv)
{
  Cli cli = { 0 };
  int rc = parse_args (argc, argv, &cli);
  if (rc >= 0)
    return rc;
#ifdef __GLIBC__
  /* Blocks from 1 MiB on are mapped and given back when freed. glibc's
   * own threshold climbs to 32 MiB after the first large block is freed;
   * past that, the per-node arrays that the pool's threads free stay in
   * those threads' arenas, which the next pass's allocations on another
   * thread do not reuse: the 1M-node graph's peak RSS with 16 threads was
   * 1048-1113 MB, with the fixed threshold 911-913 MB (one thread: 902);
   * the 6.7K and 36K runs took as long either way (bench/RESULTS.md,
   * "Pipeline speed", tenth run). */
  mallopt (M_MMAP_THRESHOLD, 1 << 20);
#endif
  cli.cfg.pool = sg_pool_new (cli.threads ? cli.threads : sg_pool_default_threads ());
  Run r = { .cli = &cli, .summary = g_string_new (NULL) };
  GError *error = NULL;
  bool stopped;
  bool ok = run_pipeline (&r, &stopped, &error);
  /* the summary's last lines read the graph, which write_outputs frees */
  bool summary = ok && !cli.quiet && !cli.costs;
  if (summary)
    summary_finish (&r);
  if (ok && !stopped)
    ok = write_outputs (&r, &error);
  if (!ok)
    rc = fail_input (r.error_file ? r.error_file : cli.graph_path, error);
  else
    rc = EXIT_OK;
  if (ok && summary)
    fputs (r.summary->str, stdout);
  /* The plan is left to the process's end, not freed: each instruction
   * holds its arguments as a tree of small blocks (the 1M-node graph's
   * plan: millions, 0.1-0.3 s of free () after the file is written).
   * exit () from this frame, which holds it, keeps it reachable for leak
   * checkers. */
  SgPlan *plan = g_steal_pointer (&r.plan);
  run_clear (&r);
  sg_graph_free (r.g);
  sg_pool_free (cli.cfg.pool);
  r.plan = plan;
  exit (rc);
}

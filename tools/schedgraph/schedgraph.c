/* schedgraph.c: the command-line driver.
 *
 * schedgraph [OPTIONS] GRAPH.json: load -> validate -> the pass table ->
 * summary -> output files. The pipeline is a list of SgPass run by
 * sg_pass_run() (each pass timed, the validator between passes with
 * --validate, on by default in debug builds; --dump=PASS). Outputs are
 * produced in memory first and written (atomically: temporary file +
 * rename) only when every pass succeeded, so bad input leaves nothing.
 *
 * Exit status: 0 ok, 1 bad input or failed pass (`schedgraph: FILE:
 * message` on stderr, nothing written), 2 usage error.
 *
 * Requires: graph/ and whichever later modules the pass table lists.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

#ifndef SG_VALIDATE_DEFAULT
#define SG_VALIDATE_DEFAULT 0
#endif

enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_USAGE = 2 };

typedef struct {
  SgConfig cfg;
  const char *graph_path;
  const char *output, *report, *trace, *order;
  const char *stop_after; /* run the pipeline up to this pass, then summarise */
  bool costs, quiet;
} Cli;

/* --- the pipeline ------------------------------------------------------------ */

/* Passes after load and validate, in order; later modules append theirs
 * before the terminating row. */
static const SgPass pipeline[] = {
  { NULL, NULL },
};
#define N_PIPELINE (G_N_ELEMENTS (pipeline) - 1)

/* Names --dump accepts: "load", "validate", every pass above, "all". */
static bool
known_pass (const char *name)
{
  if (strcmp (name, "load") == 0 || strcmp (name, "validate") == 0 || strcmp (name, "all") == 0)
    return true;
  for (size_t i = 0; pipeline[i].name; i++)
    if (strcmp (pipeline[i].name, name) == 0)
      return true;
  return false;
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
  "      --costs                  print the per-node cost table and exit\n"
  "Passes:\n"
  "      --no-reorder             keep the input order\n"
  "      --no-bucket              do not merge collectives\n"
  "      --cluster NAME|FILE      machine preset or cluster JSON (default: the graph's)\n"
  "      --profile FILE           measured times (docs/profile-format.md)\n"
  "      --max-in-flight BYTES    bytes of collectives in flight per group (0: no limit)\n"
  "      --max-peak-increase F    allowed peak-memory growth over the input order (0.05)\n"
  "      --prefetch-limit N       collectives started ahead per group (0: no limit)\n"
  "      --bucket-cap BYTES       largest bucket (default 256M)\n"
  "  BYTES take the suffixes K, M, G (KiB, MiB, GiB).\n"
  "Debugging:\n"
  "      --dump=PASS              print the IR after PASS (load, validate, ..., all)\n"
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
  OPT_PROFILE, OPT_MAX_IN_FLIGHT, OPT_MAX_PEAK, OPT_PREFETCH, OPT_BUCKET_CAP, OPT_COSTS,
  OPT_DUMP, OPT_STOP_AFTER, OPT_VALIDATE, OPT_NO_VALIDATE, OPT_VERSION,
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
    { "no-reorder", no_argument, NULL, OPT_NO_REORDER },
    { "no-bucket", no_argument, NULL, OPT_NO_BUCKET },
    { "cluster", required_argument, NULL, OPT_CLUSTER },
    { "profile", required_argument, NULL, OPT_PROFILE },
    { "max-in-flight", required_argument, NULL, OPT_MAX_IN_FLIGHT },
    { "max-peak-increase", required_argument, NULL, OPT_MAX_PEAK },
    { "prefetch-limit", required_argument, NULL, OPT_PREFETCH },
    { "bucket-cap", required_argument, NULL, OPT_BUCKET_CAP },
    { "costs", no_argument, NULL, OPT_COSTS },
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
    case OPT_NO_REORDER: cli->cfg.reorder = false; break;
    case OPT_NO_BUCKET: cli->cfg.bucket = false; break;
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
  if (cli->stop_after && (cli->output || cli->report || cli->trace || cli->costs))
    return usage_error ("--stop-after writes nothing: drop -o, --report, --trace and --costs");
  return -1;
}

/* --- summary ----------------------------------------------------------------- */

static bool
is_compute (SgOpKind kind)
{
  switch (sg_op_class (kind)) {
  case SG_CLASS_INPUT:
  case SG_CLASS_OUTPUT:
  case SG_CLASS_GETITEM:
  case SG_CLASS_VIEW:
  case SG_CLASS_COLLECTIVE:
  case SG_CLASS_WAIT: return false;
  default: return true;
  }
}

static void
print_bytes (FILE *out, uint64_t b)
{
  fprintf (out, "%" G_GUINT64_FORMAT " B", b);
  if (b >= ((uint64_t)1 << 20))
    fprintf (out, " (%.1f MiB)", (double)b / (double)(1 << 20));
}

static void
print_summary (FILE *out, SgGraph *g, const SgPassTime *times, size_t n_times)
{
  int32_t compute = 0, colls = 0, waits = 0, inputs = 0;
  uint64_t comm = 0;
  int32_t ng = g->n_groups > 0 ? g->n_groups : 1;
  g_autofree int32_t *count = g_new0 (int32_t, (size_t)SG_OP_N_KINDS * (size_t)ng);
  g_autofree uint64_t *bytes = g_new0 (uint64_t, (size_t)SG_OP_N_KINDS * (size_t)ng);
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    const SgNode *n = &g->nodes[i];
    compute += is_compute (n->kind);
    waits += n->kind == SG_OP_WAIT;
    inputs += sg_op_class (n->kind) == SG_CLASS_INPUT;
    if (sg_op_is_collective (n->kind) && n->group >= 0) {
      uint64_t b = sg_node_comm_bytes (g, i);
      colls++;
      comm += b;
      count[(size_t)n->kind * (size_t)ng + (size_t)n->group]++;
      bytes[(size_t)n->kind * (size_t)ng + (size_t)n->group] += b;
    }
  }
  fprintf (out, "graph: %s (world_size %d, rank %d, %d groups)\n", g->source, g->world_size,
           g->rank, g->n_groups);
  fprintf (out, "nodes: %d (compute %d, inputs %d, collectives %d, waits %d, views/other %d)\n",
           g->n_nodes, compute, inputs, colls, waits, g->n_nodes - compute - inputs - colls - waits);
  if (colls) {
    fprintf (out, "collectives:\n  %-16s %-8s %6s %6s %16s\n", "kind", "group", "ranks", "count",
             "bytes");
    for (int k = 0; k < SG_OP_N_KINDS; k++)
      for (int32_t gr = 0; gr < g->n_groups; gr++) {
        size_t at = (size_t)k * (size_t)ng + (size_t)gr;
        if (count[at])
          fprintf (out, "  %-16s %-8s %6d %6d %16" G_GUINT64_FORMAT "\n", sg_op_name ((SgOpKind)k),
                   g->groups[gr].name, g->groups[gr].n_ranks, count[at], bytes[at]);
      }
  }
  fputs ("bytes communicated: ", out);
  print_bytes (out, comm);
  fputs ("\npeak live tensor bytes (input order): ", out);
  print_bytes (out, sg_graph_peak_bytes (g, NULL));
  fputs ("\npasses:", out);
  for (size_t i = 0; i < n_times; i++)
    fprintf (out, "%s %s %.3f ms", i ? "," : "", times[i].name, times[i].ms);
  fputc ('\n', out);
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

static void
dump_after (const Cli *cli, const SgGraph *g, const char *pass)
{
  const char *want = cli->cfg.dump_pass;
  if (!want || (strcmp (want, pass) != 0 && strcmp (want, "all") != 0))
    return;
  FILE *out = cli->cfg.dump_file ? cli->cfg.dump_file : stderr;
  fprintf (out, "# after %s\n", pass);
  sg_graph_dump (g, out);
}

static double
ms_since (gint64 t0)
{
  return (double)(g_get_monotonic_time () - t0) / 1000.0;
}

int
main (int argc, char **argv)
{
  Cli cli = { 0 };
  int rc = parse_args (argc, argv, &cli);
  if (rc >= 0)
    return rc;

  enum { N_TIMES = 2 + N_PIPELINE };
  SgPassTime times[N_TIMES];
  GError *error = NULL;
  gint64 t0 = g_get_monotonic_time ();
  g_autoptr (SgGraph) g = sg_graph_load_full (cli.graph_path, false, &error);
  times[0] = (SgPassTime){ "load", ms_since (t0) };
  if (!g)
    return fail_input (cli.graph_path, error);
  dump_after (&cli, g, "load");
  if (cli.stop_after && strcmp (cli.stop_after, "load") == 0) {
    if (!cli.quiet)
      print_summary (stdout, g, times, 1);
    return EXIT_OK;
  }
  t0 = g_get_monotonic_time ();
  bool valid = sg_graph_validate (g, &error);
  times[1] = (SgPassTime){ "validate", ms_since (t0) };
  if (!valid)
    return fail_input (cli.graph_path, error);
  dump_after (&cli, g, "validate");
  size_t n_run = N_PIPELINE;
  if (cli.stop_after) {
    n_run = 0;
    if (strcmp (cli.stop_after, "validate") != 0)
      while (strcmp (pipeline[n_run++].name, cli.stop_after) != 0)
        ;
  }
  if (!sg_pass_run (g, &cli.cfg, pipeline, n_run, times + 2, &error))
    return fail_input (cli.graph_path, error);
  if (cli.stop_after) {
    if (!cli.quiet)
      print_summary (stdout, g, times, 2 + n_run);
    return EXIT_OK;
  }

  /* Outputs whose producing module is not part of this build yet. */
  const char *unavailable = cli.output ? "-o" : cli.report ? "--report"
                          : cli.trace  ? "--trace" : cli.order ? "--order"
                          : cli.costs  ? "--costs" : NULL;
  if (unavailable)
    return usage_error ("%s: not available in this build (its pass has not landed)", unavailable);
  if (!cli.quiet)
    print_summary (stdout, g, times, N_TIMES);
  return EXIT_OK;
}

/* main.c: the graphgen command line. Parses and checks the options (exit 2
 * with a message naming the option on any bad value), then streams the graph
 * to stdout or atomically to -o FILE (a temporary file in the same folder,
 * renamed when complete: a failed run never leaves a partial graph).
 */
#include "graphgen.h"

#include <errno.h>
#include <getopt.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXIT_USAGE 2

static const char usage_text[] =
  "Usage: graphgen [OPTION]...\n"
  "Write the graph JSON (schedgraph graph-format v1) of one llama-like training\n"
  "step, forward and backward, with FSDP / tensor(+sequence) parallelism.\n"
  "\n"
  "Model:\n"
  "  --layers L          transformer blocks (default 2)\n"
  "  --hidden H          hidden size (default 256)\n"
  "  --ffn F             MLP size (default 688)\n"
  "  --heads NH          attention heads (default 4)\n"
  "  --seq S             sequence length, tokens per step (default 256)\n"
  "  --dtype T           bfloat16 | float16 | float32 (default bfloat16)\n"
  "  --target-nodes N    choose --layers so that the graph has about N nodes\n"
  "Parallelism:\n"
  "  --dp N              FSDP degree: weights sharded on dim 0 (default 2)\n"
  "  --tp M              tensor-parallel degree (default 1)\n"
  "  --tp-mode MODE      sp (sequence parallel: all_gather / reduce_scatter of\n"
  "                      activations, default) | allreduce (all_reduce after\n"
  "                      row-parallel matmuls and on input gradients)\n"
  "  --sp-norm-allreduce all_reduce the norm-weight gradients over tp under sp\n"
  "                      (Megatron-SP; the traced samples have none)\n"
  "  --world W           world size, a multiple of dp*tp (default dp*tp); more\n"
  "                      ranks replicate the mesh and all_reduce gradients (HSDP)\n"
  "  --rank R            the rank whose groups the graph lists (default 0)\n"
  "Output:\n"
  "  --cluster-gpu G     H200 | H100 | A100 | none: the \"cluster\" key (default H200)\n"
  "  -o, --output FILE   write FILE atomically (default: stdout)\n"
  "  --stats             print node and collective counts to stderr\n"
  "  -h, --help          this help\n"
  "  --version           print the version\n"
  "\n"
  "Exit status: 0 ok, 1 write error, 2 bad arguments.\n";

enum {
  OPT_LAYERS = 256,
  OPT_HIDDEN,
  OPT_FFN,
  OPT_HEADS,
  OPT_SEQ,
  OPT_DTYPE,
  OPT_TARGET,
  OPT_DP,
  OPT_TP,
  OPT_TP_MODE,
  OPT_SP_NORM_AR,
  OPT_WORLD,
  OPT_RANK,
  OPT_GPU,
  OPT_STATS,
  OPT_VERSION,
};

static const struct option long_opts[] = {
  { "layers", required_argument, NULL, OPT_LAYERS },
  { "hidden", required_argument, NULL, OPT_HIDDEN },
  { "ffn", required_argument, NULL, OPT_FFN },
  { "heads", required_argument, NULL, OPT_HEADS },
  { "seq", required_argument, NULL, OPT_SEQ },
  { "dtype", required_argument, NULL, OPT_DTYPE },
  { "target-nodes", required_argument, NULL, OPT_TARGET },
  { "dp", required_argument, NULL, OPT_DP },
  { "tp", required_argument, NULL, OPT_TP },
  { "tp-mode", required_argument, NULL, OPT_TP_MODE },
  { "sp-norm-allreduce", no_argument, NULL, OPT_SP_NORM_AR },
  { "world", required_argument, NULL, OPT_WORLD },
  { "rank", required_argument, NULL, OPT_RANK },
  { "cluster-gpu", required_argument, NULL, OPT_GPU },
  { "output", required_argument, NULL, 'o' },
  { "stats", no_argument, NULL, OPT_STATS },
  { "help", no_argument, NULL, 'h' },
  { "version", no_argument, NULL, OPT_VERSION },
  { NULL, 0, NULL, 0 },
};

static bool
parse_int (const char *opt, const char *s, int64_t *out)
{
  char *end = NULL;
  errno = 0;
  long long v = strtoll (s, &end, 10);
  if (errno || end == s || *end != '\0') {
    fprintf (stderr, "graphgen: --%s expects an integer, got '%s'\n", opt, s);
    return false;
  }
  *out = (int64_t)v;
  return true;
}

/* Writes to a temporary file beside @path, then renames it over @path. */
static int
write_atomic (const GgConfig *cfg, const char *path, GgStats *st)
{
  char *dir = g_path_get_dirname (path);
  char *base = g_path_get_basename (path);
  char *tmpl = g_strdup_printf ("%s/.%s.XXXXXX", dir, base);
  int rc = 1;
  FILE *f = NULL;
  int fd = g_mkstemp (tmpl);
  if (fd < 0) {
    fprintf (stderr, "graphgen: cannot create a file in %s: %s\n", dir, g_strerror (errno));
    goto out;
  }
  mode_t mask = umask (0);
  umask (mask);
  if (fchmod (fd, 0666 & ~mask) != 0 || (f = fdopen (fd, "w")) == NULL) {
    fprintf (stderr, "graphgen: %s: %s\n", tmpl, g_strerror (errno));
    close (fd);
    g_unlink (tmpl);
    goto out;
  }
  GError *error = NULL;
  bool ok = gg_write (cfg, f, st, &error);
  if (ok && fsync (fileno (f)) != 0) {
    g_set_error (&error, GG_ERROR, GG_ERROR_IO, "fsync: %s", g_strerror (errno));
    ok = false;
  }
  if (fclose (f) != 0 && ok) {
    g_set_error (&error, GG_ERROR, GG_ERROR_IO, "close: %s", g_strerror (errno));
    ok = false;
  }
  if (ok && g_rename (tmpl, path) != 0) {
    g_set_error (&error, GG_ERROR, GG_ERROR_IO, "rename to %s: %s", path, g_strerror (errno));
    ok = false;
  }
  if (!ok) {
    fprintf (stderr, "graphgen: %s: %s\n", path, error->message);
    g_error_free (error);
    g_unlink (tmpl);
    goto out;
  }
  rc = 0;
out:
  g_free (tmpl);
  g_free (base);
  g_free (dir);
  return rc;
}

static void
print_stats (const GgConfig *cfg, const GgStats *st)
{
  static const char *const kinds[GG_COLL_N] = { "all_gather", "reduce_scatter", "all_reduce" };
  static const char *const dims[GG_DIM_N] = { "tp", "dp", "replica" };
  fprintf (stderr, "graphgen: layers %" G_GINT64_FORMAT ", nodes %" G_GINT64_FORMAT
           ", placeholders %" G_GINT64_FORMAT "\n", cfg->layers, st->nodes, st->placeholders);
  for (int k = 0; k < GG_COLL_N; k++)
    for (int d = 0; d < GG_DIM_N; d++)
      if (st->collectives[k][d])
        fprintf (stderr, "graphgen: %s over %s (group \"%s\"): %" G_GINT64_FORMAT "\n", kinds[k],
                 dims[d], gg_group_name (cfg, (GgDim)d), st->collectives[k][d]);
}

int
main (int argc, char **argv)
{
  GgConfig cfg;
  gg_config_init (&cfg);
  const char *output = NULL;
  int64_t target = 0;
  bool stats = false, have_layers = false, have_target = false;
  int c;
  opterr = 0;
  while ((c = getopt_long (argc, argv, ":o:h", long_opts, NULL)) != -1) {
    const char *name = NULL;
    int64_t *dst = NULL;
    switch (c) {
    case OPT_LAYERS: name = "layers", dst = &cfg.layers, have_layers = true; break;
    case OPT_HIDDEN: name = "hidden", dst = &cfg.hidden; break;
    case OPT_FFN: name = "ffn", dst = &cfg.ffn; break;
    case OPT_HEADS: name = "heads", dst = &cfg.heads; break;
    case OPT_SEQ: name = "seq", dst = &cfg.seq; break;
    case OPT_DP: name = "dp", dst = &cfg.dp; break;
    case OPT_TP: name = "tp", dst = &cfg.tp; break;
    case OPT_WORLD: name = "world", dst = &cfg.world; break;
    case OPT_RANK: name = "rank", dst = &cfg.rank; break;
    case OPT_TARGET: name = "target-nodes", dst = &target, have_target = true; break;
    case OPT_DTYPE: cfg.dtype = optarg; break;
    case OPT_TP_MODE:
      if (strcmp (optarg, "sp") == 0)
        cfg.tp_mode = GG_TP_SP;
      else if (strcmp (optarg, "allreduce") == 0)
        cfg.tp_mode = GG_TP_ALLREDUCE;
      else {
        fprintf (stderr, "graphgen: --tp-mode %s is not one of sp, allreduce\n", optarg);
        return EXIT_USAGE;
      }
      break;
    case OPT_SP_NORM_AR: cfg.sp_norm_allreduce = true; break;
    case OPT_GPU: cfg.cluster_gpu = strcmp (optarg, "none") == 0 ? NULL : optarg; break;
    case 'o': output = optarg; break;
    case OPT_STATS: stats = true; break;
    case 'h': fputs (usage_text, stdout); return 0;
    case OPT_VERSION: printf ("graphgen %s\n", SG_VERSION); return 0;
    case ':':
      fprintf (stderr, "graphgen: %s needs a value\n", argv[optind - 1]);
      return EXIT_USAGE;
    default:
      fprintf (stderr, "graphgen: unknown option '%s' (see --help)\n", argv[optind - 1]);
      return EXIT_USAGE;
    }
    if (dst && !parse_int (name, optarg, dst))
      return EXIT_USAGE;
  }
  if (optind < argc) {
    fprintf (stderr, "graphgen: unexpected argument '%s' (see --help)\n", argv[optind]);
    return EXIT_USAGE;
  }
  if (have_target && have_layers) {
    fprintf (stderr, "graphgen: give either --layers or --target-nodes, not both\n");
    return EXIT_USAGE;
  }
  if (have_target && target <= 0) {
    fprintf (stderr, "graphgen: --target-nodes must be positive\n");
    return EXIT_USAGE;
  }
  GError *error = NULL;
  if (!gg_config_check (&cfg, &error)) {
    fprintf (stderr, "graphgen: %s\n", error->message);
    g_error_free (error);
    return EXIT_USAGE;
  }
  if (have_target)
    cfg.layers = gg_layers_for_nodes (&cfg, target);

  GgStats st;
  int rc = 0;
  if (output && strcmp (output, "-") != 0) {
    rc = write_atomic (&cfg, output, &st);
  } else if (!gg_write (&cfg, stdout, &st, &error)) {
    fprintf (stderr, "graphgen: %s\n", error->message);
    g_error_free (error);
    rc = 1;
  }
  if (rc == 0 && stats)
    print_stats (&cfg, &st);
  return rc;
}

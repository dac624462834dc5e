/* main.c: the sgeval command line (see sgeval.h and docs/runtime.md).
 *
 *   sgeval GRAPH.json [--seed S] [--rank R] [--dump-outputs DIR] [--checksums FILE]
 *   sgeval --compare DIR_A DIR_B [--rtol R] [--atol A] [--bitwise]
 *
 * Exit: 0 success / within tolerance, 1 outputs differ or bad input, 2 usage.
 */
#include <stdio.h>
#include <string.h>

#include "sgeval.h"

int
main (int argc, char **argv)
{
  gint64 seed = 0;
  int rank = 0;
  char *dump = NULL, *sums = NULL;
  gboolean compare = FALSE, bitwise = FALSE;
  double rtol = 1e-5, atol = 0;
  GOptionEntry entries[] = {
    { "seed", 0, 0, G_OPTION_ARG_INT64, &seed, "seed of the deterministic inputs", "S" },
    { "rank", 0, 0, G_OPTION_ARG_INT, &rank, "whose outputs --dump-outputs writes (0)", "R" },
    { "dump-outputs", 0, 0, G_OPTION_ARG_FILENAME, &dump, "write DIR/<i>.bin + outputs.json",
      "DIR" },
    { "checksums", 0, 0, G_OPTION_ARG_FILENAME, &sums,
      "write every rank's FNV-1a 64 per output", "FILE" },
    { "compare", 0, 0, G_OPTION_ARG_NONE, &compare, "compare two dump folders", NULL },
    { "rtol", 0, 0, G_OPTION_ARG_DOUBLE, &rtol, "relative tolerance (1e-5)", "R" },
    { "atol", 0, 0, G_OPTION_ARG_DOUBLE, &atol, "absolute tolerance (0)", "A" },
    { "bitwise", 0, 0, G_OPTION_ARG_NONE, &bitwise, "require identical bytes", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  GOptionContext *oc = g_option_context_new ("GRAPH.json | --compare DIR_A DIR_B");
  g_option_context_set_summary (oc, "Reference evaluation of a schedgraph graph for all ranks "
                                    "in one process, and comparison of output dumps.");
  g_option_context_add_main_entries (oc, entries, NULL);
  GError *error = NULL;
  int code = 0;
  if (!g_option_context_parse (oc, &argc, &argv, &error)) {
    fprintf (stderr, "sgeval: %s\n", error->message);
    code = 2;
  } else if (compare) {
    if (argc != 3) {
      fprintf (stderr, "sgeval: --compare needs two folders\n");
      code = 2;
    } else {
      SgevalCompare c;
      if (!sgeval_compare (argv[1], argv[2], bitwise ? 0 : rtol, bitwise ? 0 : atol, &c,
                           &error)) {
        fprintf (stderr, "sgeval: %s\n", error->message);
        code = 1;
      } else {
        bool pass = bitwise ? c.identical == c.outputs : c.within;
        printf ("sgeval: %d outputs, %d bitwise identical, max rel diff %.3g, max abs diff "
                "%.3g: %s\n",
                c.outputs, c.identical, c.max_rel, c.max_abs, pass ? "PASS" : "FAIL");
        if (!pass && c.worst != NULL)
          printf ("sgeval: worst: output %s\n", c.worst);
        code = pass ? 0 : 1;
      }
      sgeval_compare_clear (&c);
    }
  } else if (argc != 2) {
    fprintf (stderr, "sgeval: expected one graph file; see --help\n");
    code = 2;
  } else if (seed < 0) {
    fprintf (stderr, "sgeval: --seed must be >= 0\n");
    code = 2;
  } else if (!sgeval_run (argv[1], (uint64_t)seed, rank, dump, sums, &error)) {
    fprintf (stderr, "sgeval: %s: %s\n", argv[1], error->message);
    code = 1;
  }
  g_clear_error (&error);
  g_option_context_free (oc);
  g_free (dump);
  g_free (sums);
  return code;
}

/* fuzz.c: the harnesses' shared helpers (fuzz.h). */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <math.h>

#include "estimate.h"
#include "schedule.h"

int LLVMFuzzerInitialize (int *argc, char ***argv);

/* A GLib warning or critical is a finding. GLib ends a fatal message with
 * G_BREAKPOINT (SIGTRAP), which libFuzzer does not catch, so the input
 * would be lost: abort first (SIGABRT), which libFuzzer saves as a crash. */
static void
abort_on_warning (const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data)
{
  g_log_default_handler (domain, level, message, data);
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    abort ();
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  (void)argc, (void)argv;
  g_log_set_default_handler (abort_on_warning, NULL);
  g_log_set_always_fatal (G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);
  return 0;
}

void
fuzz_rejected (GError *e)
{
  if (!e || !e->message[0])
    fuzz_bug ("rejected without a message");
  g_error_free (e);
}

void
fuzz_estimate (const char *sample, const SgConfig *cfg, const char *what)
{
  SgGraph *g = fuzz_sample_graph (sample);
  GError *e = NULL;
  if (!sg_estimate_costs (g, cfg, &e)) {
    fuzz_rejected (e);
    return;
  }
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    if (!(isfinite (g->nodes[i].est_us) && g->nodes[i].est_us >= 0))
      fuzz_bug ("node '%s': cost %g from an accepted %s", g->nodes[i].name, g->nodes[i].est_us,
                what);
  SgSimResult r;
  if (!sg_simulate (g, NULL, &r, &e))
    fuzz_bug ("simulation failed: %s", e->message);
  if (!isfinite (r.step_us))
    fuzz_bug ("step %g us from an accepted %s", r.step_us, what);
  sg_sim_result_clear (&r);
}

const char *
fuzz_file (const uint8_t *data, size_t size)
{
  static int fd = -1;
  static char path[64];
  if (fd < 0) {
    fd = memfd_create ("fuzz-input", MFD_CLOEXEC);
    if (fd < 0)
      fuzz_bug ("memfd_create failed");
    g_snprintf (path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (ftruncate (fd, (off_t)size) != 0
      || (size && pwrite (fd, data, size, 0) != (ssize_t)size))
    fuzz_bug ("cannot write the memfd");
  return path;
}

SgGraph *
fuzz_sample_graph (const char *name)
{
  static GHashTable *graphs;
  if (!graphs)
    graphs = g_hash_table_new (g_str_hash, g_str_equal);
  SgGraph *g = g_hash_table_lookup (graphs, name);
  if (g)
    return g;
  g_autofree char *path = g_build_filename (FUZZ_DATA, name, NULL);
  GError *e = NULL;
  g = sg_graph_load (path, &e);
  if (!g || !sg_estimate_costs (g, NULL, &e))
    fuzz_bug ("sample %s: %s", path, e ? e->message : "?");
  g_hash_table_insert (graphs, g_strdup (name), g);
  return g;
}

void
fuzz_bug (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  fputs ("fuzz: BUG: ", stderr);
  vfprintf (stderr, fmt, ap);
  fputc ('\n', stderr);
  va_end (ap);
  abort ();
}

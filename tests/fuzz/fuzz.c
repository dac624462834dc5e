/* fuzz.c: the harnesses' shared helpers (fuzz.h). */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "estimate.h"

void
fuzz_init (void)
{
  g_log_set_always_fatal (G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);
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

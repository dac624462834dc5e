/* outputs.c: schedrun's output files (--report, --trace, --dump-outputs):
 * checked before any work, written only by the ranks that own them,
 * removed again when the run fails after writing some of them.
 *
 * Mirrors schedgraph's outputs (tools/schedgraph/outputs.c): no output may
 * be the plan or another output (the same file by device and inode,
 * textio.h), a directory that cannot be written is found before the plan
 * is even loaded, and a failed run leaves none of its outputs behind.
 * Writability is probed by creating and removing a file in the target
 * directory: permission bits say nothing to root, and a missing directory,
 * a file in the way or a read-only mount fail the probe alike.
 *
 * Requires: nothing (options only; the plan for the dump's file names).
 * Invalidates: nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime-private.h"
#include "textio.h"

/* True when @path's last component is a name the dump writes. */
static bool
dump_name (const char *path)
{
  g_autofree char *base = g_path_get_basename (path);
  if (strcmp (base, "outputs.json") == 0)
    return true;
  size_t n = strspn (base, "0123456789");
  return n > 0 && strcmp (base + n, ".bin") == 0;
}

char *
sg_rt_outputs_clash (const SgRtOptions *opt, const char *plan_path)
{
  const char *paths[] = { plan_path, opt->report, opt->trace };
  const char *what[] = { "the plan", "--report", "--trace" };
  for (size_t i = 1; i < G_N_ELEMENTS (paths); i++)
    for (size_t j = 0; paths[i] && j < i; j++)
      if (paths[j] && sg_same_file (paths[i], paths[j]))
        return g_strdup_printf ("%s would overwrite %s ('%s' is '%s')", what[i], what[j],
                                paths[i], paths[j]);
  if (opt->dump_dir)
    for (size_t j = 0; j < G_N_ELEMENTS (paths); j++) {
      if (!paths[j] || !dump_name (paths[j]))
        continue;
      g_autofree char *base = g_path_get_basename (paths[j]);
      g_autofree char *in_dump = g_build_filename (opt->dump_dir, base, NULL);
      if (sg_same_file (in_dump, paths[j]))
        return g_strdup_printf ("--dump-outputs %s would overwrite %s ('%s')", opt->dump_dir,
                                what[j], paths[j]);
    }
  return NULL;
}

/* Creates and removes a file in @dir. */
static bool
probe_dir (const char *flag, const char *target, const char *dir, GError **error)
{
  g_autofree char *tmpl = g_build_filename (dir, ".schedrun-probe-XXXXXX", NULL);
  int fd = mkstemp (tmpl);
  if (fd < 0) {
    int e = errno;
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_IO, "%s %s: cannot write in %s: %s", flag,
                 target, dir, g_strerror (e));
    return false;
  }
  close (fd);
  unlink (tmpl);
  return true;
}

static bool
file_writable (const char *flag, const char *path, GError **error)
{
  if (g_file_test (path, G_FILE_TEST_IS_DIR)) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_IO, "%s %s: is a directory", flag, path);
    return false;
  }
  g_autofree char *dir = g_path_get_dirname (path);
  return probe_dir (flag, path, dir, error);
}

/* The dump directory, or its nearest existing ancestor when it is still
 * to be created (sg_rt_collect_outputs creates it with its parents). */
static bool
dir_writable (const char *flag, const char *dir, GError **error)
{
  g_autofree char *d = g_strdup (dir);
  while (!g_file_test (d, G_FILE_TEST_EXISTS)) {
    char *up = g_path_get_dirname (d);
    bool top = strcmp (up, d) == 0;
    g_free (d);
    d = up;
    if (top)
      break;
  }
  if (!g_file_test (d, G_FILE_TEST_IS_DIR)) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_IO, "%s %s: %s is not a directory", flag, dir,
                 d);
    return false;
  }
  return probe_dir (flag, dir, d, error);
}

bool
sg_rt_outputs_writable (const SgRtOptions *opt, int rank, GError **error)
{
  if (rank == 0 && opt->report && !file_writable ("--report", opt->report, error))
    return false;
  if (rank == 0 && opt->trace && !file_writable ("--trace", opt->trace, error))
    return false;
  if (rank == opt->dump_rank && opt->dump_dir
      && !dir_writable ("--dump-outputs", opt->dump_dir, error))
    return false;
  return true;
}

void
sg_rt_outputs_remove (const SgRtOptions *opt, const SgPlan *plan, const SgRtWritten *w)
{
  if (w->report)
    unlink (opt->report);
  if (w->trace)
    unlink (opt->trace);
  if (!w->dump || !plan)
    return;
  for (int32_t i = 0; i < plan->n_outputs; i++) {
    g_autofree char *fn = g_strdup_printf ("%s/%d.bin", opt->dump_dir, i);
    unlink (fn);
  }
  g_autofree char *list = g_build_filename (opt->dump_dir, "outputs.json", NULL);
  unlink (list);
  if (!w->dump_dir_existed)
    rmdir (opt->dump_dir);
}

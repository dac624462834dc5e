/* files.c: file identity for the tools' output checks (textio.h).
 *
 * Two paths name the same file when they resolve to the same device and
 * inode: a different spelling (./g.json, /abs/g.json, dir/../g.json), a
 * symbolic link or a hard link all count. A path that does not exist yet
 * is identified by its directory's device and inode plus its last
 * component, so two outputs not yet written are told apart too. Mirrors
 * coreutils' same-file test (cp, mv: "are the same file").
 *
 * Requires: nothing. Invalidates: nothing.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "textio.h"

typedef struct {
  bool exists, dir_known;
  dev_t dev;
  ino_t ino;
  char *base; /* the last component, when only the directory is known */
} FileId;

static void
file_id (const char *path, FileId *id)
{
  struct stat st;
  memset (id, 0, sizeof *id);
  if (stat (path, &st) == 0) {
    id->exists = true;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    return;
  }
  g_autofree char *dir = g_path_get_dirname (path);
  if (stat (dir, &st) == 0) {
    id->dir_known = true;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->base = g_path_get_basename (path);
  }
}

bool
sg_same_file (const char *a, const char *b)
{
  g_return_val_if_fail (a != NULL && b != NULL, false);
  if (strcmp (a, b) == 0)
    return true;
  FileId x, y;
  file_id (a, &x);
  file_id (b, &y);
  bool same = false;
  if (x.exists && y.exists)
    same = x.dev == y.dev && x.ino == y.ino;
  else if (x.dir_known && y.dir_known)
    same = x.dev == y.dev && x.ino == y.ino && strcmp (x.base, y.base) == 0;
  g_free (x.base);
  g_free (y.base);
  return same;
}

/* plan-write.c: the plan's file (sg_plan_write_file, plan.h): written
 * atomically, its text made and hashed by several threads when given them.
 *
 * Mirrors: the write-to-temporary, fsync, rename of every atomic file
 * writer (g_file_set_contents, rename(2)'s guarantee).
 * Requires: nothing (a plan in memory).
 * Invalidates: plan->hash is set (the same as sg_plan_to_json's).
 *
 * A temporary file in the path's directory is filled, flushed to disk and
 * renamed over the path: never a partial plan at the path; on any error
 * the temporary file is removed and the path keeps what it held. The
 * whole text is never in memory: the head (plan-text.c) is written first
 * with the hash digits all '0', then the items in rounds, the hash digits
 * last. A round is a task per thread, each writing its range of items
 * into a buffer of its own; the buffers go to the file in task order.
 * With one thread the hash goes on over each buffer in order (as pieces
 * hashed at once on it: sg_plan_fnv1a_long). With
 * several, each buffer is hashed as PIECES pieces at once (plan-hash.c:
 * two passes over the pieces find the low byte of the state at each one's
 * start, a third hashes it from there), combined in order; the buffers of
 * two rounds alternate, and a thread of the writer's own copies each
 * round into the file while the pool makes the next (the system's copy
 * of the bytes is the part that does not divide). After each round
 * written, the system is asked to start writing it to disk (Linux:
 * sync_file_range), so the final fsync waits for less. The bytes and the
 * hash do not depend on the number of threads (tests/codegen/
 * test_threads.c: files written by pools of 1, 2, 3 and 8 threads are
 * cmp-equal).
 */
#include "plan-private.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

/* Items per task: about 8 rounds (a pipeline to fill), within bounds;
 * pieces per task. */
#define MIN_TASK_ITEMS 256
#define MAX_TASK_ITEMS 4096
#define PIECES 8

typedef enum { STEP_TEXT, STEP_BYTE, STEP_RUN } Step;

/* The buffers of one round. */
typedef struct {
  GString **buf;   /* per task */
  int32_t n_tasks; /* filled by the round */
  bool busy;       /* handed to the writer thread, not written yet */
} Set;

typedef struct {
  const SgPlan *p;
  int fd;
  size_t task_items;
  size_t from;      /* the round's first item */
  size_t n_items;   /* all items */
  Set set[2];       /* this round's (set[cur]) and the last one's */
  int cur;
  SgHashPiece *pc;  /* PIECES per task of this round */
  bool pieces;      /* hashed in pieces, written by a thread of its own */
  Step step;
  /* the writer thread: sets handed over in order, under @lock */
  GThread *thread;
  GMutex lock;
  GCond cond;
  int next;         /* the set it writes next */
  bool quit;
  off_t at;         /* where the next set begins in the file */
  int err;          /* errno of a failed write, 0 */
} Writer;

/* All of @len bytes at the file's end; errno on failure. */
static bool
write_all (int fd, const char *data, size_t len)
{
  while (len > 0) {
    ssize_t n = write (fd, data, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = EIO;
      return false;
    }
    data += n;
    len -= (size_t)n;
  }
  return true;
}

/* The buffers of @s to the file, then a request to start writing them to
 * disk (a hint: its failure is fsync's to report). Returns errno or 0. */
static int
write_set (Writer *w, const Set *s)
{
  size_t len = 0;
  for (int32_t t = 0; t < s->n_tasks; t++) {
    if (!write_all (w->fd, s->buf[t]->str, s->buf[t]->len))
      return errno ? errno : EIO;
    len += s->buf[t]->len;
  }
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
  sync_file_range (w->fd, w->at, (off_t)len, SYNC_FILE_RANGE_WRITE);
#endif
  w->at += (off_t)len;
  return 0;
}

static gpointer
writer_thread (gpointer data)
{
  Writer *w = data;
  g_mutex_lock (&w->lock);
  for (;;) {
    while (!w->set[w->next].busy && !w->quit)
      g_cond_wait (&w->cond, &w->lock);
    if (!w->set[w->next].busy)
      break;
    Set *s = &w->set[w->next];
    const bool failed = w->err != 0;
    g_mutex_unlock (&w->lock);
    const int err = failed ? 0 : write_set (w, s);
    g_mutex_lock (&w->lock);
    if (err)
      w->err = err;
    s->busy = false;
    w->next = !w->next;
    g_cond_broadcast (&w->cond);
  }
  g_mutex_unlock (&w->lock);
  return NULL;
}

static void
writer_task (gpointer ctx, int32_t t, int32_t worker)
{
  (void)worker;
  Writer *w = ctx;
  Set *s = &w->set[w->cur];
  SgHashPiece *pc = &w->pc[(size_t)t * PIECES];
  switch (w->step) {
  case STEP_TEXT: {
    GString *b = s->buf[t];
    size_t a = w->from + (size_t)t * w->task_items, z = MIN (a + w->task_items, w->n_items);
    g_string_truncate (b, 0);
    sg_plan_text_range (b, w->p, a, z);
    if (!w->pieces)
      break;
    for (int k = 0; k < PIECES; k++) {
      size_t x = b->len * (size_t)k / PIECES, y = b->len * (size_t)(k + 1) / PIECES;
      pc[k] = (SgHashPiece){ .data = b->str + x, .len = y - x };
    }
    sg_hash_pieces_nibble (pc, PIECES);
    break;
  }
  case STEP_BYTE:
    sg_hash_pieces_byte (pc, PIECES);
    break;
  case STEP_RUN:
    sg_hash_pieces_run (pc, PIECES);
    break;
  }
}

static void
run_step (Writer *w, Step step, const SgPlanRunner *runner)
{
  w->step = step;
  const int32_t n = w->set[w->cur].n_tasks;
  if (runner && runner->n_workers > 1)
    runner->run (runner->pool, n, writer_task, w);
  else
    for (int32_t t = 0; t < n; t++)
      writer_task (w, t, 0);
}

/* One round: the text of its items and its hash (from @h); then the
 * buffers to the file, on this thread or handed to the writer thread.
 * False when a write failed (w->err). */
static bool
write_round (Writer *w, const SgPlanRunner *runner, int32_t per_round, uint64_t *h)
{
  Set *s = &w->set[w->cur];
  if (w->thread) { /* the writer is done with these buffers */
    g_mutex_lock (&w->lock);
    while (s->busy)
      g_cond_wait (&w->cond, &w->lock);
    const bool failed = w->err != 0;
    g_mutex_unlock (&w->lock);
    if (failed)
      return false;
  }
  size_t left = w->n_items - w->from;
  s->n_tasks = (int32_t)MIN ((size_t)per_round, (left + w->task_items - 1) / w->task_items);
  for (int32_t t = 0; t < s->n_tasks; t++)
    if (!s->buf[t])
      s->buf[t] = g_string_sized_new (w->task_items * 200);
  run_step (w, STEP_TEXT, runner);
  const int n_pc = s->n_tasks * PIECES;
  if (w->pieces) {
    sg_hash_resolve_nibble (*h, w->pc, n_pc);
    run_step (w, STEP_BYTE, runner);
    sg_hash_resolve_byte (*h, w->pc, n_pc);
    run_step (w, STEP_RUN, runner);
    *h = sg_hash_combine (*h, w->pc, n_pc);
  } else {
    for (int32_t t = 0; t < s->n_tasks; t++)
      *h = sg_plan_fnv1a_long (*h, s->buf[t]->str, s->buf[t]->len);
  }
  w->from += (size_t)s->n_tasks * w->task_items;
  if (!w->thread) {
    w->err = write_set (w, s);
    return !w->err;
  }
  g_mutex_lock (&w->lock);
  s->busy = true;
  g_cond_broadcast (&w->cond);
  g_mutex_unlock (&w->lock);
  w->cur = !w->cur;
  return true;
}

/* The text into @fd, its hash into the plan and the file. False with
 * errno. */
static bool
write_text (SgPlan *p, int fd, const SgPlanRunner *runner)
{
  const int32_t workers = runner ? MAX (runner->n_workers, 1) : 1;
  Writer w = { .p = p, .fd = fd, .n_items = sg_plan_text_items (p), .pieces = workers > 1 };
  w.task_items = CLAMP (w.n_items / (8 * (size_t)workers), MIN_TASK_ITEMS, MAX_TASK_ITEMS);
  for (int k = 0; k < 2; k++)
    w.set[k].buf = g_new0 (GString *, (size_t)workers);
  w.pc = g_new (SgHashPiece, (size_t)workers * PIECES);
  GString *head = g_string_new (NULL);
  SgPlanHead at;
  sg_plan_text_head (head, p, &at);
  uint64_t h = sg_plan_text_hash (head, &at);
  if (!write_all (fd, head->str, head->len))
    w.err = errno ? errno : EIO;
  w.at = (off_t)head->len;
  g_string_free (head, TRUE);
  g_mutex_init (&w.lock);
  g_cond_init (&w.cond);
  if (w.pieces && !w.err)
    w.thread = g_thread_try_new ("sg-plan-write", writer_thread, &w, NULL);
  bool ok = !w.err;
  while (ok && w.from < w.n_items)
    ok = write_round (&w, runner, workers, &h);
  if (w.thread) {
    g_mutex_lock (&w.lock);
    w.quit = true;
    g_cond_broadcast (&w.cond);
    g_mutex_unlock (&w.lock);
    g_thread_join (w.thread);
  }
  g_mutex_clear (&w.lock);
  g_cond_clear (&w.cond);
  for (int k = 0; k < 2; k++) {
    for (int32_t t = 0; t < workers; t++)
      if (w.set[k].buf[t])
        g_string_free (w.set[k].buf[t], TRUE);
    g_free (w.set[k].buf);
  }
  g_free (w.pc);
  if (w.err) {
    errno = w.err;
    return false;
  }
  char hex[17];
  sg_plan_text_set_hash (p, h, hex);
  if (pwrite (fd, hex, 16, (off_t)at.hash_at) != 16) {
    if (errno == 0)
      errno = EIO;
    return false;
  }
  return true;
}

bool
sg_plan_write_file_with (SgPlan *plan, const char *path, const SgPlanRunner *runner,
                         GError **error)
{
  g_return_val_if_fail (plan != NULL && path != NULL, false);
  g_autofree char *tmp = g_strdup_printf ("%s.XXXXXX", path);
  int fd = g_mkstemp_full (tmp, O_RDWR | O_CLOEXEC, 0666);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0) {
    errno = 0;
    if (!write_text (plan, fd, runner) || fsync (fd) != 0)
      err = errno ? errno : EIO;
    if (close (fd) != 0 && !err)
      err = errno ? errno : EIO;
    if (!err && g_rename (tmp, path) != 0)
      err = errno ? errno : EIO;
    if (err)
      g_unlink (tmp);
  }
  if (err) {
    g_set_error (error, SG_PLAN_ERROR, SG_PLAN_ERROR_IO, "cannot write plan %s: %s", path,
                 g_strerror (err));
    return false;
  }
  return true;
}

bool
sg_plan_write_file (SgPlan *plan, const char *path, GError **error)
{
  g_return_val_if_fail (plan != NULL && path != NULL, false);
  return sg_plan_write_file_with (plan, path, NULL, error);
}

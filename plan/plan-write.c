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
 * last. A round is TASK_ITEMS items per task, two tasks per thread: each
 * task writes its range into a buffer of its own (kept from round to
 * round), and the buffers go to the file in task order. With one thread
 * the hash goes on over each buffer in order; with several, each buffer is
 * hashed as PIECES pieces at once (plan-hash.c: two passes over the pieces
 * find the low byte of the state at each one's start, a third hashes it
 * from there), combined in order. The bytes and the hash do not depend on
 * the number of threads (tests/codegen: plans written by pools of 1, 2, 3
 * and 8 threads are cmp-equal).
 */
#include "plan-private.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

/* Items per task (about 350 KB of instructions), pieces per task. */
#define TASK_ITEMS 2048
#define PIECES 4

typedef enum { STEP_TEXT, STEP_BYTE, STEP_RUN } Step;

typedef struct {
  const SgPlan *p;
  size_t from;       /* the round's first item */
  size_t n_items;    /* all items */
  int32_t n_tasks;   /* this round's */
  GString **buf;     /* per task */
  SgHashPiece *pc;   /* PIECES per task */
  bool pieces;       /* hashed in pieces */
  Step step;
} Round;

static void
round_task (gpointer ctx, int32_t t, int32_t worker)
{
  (void)worker;
  Round *r = ctx;
  SgHashPiece *pc = &r->pc[(size_t)t * PIECES];
  switch (r->step) {
  case STEP_TEXT: {
    GString *s = r->buf[t];
    size_t a = r->from + (size_t)t * TASK_ITEMS, b = MIN (a + TASK_ITEMS, r->n_items);
    g_string_truncate (s, 0);
    sg_plan_text_range (s, r->p, a, b);
    if (!r->pieces)
      break;
    for (int k = 0; k < PIECES; k++) {
      size_t x = s->len * (size_t)k / PIECES, y = s->len * (size_t)(k + 1) / PIECES;
      pc[k] = (SgHashPiece){ .data = s->str + x, .len = y - x };
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
run_step (Round *r, Step step, const SgPlanRunner *runner)
{
  r->step = step;
  if (runner && runner->n_workers > 1)
    runner->run (runner->pool, r->n_tasks, round_task, r);
  else
    for (int32_t t = 0; t < r->n_tasks; t++)
      round_task (r, t, 0);
}

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

/* The text into @fd, its hash into the plan and the file. False with
 * errno. */
static bool
write_text (SgPlan *p, int fd, const SgPlanRunner *runner)
{
  const int32_t workers = runner ? MAX (runner->n_workers, 1) : 1;
  Round r = { .p = p, .n_items = sg_plan_text_items (p), .pieces = workers > 1 };
  const int32_t per_round = 2 * workers;
  r.buf = g_new (GString *, (size_t)per_round);
  r.pc = g_new (SgHashPiece, (size_t)per_round * PIECES);
  for (int32_t t = 0; t < per_round; t++)
    r.buf[t] = NULL;
  GString *head = g_string_new (NULL);
  SgPlanHead at;
  sg_plan_text_head (head, p, &at);
  uint64_t h = sg_plan_text_hash (head, &at);
  bool ok = write_all (fd, head->str, head->len);
  g_string_free (head, TRUE);
  for (r.from = 0; ok && r.from < r.n_items; r.from += (size_t)r.n_tasks * TASK_ITEMS) {
    size_t left = r.n_items - r.from;
    r.n_tasks = (int32_t)MIN ((size_t)per_round, (left + TASK_ITEMS - 1) / TASK_ITEMS);
    for (int32_t t = 0; t < r.n_tasks; t++)
      if (!r.buf[t])
        r.buf[t] = g_string_sized_new (TASK_ITEMS * 200);
    run_step (&r, STEP_TEXT, runner);
    const int n_pc = r.n_tasks * PIECES;
    if (r.pieces) {
      sg_hash_resolve_nibble (h, r.pc, n_pc);
      run_step (&r, STEP_BYTE, runner);
      sg_hash_resolve_byte (h, r.pc, n_pc);
      run_step (&r, STEP_RUN, runner);
      h = sg_hash_combine (h, r.pc, n_pc);
    } else {
      for (int32_t t = 0; t < r.n_tasks; t++)
        h = sg_plan_fnv1a_more (h, r.buf[t]->str, r.buf[t]->len);
    }
    for (int32_t t = 0; ok && t < r.n_tasks; t++)
      ok = write_all (fd, r.buf[t]->str, r.buf[t]->len);
  }
  int err = errno;
  for (int32_t t = 0; t < per_round; t++)
    if (r.buf[t])
      g_string_free (r.buf[t], TRUE);
  g_free (r.buf);
  g_free (r.pc);
  if (!ok) {
    errno = err;
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
  return sg_plan_write_file_with (plan, path, NULL, error);
}

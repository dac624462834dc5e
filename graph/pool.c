/* pool.c: worker threads for the passes' parallel loops (sg_pool_*).
 *
 * A pool is a fixed set of threads that run the tasks 0 .. n-1 of jobs,
 * the caller's thread among them. A job's tasks are taken in index order
 * from a shared counter, so which thread runs a task depends on timing,
 * but nothing else may: a task writes only what its index owns (and the
 * scratch of the worker it is told it runs on), and the caller combines
 * the results in index order after sg_pool_run returns. That is what
 * keeps plans byte-identical whatever the thread count
 * (tests/graph/test_pool.c, and the pipeline tests run with several).
 * Jobs may be open at once: a task may start a job of its own (its thread
 * runs that job's tasks, and idle workers join it, the newest job first),
 * so a search that runs as a task still spreads its own jobs; the thread
 * that starts a job waits only for tasks already taken, which run to
 * their end, so jobs never deadlock. A thread outside the pool (neither
 * its creator nor one of its workers) runs its jobs alone, as worker 0.
 * Between jobs the workers spin for a while (SPIN_US) before they sleep:
 * the searches run many short jobs back to back, and a wake-up through
 * the kernel costs more than most of their tasks.
 * Mirrors: the fork-join loops of OpenMP's `parallel for` with dynamic
 * scheduling and nested parallelism, and ggml's thread pool (spin, then
 * sleep).
 * Requires: nothing. Invalidates: nothing.
 */
#include <stdlib.h> /* __GLIBC__ */
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "graph-private.h"

/* How long a worker polls for the next job before it sleeps (us); not at
 * all when the pool has more threads than the processors it may run on (a
 * spinning worker would take the time of the thread it waits for). */
#define SPIN_US 50

/* A job, on the stack of the thread that started it. */
typedef struct Job {
  SgPoolFunc fn;
  gpointer ctx;
  int32_t n_tasks;
  gint next;          /* atomic: the next task to take */
  gint left;          /* atomic: tasks not finished */
  int32_t visitors;   /* workers in its task loop (under the pool's lock) */
  bool listed;        /* on the open list (under the lock) */
  struct Job *older;  /* the open list, newest first (under the lock) */
} Job;

struct SgPool {
  int32_t n; /* threads, the creator's included */
  GThread **threads;
  GMutex lock;
  GCond wake, done;
  Job *open;       /* jobs that may have tasks left to take */
  gint generation; /* atomic: bumped when a job opens */
  int32_t sleepers; /* workers waiting on @wake (under @lock) */
  bool spin;       /* poll before sleeping */
  bool quit;
};

/* The pool the current thread works for and the worker it is there (0:
 * the creator). */
static _Thread_local const SgPool *self_pool;
static _Thread_local int32_t self_worker;


/* Takes and runs @j's tasks until none is left to take. */
static void
run_tasks (SgPool *p, Job *j, int32_t worker)
{
  for (;;) {
    int32_t i = g_atomic_int_add (&j->next, 1);
    if (i >= j->n_tasks)
      return;
    j->fn (j->ctx, i, worker);
    if (g_atomic_int_dec_and_test (&j->left)) {
      g_mutex_lock (&p->lock);
      g_cond_broadcast (&p->done);
      g_mutex_unlock (&p->lock);
    }
  }
}

/* Under the lock: the newest open job with a task left to take, counted as
 * visited; jobs with none are taken off the list. */
static Job *
visit_job (SgPool *p)
{
  for (Job **at = &p->open; *at;) {
    Job *j = *at;
    if (g_atomic_int_get (&j->next) < j->n_tasks) {
      j->visitors++;
      return j;
    }
    *at = j->older;
    j->listed = false;
  }
  return NULL;
}

/* Under the lock: @j off the open list. */
static void
unlist (SgPool *p, Job *j)
{
  for (Job **at = &p->open; j->listed && *at; at = &(*at)->older)
    if (*at == j) {
      *at = j->older;
      j->listed = false;
      return;
    }
}

/* Waits (not under the lock) until a job opens after @gen, or the pool
 * quits; returns the generation then. */
static gint
await_job (SgPool *p, gint gen)
{
  gint now = g_atomic_int_get (&p->generation);
  if (now == gen && p->spin) {
    gint64 until = g_get_monotonic_time () + SPIN_US;
    for (int32_t i = 1; now == gen; i++) {
      sg_cpu_relax ();
      now = g_atomic_int_get (&p->generation);
      if (i % 64 == 0 && g_get_monotonic_time () > until)
        break;
    }
  }
  if (now == gen) {
    g_mutex_lock (&p->lock);
    p->sleepers++;
    while (g_atomic_int_get (&p->generation) == gen && !p->quit)
      g_cond_wait (&p->wake, &p->lock);
    p->sleepers--;
    g_mutex_unlock (&p->lock);
    now = g_atomic_int_get (&p->generation);
  }
  return now;
}

typedef struct {
  SgPool *p;
  int32_t worker;
} WorkerArg;

static gpointer
worker_main (gpointer data)
{
  WorkerArg *a = data;
  SgPool *p = a->p;
  int32_t w = a->worker;
  g_free (a);
  self_pool = p;
  self_worker = w;
  for (;;) {
    g_mutex_lock (&p->lock);
    gint gen = g_atomic_int_get (&p->generation);
    Job *j = p->quit ? NULL : visit_job (p);
    bool quit = p->quit;
    g_mutex_unlock (&p->lock);
    if (quit)
      return NULL;
    if (!j) {
      await_job (p, gen);
      continue;
    }
    run_tasks (p, j, w);
    g_mutex_lock (&p->lock);
    if (--j->visitors == 0 && g_atomic_int_get (&j->left) == 0)
      g_cond_broadcast (&p->done);
    g_mutex_unlock (&p->lock);
  }
}

SgPool *
sg_pool_new (int32_t n_threads)
{
  SgPool *p = g_new0 (SgPool, 1);
  p->n = 1;
  g_mutex_init (&p->lock);
  g_cond_init (&p->wake);
  g_cond_init (&p->done);
  p->spin = n_threads <= (int32_t)g_get_num_processors ();
  self_pool = p;
  self_worker = 0;
  if (n_threads > 1)
    p->threads = g_new0 (GThread *, (size_t)n_threads);
  for (int32_t w = 1; w < n_threads; w++) {
    WorkerArg *a = g_new (WorkerArg, 1);
    *a = (WorkerArg){ p, p->n };
    GThread *t = g_thread_try_new ("sg-pool", worker_main, a, NULL);
    if (!t) { /* fewer threads: the same results, later */
      g_free (a);
      break;
    }
    p->threads[p->n++] = t;
  }
  return p;
}

void
sg_pool_free (SgPool *p)
{
  if (!p)
    return;
  g_mutex_lock (&p->lock);
  p->quit = true;
  g_atomic_int_inc (&p->generation);
  g_cond_broadcast (&p->wake);
  g_mutex_unlock (&p->lock);
  for (int32_t w = 1; w < p->n; w++)
    g_thread_join (p->threads[w]);
  g_free (p->threads);
  g_mutex_clear (&p->lock);
  g_cond_clear (&p->wake);
  g_cond_clear (&p->done);
  if (self_pool == p)
    self_pool = NULL;
  g_free (p);
}

int32_t
sg_pool_size (const SgPool *p)
{
  return p ? p->n : 1;
}

void
sg_heap_trim (void)
{
#ifdef __GLIBC__
  malloc_trim (0);
#endif
}

void
sg_pool_trim (SgPool *p)
{
  if (sg_pool_size (p) > 1)
    sg_heap_trim ();
}

int32_t
sg_pool_default_threads (void)
{
  return (int32_t)CLAMP (g_get_num_processors (), 1, SG_POOL_MAX_THREADS);
}

int32_t
sg_pool_worker (const SgPool *p)
{
  return p && self_pool == p ? self_worker : 0;
}

void
sg_pool_run (SgPool *p, int32_t n_tasks, SgPoolFunc fn, gpointer ctx)
{
  g_return_if_fail (fn != NULL && n_tasks >= 0);
  int32_t me = sg_pool_worker (p);
  if (!p || p->n <= 1 || n_tasks <= 1 || self_pool != p) {
    for (int32_t i = 0; i < n_tasks; i++)
      fn (ctx, i, me);
    return;
  }
  Job j = { .fn = fn, .ctx = ctx, .n_tasks = n_tasks, .left = n_tasks };
  g_mutex_lock (&p->lock);
  j.older = p->open;
  j.listed = true;
  p->open = &j;
  g_atomic_int_inc (&p->generation);
  if (p->sleepers > 0)
    g_cond_broadcast (&p->wake);
  g_mutex_unlock (&p->lock);
  run_tasks (p, &j, me);
  /* every task is taken: wait for those others run, and for every worker
   * to leave the job's loop (the job lives on this stack) */
  g_mutex_lock (&p->lock);
  unlist (p, &j);
  while (g_atomic_int_get (&j.left) > 0 || j.visitors > 0)
    g_cond_wait (&p->done, &p->lock);
  g_mutex_unlock (&p->lock);
}

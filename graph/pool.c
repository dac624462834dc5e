/* pool.c: worker threads for the passes' parallel loops (sg_pool_*).
 *
 * A pool is a fixed set of threads that run the tasks 0 .. n-1 of one job
 * at a time, the caller's thread among them. Tasks are taken in index
 * order from a shared counter, so which thread runs a task depends on
 * timing, but nothing else may: a task writes only what its index owns
 * (and the scratch of the worker it is told it runs on), and the caller
 * combines the results in index order after sg_pool_run returns. That is
 * what keeps plans byte-identical whatever the thread count
 * (tests/graph/test_pool.c, and the pipeline tests run with several).
 * Between jobs the workers spin for a while (SPIN_ROUNDS) before they
 * sleep: the searches run many short jobs back to back, and a wake-up
 * through the kernel costs more than most of their tasks.
 * A job started from inside a task, or while another thread's job runs,
 * runs on the calling thread alone: pools never nest or deadlock.
 * Mirrors: the fork-join loops of OpenMP's `parallel for` with dynamic
 * scheduling, and ggml's thread pool (spin, then sleep).
 * Requires: nothing. Invalidates: nothing.
 */
#include "graph-private.h"

/* How long a worker polls for the next job before it sleeps (us); not at
 * all when the pool has more threads than the processors it may run on (a
 * spinning worker would take the time of the thread it waits for). */
#define SPIN_US 50

struct SgPool {
  int32_t n; /* threads, the caller's included */
  GThread **threads;
  GMutex lock;
  GCond wake, done;
  /* the job: set under @lock before @generation moves */
  SgPoolFunc fn;
  gpointer ctx;
  int32_t n_tasks;
  gint next;       /* atomic: the next task to take */
  gint generation; /* atomic: bumped once per job */
  gint running;    /* workers still in the job (under @lock) */
  gint sleepers;   /* workers waiting on @wake (under @lock) */
  gint busy;       /* atomic: a job is in flight */
  bool spin;       /* poll before sleeping */
  bool quit;
};

/* The worker the current thread is to its pool's tasks (0: the caller). */
static _Thread_local int32_t self_worker;

static inline void
cpu_relax (void)
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause ();
#elif defined(__aarch64__)
  __asm__ __volatile__ ("yield");
#endif
}

static void
run_tasks (SgPool *p, int32_t worker)
{
  for (;;) {
    int32_t i = g_atomic_int_add (&p->next, 1);
    if (i >= p->n_tasks)
      return;
    p->fn (p->ctx, i, worker);
  }
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
  self_worker = w;
  gint seen = 0;
  for (;;) {
    gint gen = g_atomic_int_get (&p->generation);
    if (gen == seen && p->spin) {
      gint64 until = g_get_monotonic_time () + SPIN_US;
      for (int32_t i = 1; gen == seen; i++) {
        cpu_relax ();
        gen = g_atomic_int_get (&p->generation);
        if (i % 64 == 0 && g_get_monotonic_time () > until)
          break;
      }
    }
    if (gen == seen) {
      g_mutex_lock (&p->lock);
      p->sleepers++;
      while (g_atomic_int_get (&p->generation) == seen && !p->quit)
        g_cond_wait (&p->wake, &p->lock);
      p->sleepers--;
      bool quit = p->quit;
      g_mutex_unlock (&p->lock);
      if (quit)
        return NULL;
      gen = g_atomic_int_get (&p->generation);
    }
    seen = gen;
    if (p->quit)
      return NULL;
    run_tasks (p, w);
    g_mutex_lock (&p->lock);
    if (--p->running == 0)
      g_cond_signal (&p->done);
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
  g_free (p);
}

int32_t
sg_pool_size (const SgPool *p)
{
  return p ? p->n : 1;
}

int32_t
sg_pool_default_threads (void)
{
  return (int32_t)CLAMP (g_get_num_processors (), 1, SG_POOL_MAX_THREADS);
}

void
sg_pool_run (SgPool *p, int32_t n_tasks, SgPoolFunc fn, gpointer ctx)
{
  g_return_if_fail (fn != NULL && n_tasks >= 0);
  if (!p || p->n <= 1 || n_tasks <= 1 || !g_atomic_int_compare_and_exchange (&p->busy, 0, 1)) {
    int32_t me = self_worker;
    for (int32_t i = 0; i < n_tasks; i++)
      fn (ctx, i, me);
    return;
  }
  g_mutex_lock (&p->lock);
  p->fn = fn;
  p->ctx = ctx;
  p->n_tasks = n_tasks;
  g_atomic_int_set (&p->next, 0);
  p->running = p->n - 1;
  g_atomic_int_inc (&p->generation);
  if (p->sleepers > 0)
    g_cond_broadcast (&p->wake);
  g_mutex_unlock (&p->lock);
  int32_t was = self_worker;
  self_worker = 0;
  run_tasks (p, 0);
  self_worker = was;
  g_mutex_lock (&p->lock);
  while (p->running > 0)
    g_cond_wait (&p->done, &p->lock);
  g_mutex_unlock (&p->lock);
  g_atomic_int_set (&p->busy, 0);
}

/* test_pool.c: the passes' worker threads (graph/pool.c): every task runs
 * once whatever the thread count, workers index their scratch within the
 * pool's size, a job started inside a task completes and spreads over
 * other workers, a thread outside the pool runs its jobs alone, and many
 * short jobs in a row all complete. */
#include <check.h>

#include "common.h"

typedef struct {
  gint *ran;      /* per task: times run (atomic) */
  int32_t size;   /* sg_pool_size */
  gint bad_worker;
  SgPool *pool;   /* for the nested job */
  gint nested_ran;
} Ctx;

static void
count_task (gpointer data, int32_t task, int32_t worker)
{
  Ctx *c = data;
  g_atomic_int_inc (&c->ran[task]);
  if (worker < 0 || worker >= c->size)
    g_atomic_int_set (&c->bad_worker, 1);
}

START_TEST (every_task_runs_once_whatever_the_thread_count)
{
  static const int32_t threads[] = { 0, 1, 2, 3, 8, 17 };
  for (size_t t = 0; t < G_N_ELEMENTS (threads); t++) {
    SgPool *p = threads[t] ? sg_pool_new (threads[t]) : NULL;
    ck_assert_int_le (sg_pool_size (p), MAX (threads[t], 1));
    ck_assert_int_ge (sg_pool_size (p), 1);
    for (int32_t n = 0; n < 300; n += 37) {
      Ctx c = { .ran = g_new0 (gint, (size_t)n + 1), .size = sg_pool_size (p) };
      sg_pool_run (p, n, count_task, &c);
      for (int32_t i = 0; i < n; i++)
        ck_assert_int_eq (c.ran[i], 1);
      ck_assert_int_eq (c.bad_worker, 0);
      g_free (c.ran);
    }
    sg_pool_free (p);
  }
}
END_TEST

static void
outer_task (gpointer data, int32_t task, int32_t worker)
{
  Ctx *c = data;
  (void)task;
  Ctx inner = { .ran = g_new0 (gint, 8), .size = c->size };
  /* inside a task: every inner task runs once, on some worker */
  sg_pool_run (c->pool, 8, count_task, &inner);
  for (int32_t i = 0; i < 8; i++)
    if (inner.ran[i] != 1)
      g_atomic_int_set (&c->bad_worker, 1);
  if (inner.bad_worker || worker >= c->size)
    g_atomic_int_set (&c->bad_worker, 1);
  g_atomic_int_inc (&c->nested_ran);
  g_free (inner.ran);
}

START_TEST (a_job_inside_a_task_runs_every_task_once)
{
  SgPool *p = sg_pool_new (4);
  Ctx c = { .size = sg_pool_size (p), .pool = p };
  sg_pool_run (p, 50, outer_task, &c);
  ck_assert_int_eq (c.nested_ran, 50);
  ck_assert_int_eq (c.bad_worker, 0);
  sg_pool_free (p);
}
END_TEST

/* Inner task 0 waits until inner task 1 has started: only another thread
 * can start it (its own thread is in task 0), so the inner job must spread
 * beyond the thread that started it. */
typedef struct {
  SgPool *pool;
  gint started1, timed_out, worker_of[2];
} Spread;

static void
spread_inner (gpointer data, int32_t task, int32_t worker)
{
  Spread *s = data;
  g_atomic_int_set (&s->worker_of[task], worker);
  if (task == 1) {
    g_atomic_int_set (&s->started1, 1);
    return;
  }
  gint64 until = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;
  while (!g_atomic_int_get (&s->started1))
    if (g_get_monotonic_time () > until) {
      g_atomic_int_set (&s->timed_out, 1);
      return;
    }
}

static void
spread_outer (gpointer data, int32_t task, int32_t worker)
{
  (void)worker;
  Spread *s = data;
  if (task == 0)
    sg_pool_run (s->pool, 2, spread_inner, s);
}

START_TEST (a_job_inside_a_task_spreads_over_other_workers)
{
  Spread s = { .pool = sg_pool_new (3) };
  ck_assert_int_eq (sg_pool_size (s.pool), 3);
  sg_pool_run (s.pool, 2, spread_outer, &s);
  ck_assert_int_eq (s.timed_out, 0);
  ck_assert_int_ne (s.worker_of[0], s.worker_of[1]);
  sg_pool_free (s.pool);
}
END_TEST

/* Sums i * i over tasks into per-task slots: the caller's sum in index
 * order is the same for every pool. */
static void
square_task (gpointer data, int32_t task, int32_t worker)
{
  (void)worker;
  double *out = data;
  out[task] = (double)task * (double)task * 1e-3;
}

START_TEST (many_short_jobs_in_a_row_all_complete_with_the_same_results)
{
  double ref = 0.0;
  {
    double out[64];
    sg_pool_run (NULL, 64, square_task, out);
    for (int i = 0; i < 64; i++)
      ref += out[i];
  }
  SgPool *p = sg_pool_new (6);
  for (int rep = 0; rep < 5000; rep++) {
    double out[64], sum = 0.0;
    int n = 1 + rep % 64;
    sg_pool_run (p, n, square_task, out);
    for (int i = 0; i < n; i++)
      sum += out[i];
    if (n == 64)
      ck_assert (sum == ref);
  }
  sg_pool_free (p);
}
END_TEST

typedef struct {
  SgPool *p;
  gint bad;
} Beside;

static gpointer
beside_main (gpointer data)
{
  Beside *b = data;
  for (int rep = 0; rep < 200; rep++) {
    Ctx c = { .ran = g_new0 (gint, 40), .size = sg_pool_size (b->p) };
    sg_pool_run (b->p, 40, count_task, &c);
    for (int i = 0; i < 40; i++)
      if (c.ran[i] != 1)
        g_atomic_int_set (&b->bad, 1);
    g_free (c.ran);
  }
  return NULL;
}

START_TEST (jobs_from_two_threads_at_once_both_complete)
{
  Beside b = { .p = sg_pool_new (4) };
  GThread *t = g_thread_new ("beside", beside_main, &b);
  beside_main (&b);
  g_thread_join (t);
  ck_assert_int_eq (b.bad, 0);
  sg_pool_free (b.p);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("pool");
  TCase *tc = tcase_create ("pool");
  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, every_task_runs_once_whatever_the_thread_count);
  tcase_add_test (tc, a_job_inside_a_task_runs_every_task_once);
  tcase_add_test (tc, a_job_inside_a_task_spreads_over_other_workers);
  tcase_add_test (tc, many_short_jobs_in_a_row_all_complete_with_the_same_results);
  tcase_add_test (tc, jobs_from_two_threads_at_once_both_complete);
  suite_add_tcase (s, tc);
  return run_suite (s);
}
